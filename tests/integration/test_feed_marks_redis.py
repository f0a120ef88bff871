"""Feed marks kept in Redis (a real redis-server): the marks of the latest run."""

from __future__ import annotations

import pytest
from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.state.base import FeedMarks


def test_redis_keeps_the_feed_marks_of_the_latest_run(redis_server) -> None:
    redis = pytest.importorskip("redis")
    from idcrawl.state.redis import RedisStateStore

    client = redis.Redis.from_url(redis_server.url)
    store = RedisStateStore(client, "test:{marks}:")
    assert store.feed_marks() is None
    store.commit({"t": {}}, {}, {}, feeds=FeedMarks(1, {"/a.jsonl": 10, "/b.jsonl": -1}))
    store.commit({}, {"t": {Outcome.FOUND: BitMap64([5])}}, {}, feeds=FeedMarks(1, {"/a.jsonl": 250}))
    assert store.feed_marks() == FeedMarks(1, {"/a.jsonl": 250, "/b.jsonl": -1})
    store.commit({}, {}, {}, feeds=FeedMarks(2, {"/c.jsonl": 0}))
    store.commit({}, {}, {})
    assert store.feed_marks() == FeedMarks(2, {"/c.jsonl": 0})
    state = store.load("t")
    assert state is not None and list(state.outcomes[Outcome.FOUND]) == [5]
