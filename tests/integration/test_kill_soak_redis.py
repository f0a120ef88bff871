"""Kill soak with the state in Redis (a real redis-server): with emit-once each id is in the feeds once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crawl.test_kill_soak import ARGS, BATCH, soak_site, truth
from tests.support.killsoak import kill_soak


def test_with_emit_once_and_the_state_in_redis_each_id_is_in_the_feeds_once(
    make_site, redis_server, tmp_path: Path
) -> None:
    pytest.importorskip("redis")
    model, site = soak_site(make_site)
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, "IDCRAWL_STATE_BACKEND": "redis",
                "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "soak"}
    soak = kill_soak(tmp_path, site, {**ARGS, "url": site.url()}, settings, seed=3, kills=2, between=(60, 150))
    assert soak.final_returncode == 0, soak.final_stderr[-3000:]
    assert sorted({id_ for _, id_ in soak.copies()}) == truth(model), "an id was lost"
    assert max(soak.copies().values()) == 1, f"kill points {soak.kill_points}"
