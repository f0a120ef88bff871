"""Damage in a job's Redis state (a junk bitmap, a lane record of another shape, params that are not JSON,
page and tail records, runs, feed marks): one line naming the Redis key, the target and the problem; the
keys left as they were (the SQLite store's kinds: tests/unit/test_state_damage.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import redis

from idcrawl.core.recrawl import Kind, Schedule
from idcrawl.distributed.state import JobStateStore
from idcrawl.state.base import FeedMarks
from idcrawl.state.decode import DamagedState
from idcrawl.state.redis import RedisStateStore
from tests.support.states import FOUND, MISSING, ids

PREFIX = "t:{job}:"


def _write(client: Any) -> RedisStateStore:
    store = RedisStateStore(client, PREFIX)
    store.commit({"reg": {"url": "https://reg.example/{id}", "start": 1, "min": None, "max": None,
                          "direction": "asc"}},
                 {"reg": {FOUND: ids((1, 4)), MISSING: ids(5)}},
                 {"reg": {}}, feeds=FeedMarks(1, {"/tmp/items.jsonl": 10}),
                 pages={"reg": {1: Schedule(Kind.PAGE, "reg/1", 10.0, 60.0)}},
                 tails={"reg": Schedule(Kind.TAIL, "reg", 10.0, 60.0, last_found=4)})
    client.hset(PREFIX + "lanes:reg", "reg:asc", '{"key": "reg:asc", "start": 1, "step": 1, "stop": null, '
                '"cursor": 6, "last_found": 4, "cut_at": 5, "reason": "margin"}')
    run = store.begin_run("2026-11-27T10:00:00.000Z", ["reg"])
    store.end_run(run, "2026-11-27T10:01:00.000Z", "finished", {})
    return store


DAMAGE = [
    ("junk bitmap", lambda c: c.hset(PREFIX + "o:reg", "found", b"junk" * 4), "load",
     ["key 't:{job}:o:reg'", "'reg'", "found ids are not a bitmap"]),
    ("bad lane record", lambda c: c.hset(PREFIX + "lanes:reg", "reg:asc", '{"x":1}'), "load",
     ["key 't:{job}:lanes:reg'", "lane 'reg:asc' lacks field"]),
    ("bad params JSON", lambda c: c.hset(PREFIX + "targets", "reg", "[1,2"), "load",
     ["key 't:{job}:targets'", "params is not valid JSON"]),
    ("page record", lambda c: c.hset(PREFIX + "pages:reg", "1", "{}"), "load_pages",
     ["key 't:{job}:pages:reg'", "page 1 lacks field 'last_crawled'"]),
    ("tail record", lambda c: c.hset(PREFIX + "tails", "reg", "7"), "tail_schedules",
     ["key 't:{job}:tails'", "tail schedule is not a JSON object"]),
    ("run row", lambda c: c.rpush(PREFIX + "runs", "{oops"), "runs", ["key 't:{job}:runs'", "not valid JSON"]),
    ("feed mark", lambda c: c.hset(PREFIX + "feeds:1", "/tmp/items.jsonl", "far"), "feed_marks",
     ["key 't:{job}:feeds:1'", "offset = 'far'"]),
]


@pytest.mark.parametrize(("kind", "spoil", "read", "words"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damaged_redis_state_is_one_line_naming_the_key(redis_server: Any, kind: str, spoil: Any, read: str,
                                                         words: list[str]) -> None:
    client = redis.Redis.from_url(redis_server.url)
    _write(client)
    spoil(client)
    before = {key: client.dump(key) for key in client.keys("*")}
    reader = RedisStateStore(client, PREFIX, read_only=True)
    with pytest.raises(DamagedState) as caught:
        method = getattr(reader, read)
        method("reg") if read in ("load", "load_pages") else method()
    message = str(caught.value)
    assert "\n" not in message and message.startswith("Redis state 't:{job}:': damaged state: ")
    for word in words:
        assert word in message, message
    assert {key: client.dump(key) for key in client.keys("*")} == before


# -- a distributed job's own keys ------------------------------------------------------------------------------


def test_a_damaged_target_spec_is_refused_in_one_line_when_a_worker_joins(redis_server: Any) -> None:
    from tests.integration.test_distributed_frontier import frontier, target

    frontier(redis_server, "a").add_target(target())
    client = redis.Redis.from_url(redis_server.url)
    client.hset(PREFIX + "specs", "reg", "{not json")
    with pytest.raises(DamagedState, match=r"^Redis job 't:\{job\}:': damaged state: key 't:\{job\}:specs', "
                                           r"target 'reg': the target's spec is not valid JSON"):
        frontier(redis_server, "b").add_target(target())
    with pytest.raises(DamagedState, match=re.escape("key 't:{job}:specs', target 'reg'")):
        JobStateStore(client, PREFIX, read_only=True).load("reg")


def test_a_distributed_lane_of_junk_fields_is_one_line(redis_server: Any) -> None:
    from tests.integration.test_distributed_frontier import frontier, target

    frontier(redis_server, "a").add_target(target())
    client = redis.Redis.from_url(redis_server.url)
    client.hset(PREFIX + "L:reg:asc", "fu", "soon")
    with pytest.raises(DamagedState, match=r"key 't:\{job\}:L:reg:asc'.*lane 'reg:asc': start, step"):
        JobStateStore(client, PREFIX, read_only=True).load("reg")


def test_held_outputs_that_do_not_unpickle_are_damage_not_a_traceback() -> None:
    from idcrawl.distributed.codec import decode_outputs

    with pytest.raises(DamagedState, match="the outputs of a found id do not decode"):
        decode_outputs(b"junk", spider=None)


def test_a_queued_url_of_junk_fields_is_one_line(redis_server: Any) -> None:
    from idcrawl.distributed.urlqueue import RedisUrlQueue
    from tests.integration.test_redis_urlqueue import FRONT, one_seed

    client = redis.Redis.from_url(redis_server.url)
    prefix = "idcrawl:{plan}:"
    queue = RedisUrlQueue(client, prefix, "w1")
    queue.start(one_seed(1), 0.0)
    queue.seed("front", FRONT, 0.0)
    client.hset(f"{prefix}U:{FRONT}", "hops", "far")
    with pytest.raises(DamagedState, match=re.escape(f"Redis state {prefix!r}: damaged state: key "
                                                     f"'{prefix}U:{FRONT}': the URL's fields")):
        JobStateStore(client, prefix, read_only=True).load_urls()


# -- real crawls and commands on a damaged Redis state -----------------------------------------------------------


@pytest.mark.parametrize(("key", "field", "value", "words"), [
    ("lanes:reg", "reg:asc", '{"x":1}', ["key 'idcrawl:{single}:lanes:reg'", "lacks field"]),
    ("o:reg", "found", "junk", ["key 'idcrawl:{single}:o:reg'", "found ids are not a bitmap"]),
], ids=["lane record", "bitmap"])
def test_a_crawl_and_idplan_on_a_damaged_redis_state_stop_in_one_line(
    make_site: Any, redis_server: Any, tmp_path: Path, key: str, field: str, value: str, words: list[str]
) -> None:
    from tests.conftest import GapModel
    from tests.integration.test_idjob import scrapy
    from tests.support.crawl import run_crawl

    site = make_site(GapModel(900, 1099, {1010, 1011}))
    settings = {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "single"}
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "min": 900, "name": "reg"}
    assert run_crawl(tmp_path, args, settings).returncode == 0
    client = redis.Redis.from_url(redis_server.url)
    client.hset(f"idcrawl:{{single}}:{key}", field, value)
    before = {k: client.dump(k) for k in client.keys("*")}
    site.log.clear()
    result = run_crawl(tmp_path, {**args, "resume": "bound"}, settings)
    assert result.returncode != 0 and site.log == []
    plan = scrapy(tmp_path, "idplan", settings=settings)
    assert plan.returncode != 0
    for stderr in (result.stderr, plan.stderr):
        assert "Traceback" not in stderr, stderr[-3000:]
        [line] = [line for line in stderr.splitlines() if "damaged state" in line]
        assert all(word in line for word in words), line
    assert {k: client.dump(k) for k in client.keys("*")} == before
