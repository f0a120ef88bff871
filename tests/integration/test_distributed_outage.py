"""Redis outages, piece by piece, on a real redis-server that is stopped and started again.

The worker-level test (a crawl across a restart) is in test_distributed_crawl.py; these pin down
what each piece does with a call that fails or a reply that never arrives.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lxml import etree

from idcrawl.core.lanes import Outcome
from idcrawl.extensions.incidents import Incident, IncidentLog, schema
from tests.integration.test_distributed_frontier import frontier, target
from tests.support.redis_server import RedisServer, require_redis_server

redis = pytest.importorskip("redis")


@pytest.fixture
def durable_redis():
    """A redis-server with an append-only file, so that a restart keeps the data."""
    require_redis_server()
    server = RedisServer(persistent=True).start()
    try:
        yield server
    finally:
        server.stop()


def down(server: RedisServer) -> None:
    assert server.proc is not None
    server.proc.terminate()
    server.proc.wait(timeout=10)


def test_ids_claimed_in_a_lost_reply_go_back_to_the_job(redis_server) -> None:
    worker = frontier(redis_server, "w1", block=3)
    worker.add_target(target(direction="asc", window=8))
    first = worker.next().dispatch
    assert first is not None and first.id == 1000  # 1001 and 1002 wait in the worker's buffer
    # a CLAIM that ran in Redis but whose reply the worker never read (the connection dropped)
    lost = worker.job.claim("w1", "reg:asc", 3, 60_000)
    assert list(lost.ids) == [1003, 1004, 1005]

    assert worker.give_back_unknown() == 3  # only the unknown ones: 1000 in flight, 1001-1002 buffered
    client = worker.job.client
    assert [int(i) for i in client.lrange(worker.job.keys.lane("reg:asc", "free"), 0, -1)] == [1003, 1004, 1005]
    assert sorted(int(i) for i in client.hkeys(worker.job.keys.lane("reg:asc", "own"))) == [1000, 1001, 1002]
    assert worker.give_back_unknown() == 0  # nothing twice

    # the lane goes on: decided in any order, every id gets an outcome and the prefix moves past them
    other = frontier(redis_server, "w2", block=3)
    other.add_target(target(direction="asc", window=8))
    other.poll()
    taken = [other.next().dispatch for _ in range(3)]
    assert [d.id for d in taken if d is not None] == [1003, 1004, 1005]
    for d in taken:
        assert d is not None
        other.record(d.lane, d.id, Outcome.FOUND, (d.lane, d.id, [d.id]))
    for id_ in (1000, 1001, 1002):
        if id_ != 1000:
            assert worker.next().dispatch.id == id_  # type: ignore[union-attr]
        worker.record("reg:asc", id_, Outcome.FOUND, ("reg:asc", id_, [id_]))
    worker.poll()
    assert worker.lanes["reg:asc"].first_undecided == 1006


def test_a_taken_retry_whose_reply_was_lost_is_fetched_again(redis_server) -> None:
    worker = frontier(redis_server, "w1", block=1)
    worker.add_target(target(direction="asc", window=4))
    d = worker.next().dispatch
    assert d is not None and d.id == 1000
    job = worker.job
    job.delay("reg:asc", 1000, 1, b"reg:asc\t1000\nrequest")
    worker.inflight.discard(("reg:asc", 1000))  # the delayed set holds it now
    time.sleep(0.01)
    assert len(job.pop_delayed("w1", 16)) == 1  # ... and the reply is lost
    assert worker.give_back_unknown() == 1
    worker.poll()
    again = worker.next().dispatch
    assert again is not None and again.id == 1000


def test_the_bloom_dupefilter_lets_requests_through_during_an_outage_and_remembers_them(durable_redis) -> None:
    from scrapy.settings import Settings

    from idcrawl.distributed.connection import connect
    from idcrawl.distributed.dupefilters import RedisBloomSeen

    seen = RedisBloomSeen(connect(Settings({"REDIS_URL": durable_redis.url})), "t:{job}:", 0.001, 10_000)
    assert seen.add(b"a" * 20) is False
    assert seen.add(b"a" * 20) is True
    down(durable_redis)
    assert seen.add(b"b" * 20) is False  # no answer: not seen, so the page is fetched
    assert (b"a" * 20) not in seen  # unknown while Redis is away (a duplicate fetch, never a skipped page)
    assert (b"b" * 20) in seen  # kept locally
    durable_redis.start(durable_redis.port)
    assert seen.add(b"c" * 20) is False  # the next call sends what waited
    assert seen.add(b"b" * 20) is True and seen.add(b"a" * 20) is True
    assert len(seen) == 3


def test_bloom_adds_put_off_during_an_outage_wait_and_reach_redis_with_the_next_call(durable_redis) -> None:
    from scrapy.settings import Settings

    from idcrawl.distributed.connection import connect
    from idcrawl.distributed.dupefilters import ADD_BATCH, RedisBloomSeen

    seen = RedisBloomSeen(connect(Settings({"REDIS_URL": durable_redis.url})), "t:{job}:", 0.001, 10_000)
    seen.defer(b"a" * 20)
    down(durable_redis)
    for i in range(ADD_BATCH):  # the batch is full: its call fails, nothing is raised, nothing dropped
        seen.defer(bytes([i]) * 20)
    seen.flush()
    assert len(seen) == ADD_BATCH + 1 and (b"a" * 20) in seen  # kept locally
    durable_redis.start(durable_redis.port)
    assert (b"z" * 20) not in seen  # the next call sends what waited
    assert seen._unsent == [] and len(seen) == ADD_BATCH + 1
    other = RedisBloomSeen(connect(Settings({"REDIS_URL": durable_redis.url})), "t:{job}:", 0.001, 10_000)
    assert (b"a" * 20) in other and all(bytes([i]) * 20 in other for i in range(ADD_BATCH))


def test_the_exact_dupefilter_lets_requests_through_during_an_outage_and_remembers_them(durable_redis) -> None:
    from scrapy import Request
    from scrapy.utils.test import get_crawler

    from idcrawl.distributed.dupefilters import RedisRFPDupeFilter

    crawler = get_crawler(settings_dict={"REDIS_URL": durable_redis.url})
    df = RedisRFPDupeFilter.from_crawler(crawler)
    a, b = Request("http://127.0.0.1:1/a"), Request("http://127.0.0.1:1/b")
    assert df.request_seen(a) is False and df.request_seen(a) is True
    down(durable_redis)
    assert df.request_seen(b) is False
    assert df.request_seen(a) is False  # Redis does not answer: fetched again rather than skipped
    durable_redis.start(durable_redis.port)
    assert df.request_seen(Request("http://127.0.0.1:1/c")) is False
    assert df.request_seen(b) is True
    assert df.server.scard(df.key) == 3


def test_shared_limit_counts_made_during_an_outage_reach_the_fleet_later(durable_redis) -> None:
    from scrapy.settings import Settings

    from idcrawl.core.limits import Limits
    from idcrawl.distributed.limits import shared_trackers

    settings = Settings({"REDIS_URL": durable_redis.url, "IDCRAWL_REDIS_JOB": "lim"})
    domain_tracker, _ = shared_trackers(settings, "idseq")
    limits = Limits(plmax=5)
    first = domain_tracker(limits, "127.0.0.1")
    first.page_loads += 2
    assert first.sync(0.0) is None
    down(durable_redis)
    first.page_loads += 2
    assert first.sync(1.0) is None  # no answer: nothing fired, nothing lost
    durable_redis.start(durable_redis.port)
    second = domain_tracker(limits, "127.0.0.1")
    assert second.page_loads == 2  # the fleet has not heard of the outage's two yet
    first.sync(2.0)
    second.page_loads += 1
    trigger = second.sync(3.0)
    assert second.page_loads == 5 and trigger is not None and trigger.rule == "PLmax"


def test_incidents_wait_for_redis_and_fall_back_to_a_local_log_at_close(durable_redis, tmp_path: Path) -> None:
    from scrapy.settings import Settings

    from idcrawl.distributed.incidents import drain_incidents, incident_log

    fallback = tmp_path / "incidents.xml"
    log = incident_log(Settings({"REDIS_URL": durable_redis.url}), "idseq", fallback)
    log.append(Incident.error("127.0.0.1", "first"))
    down(durable_redis)
    log.append(Incident.error("127.0.0.1", "second"))  # no exception: it waits
    assert len(log) == 1
    durable_redis.start(durable_redis.port)
    log.append(Incident.error("127.0.0.1", "third"))  # sends what waited first
    down(durable_redis)
    log.append(Incident.error("127.0.0.1", "fourth"))
    log.close()  # Redis still away: the fourth goes to the local log
    durable_redis.start(durable_redis.port)

    assert len(IncidentLog(fallback)) == 1
    document = etree.parse(str(fallback))
    schema().assertValid(document)
    assert [e.text for e in document.iter("message")] == ["fourth"]
    merged = tmp_path / "fleet.xml"
    client = redis.Redis.from_url(durable_redis.url)
    assert drain_incidents(client, log.key.removesuffix("incidents"), merged) == 3
    messages = [e.text for e in etree.parse(str(merged)).iter("message")]
    assert messages == ["first", "second", "third"]
