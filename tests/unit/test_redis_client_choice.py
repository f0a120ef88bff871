"""Which Redis client the settings ask for: plain, a cluster's or the sentinels' primary, never two."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from idcrawl.distributed.connection import RedisUnavailable, connect

pytest.importorskip("redis")


def test_a_cluster_and_sentinels_both_set_are_one_line_naming_both() -> None:
    settings = Settings({
        "IDCRAWL_REDIS_CLUSTER": True, "IDCRAWL_REDIS_SENTINELS": "127.0.0.1:1,127.0.0.1:2",
        "REDIS_URL": "redis://:secret@127.0.0.1:1/0",
    })
    with pytest.raises(RedisUnavailable) as caught:
        connect(settings)
    message = str(caught.value)
    assert "IDCRAWL_REDIS_CLUSTER" in message and "IDCRAWL_REDIS_SENTINELS" in message, message
    assert "\n" not in message and "secret" not in message
