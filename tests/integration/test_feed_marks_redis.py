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


def test_redis_keeps_tail_schedules_exactly_and_reset_forgets_one(redis_server) -> None:
    redis = pytest.importorskip("redis")
    from idcrawl.core.recrawl import Kind, Schedule
    from idcrawl.state.redis import RedisStateStore

    client = redis.Redis.from_url(redis_server.url)
    store = RedisStateStore(client, "test:{tails}:")
    assert store.tail_schedules() == {}
    tail = Schedule(Kind.TAIL, "t", 1_768_201_200.0, 120_960.0, last_found=2**64 - 1, revision=2)
    other = Schedule(Kind.TAIL, "u", 1_768_201_201.5, 60.0)
    store.commit({"t": {}, "u": {}}, {}, {}, tails={"t": tail})
    store.commit({}, {}, {}, tails={"u": other})
    assert RedisStateStore(client, "test:{tails}:", read_only=True).tail_schedules() == {"t": tail, "u": other}
    store.reset("t")
    assert store.tail_schedules() == {"u": other}
