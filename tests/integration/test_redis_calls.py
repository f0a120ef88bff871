"""What a worker's Redis calls cost: every call counted by the connection, none for lane requests."""

from __future__ import annotations

from typing import Any

import pytest

from idcrawl.runtime import META_KEY

redis = pytest.importorskip("redis")


def crawler_on(redis_server, **settings: Any) -> Any:
    from scrapy.utils.test import get_crawler

    return get_crawler(settings_dict={"REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "calls", **settings})


def counts(stats: Any) -> dict[str, int]:
    return {key: value for key, value in stats.get_stats().items() if key.startswith("idcrawl/redis/")}


def test_every_call_of_a_client_is_counted_once_and_by_name(redis_server) -> None:
    from idcrawl.distributed import scripts
    from idcrawl.distributed.connection import connect

    stats = crawler_on(redis_server).stats
    client = connect(crawler_on(redis_server).settings, stats=stats)
    # the connection's check: PING and INFO
    assert counts(stats) == {"idcrawl/redis/calls": 2, "idcrawl/redis/commands": 2,
                             "idcrawl/redis/commands/ping": 1, "idcrawl/redis/commands/info": 1}
    client.set("calls:{t}:a", 1)
    pipe = client.pipeline(transaction=False)
    pipe.get("calls:{t}:a")
    pipe.incr("calls:{t}:a")
    pipe.incr("calls:{t}:a")
    assert pipe.execute() == [b"1", 2, 3]
    polite = client.register_script(scripts.POLITE)
    keys = ["calls:{t}:polite:h", "calls:{t}:busy:h", "calls:{t}:workers"]
    assert polite(keys=keys, args=["reserve", "r1", 1000, 0, 1, 8000])[0] == 0
    assert polite(keys=keys, args=["reserve", "r2", 1000, 0, 1, 8000])[0] > 0  # another request: it waits
    got = counts(stats)
    # a pipeline is one round trip of three commands; the first call of a script that this Redis does
    # not have yet is three (EVALSHA refused with NOSCRIPT, SCRIPT LOAD, EVALSHA again), the next one
    assert got["idcrawl/redis/calls"] == 2 + 1 + 1 + 3 + 1
    assert got["idcrawl/redis/commands"] == 2 + 1 + 3 + 3 + 1
    assert got["idcrawl/redis/commands/incrby"] == 2  # (redis-py sends INCR as INCRBY) and got["idcrawl/redis/commands/get"] == 1
    assert got["idcrawl/redis/commands/polite"] == 3  # a job script by its name, not "evalsha"
    assert got["idcrawl/redis/commands/script load"] == 1
    assert sum(v for k, v in got.items() if k.startswith("idcrawl/redis/commands/")) == got["idcrawl/redis/commands"]


def test_a_client_without_stats_is_left_as_redis_py_made_it(redis_server) -> None:
    from idcrawl.distributed.connection import connect

    client = connect(crawler_on(redis_server).settings)
    assert "execute_command" not in vars(client) and "pipeline" not in vars(client)


@pytest.mark.parametrize("dupefilter", ["RedisBloomDupeFilter", "RedisRFPDupeFilter"])
def test_lane_requests_cost_the_dupefilter_no_call(redis_server, dupefilter: str) -> None:
    from scrapy import Request
    from scrapy.utils.misc import load_object

    crawler = crawler_on(redis_server, IDCRAWL_DISTRIBUTED=True)
    df = load_object(f"idcrawl.distributed.dupefilters.{dupefilter}").from_crawler(crawler)
    before = counts(crawler.stats)["idcrawl/redis/calls"]
    for id_ in range(50):
        lane = Request(f"http://127.0.0.1:1/n/{id_}", dont_filter=True, meta={META_KEY: {"lane": "a:asc", "id": id_}})
        assert df.request_seen(lane) is False
        assert df.request_seen(lane) is False  # never filtered either
    assert counts(crawler.stats)["idcrawl/redis/calls"] == before


def test_bloom_adds_of_fetched_pages_travel_with_the_next_test(redis_server, monkeypatch) -> None:
    from scrapy import Request
    from scrapy.http import HtmlResponse

    from idcrawl.distributed import dupefilters
    from idcrawl.distributed.dupefilters import ADD_BATCH, RedisBloomDupeFilter

    monkeypatch.setattr(dupefilters, "ADD_DELAY", 3600.0)  # no flush by age in this test
    crawler = crawler_on(redis_server, IDCRAWL_DISTRIBUTED=True, IDCRAWL_DUPEFILTER_CAPACITY=10_000)
    df = RedisBloomDupeFilter.from_crawler(crawler)
    df.open()
    assert df.request_seen(Request("http://127.0.0.1:1/first")) is False  # (+ NOSCRIPT and SCRIPT LOAD)
    calls = counts(crawler.stats)["idcrawl/redis/calls"]
    pages = [Request(f"http://127.0.0.1:1/detail/{i}") for i in range(ADD_BATCH - 1)]
    for request in pages:
        assert df.request_seen(request) is False  # one call each
    for request in pages:  # their responses: the adds wait (ADD_BATCH is not reached)
        df.response_received(HtmlResponse(request.url, body=b"x", request=request), request, None)
    assert counts(crawler.stats)["idcrawl/redis/calls"] == calls + len(pages)
    other = RedisBloomDupeFilter.from_crawler(crawler_on(redis_server, IDCRAWL_DISTRIBUTED=True,
                                                         IDCRAWL_DUPEFILTER_CAPACITY=10_000))
    assert len(other.seen.backend) == 0  # another worker does not know them yet ...
    assert df.request_seen(Request("http://127.0.0.1:1/detail/again")) is False
    assert counts(crawler.stats)["idcrawl/redis/calls"] == calls + len(pages) + 1
    assert len(other.seen.backend) == len(pages)  # ... until the next test carried them, in the same call
    assert all(other.request_seen(request) for request in pages)
    assert counts(crawler.stats)["idcrawl/redis/commands/bloom"] == 2 + len(pages) + 1  # (the first refused with NOSCRIPT)
    df.seen.backend._unsent = [bytes([i]) * 20 for i in range(ADD_BATCH - 1)]  # ADD_BATCH waiting adds ...
    before = counts(crawler.stats)["idcrawl/redis/calls"]
    df._record(b"x" * 20)
    assert counts(crawler.stats)["idcrawl/redis/calls"] == before + 1 and not df.seen.backend._unsent  # ... one call
    assert len(other.seen.backend) == len(pages) + ADD_BATCH
