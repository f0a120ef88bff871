"""Page schedule records kept in Redis (a real redis-server): the store, and a due run of a crawl whose
state is in Redis (``IDCRAWL_STATE_BACKEND = "redis"``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from idcrawl.core.clock import format_time
from idcrawl.core.recrawl import Kind, Schedule
from tests.crawl.test_recrawl_pages_crawl import ARGS, DAY, T0, ChangingModel
from tests.support.crawl import run_crawl

redis = pytest.importorskip("redis")


def test_redis_keeps_page_records_removes_those_that_left_and_reset_forgets_them(redis_server) -> None:
    from idcrawl.state.redis import RedisStateStore

    client = redis.Redis.from_url(redis_server.url)
    store = RedisStateStore(client, "test:{pages}:")
    assert store.load_pages("t") == {}
    one = Schedule(Kind.PAGE, "t/1", T0, DAY, checksum="a", etag='"e"', last_modified="x", last_status=200)
    two = Schedule(Kind.PAGE, "t/2", T0 + 0.5, 2 * DAY, checksum="b", last_status=304, gone=1, revision=3)
    store.commit({"t": {}}, {}, {}, pages={"t": {1: one, 2: two}})
    assert RedisStateStore(client, "test:{pages}:", read_only=True).load_pages("t") == {1: one, 2: two}
    store.commit({}, {}, {}, pages={"t": {2: None}})
    assert store.load_pages("t") == {1: one}
    store.reset("t")
    assert store.load_pages("t") == {}


def test_a_due_run_with_the_state_in_redis_revisits_conditionally(make_site, redis_server, tmp_path: Path) -> None:
    model = ChangingModel()
    site = make_site(model)
    settings = {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "pages"}
    first = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {**settings, "IDCRAWL_NOW": format_time(T0)})
    assert first.returncode == 0 and first.ids == list(range(1, 101)), first.stderr[-3000:]
    changed = sorted(random.Random(5).sample(range(1, 101), 10))  # seeded
    for id_ in changed:
        model.version[id_] += 1
    site.log.clear()
    second = run_crawl(tmp_path, {**ARGS, "url": site.url(), "resume": "due"},
                       {**settings, "IDCRAWL_NOW": format_time(T0 + 2 * DAY)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats["idcrawl/pages/conditional"] == 100
    assert second.stats["idcrawl/pages/not_modified"] == 90
    assert second.ids == changed and {item["revision"] for item in second.items} == {2}
