"""A found page of the crawl scope is harvested in the fleet's queue only once its item is written.

Two ``scrapy crawl`` workers of one distributed job walk the seeded link graph of
``test_distributed_scope``; ``tests.support.hold_item.HoldItem`` holds the item of one page in the
item pipeline of the first worker that parses it, for good. Once that page's links are in Redis
(its response was parsed and followed) the test SIGKILLs that worker: the page's item never
reached its feed. The page is still taken by the dead worker (not harvested), so after its lease
the other worker fetches it again and writes its item: the union of the items of both workers'
feeds is every page one process finds. Duplicates are bounded by what the dead worker wrote to its
feed after its last acknowledgement (its feed is flushed before each acknowledgement, the page
harvested right after: a page whose item was flushed, by Python's buffer or an acknowledgement
the kill cut, is fetched again), and by the URLs it had taken and not answered.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.test_distributed_crawl import finish, start_worker
from tests.integration.test_distributed_scope import HOSTS, fetched, job, make_graph, settings
from tests.support.crawl import read_items, run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings

redis = pytest.importorskip("redis")


def test_a_killed_workers_page_whose_item_was_not_written_is_fetched_again(redis_server, tmp_path: Path) -> None:
    graph = make_graph(19, pages=40)
    site = LinkGraphSite(graph).start()
    try:
        path = job(tmp_path / "job.toml", site)
        (tmp_path / "single").mkdir()
        single = run_crawl(tmp_path / "single", {"job": path}, resolver_settings(HOSTS))
        assert single.returncode == 0, single.stderr[-3000:]
        one = fetched(site)
        # the page held: a found page linked from the front page, with links of its own
        held_page = next(link for link in graph["http://a.test/"]
                         if link in graph and link != "http://a.test/" and "d.test" not in link)
        held_url = site.url(held_page)
        assert held_url in {item["url"] for item in single.items}
        site.log.clear()

        mark = tmp_path / "held"
        extra = {"IDCRAWL_REDIS_LEASE_TIMEOUT": 3.0, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.2,
                 "ITEM_PIPELINES": {"tests.support.hold_item.HoldItem": 100},
                 "HOLD_ITEM_PATH": held_url.split(str(site.port), 1)[1], "HOLD_ITEM_MARK": str(mark)}
        procs = [start_worker(tmp_path / f"w{n}", {"job": path}, settings(redis_server, "hold", **extra))
                 for n in range(2)]
        client = redis.Redis.from_url(redis_server.url)
        key = "idcrawl:{hold}:U:" + held_url
        deadline = time.monotonic() + 120
        # its item is in the holder's pipeline (the mark), its links are offered (the entry has them)
        while not (mark.exists() and mark.read_text() and client.hexists(key, "links")):
            assert time.monotonic() < deadline and all(proc.poll() is None for proc in procs), "never held"
            time.sleep(0.01)  # waits for the workers, not for simulated time
        pid = int(mark.read_text())
        victim = next(n for n, proc in enumerate(procs) if proc.pid == pid)
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait(timeout=30)
        entry = client.hgetall(key)
        assert entry[b"st"] == b"t" and entry[b"w"].split(b":")[1] == str(pid).encode(), entry  # held, not harvested
        survivor = finish(procs[1 - victim], tmp_path / f"w{1 - victim}")
        assert survivor.returncode == 0, survivor.stderr[-3000:]
        assert survivor.stats["finish_reason"] == "finished"
        assert set(fetched(site)) == set(one)
        dead = read_items(tmp_path / f"w{victim}" / "items.jsonl")
        assert held_url not in {item["url"] for item in dead}
        union = Counter(item["url"] for item in dead + survivor.items)
        assert set(union) == {item["url"] for item in single.items}  # every page, at least once
        assert union[held_url] == 1  # the survivor's
        assert client.hget(key, "st") == b"h" and client.hget(key, "cyc") == b"1"  # one harvest counted
    finally:
        site.stop()


def test_a_held_page_offers_its_links_stays_taken_and_counts_one_harvest_once_written(redis_server) -> None:
    """``RedisUrlQueue.fetched(hold=True)`` (URL_HARVEST 'links') and ``written`` (URL_HARVEST 'written'):
    the links are queued at once, the page stays its worker's (taken, no counter moved) until written;
    a worker that stops first leaves it ready again for the fleet, its counters as they were."""
    from idcrawl.core.scope import CrawlProfile, JobScope, ScopeKind, Seed
    from idcrawl.core.urlqueue import QueueState
    from idcrawl.distributed.urlqueue import RedisUrlQueue

    front, link = "http://a.test/0", "http://b.test/1"
    scope = JobScope({"front": Seed("front", front, ("p",))}, {"p": CrawlProfile("p", 1, kind=ScopeKind.ANY)}, {},
                     ("front",))
    client = redis.Redis.from_url(redis_server.url)
    one, two = (RedisUrlQueue(client, "t:{held}:", name, lease_ms=60_000) for name in ("w1", "w2"))
    one.start(scope, 0.0)
    two.start(scope, 0.0)
    one.seed("front", front, 0.0)
    assert one.take(lambda _: True, 0.0) is not None
    queued = one.fetched(front, [link], 5.0, hold=True)
    assert [entry.url for entry in queued] == [link]  # offered at once
    entry = one.get(front)
    assert entry is not None and entry.state is QueueState.TAKEN and entry.links == (link,)
    assert (entry.record.cycles, entry.record.last_harvest) == (0, None)  # not harvested yet
    assert two.ready() == 2  # the link, and the page w1 holds (the fleet is not finished)
    client.zrem("t:{held}:workers", "w1")  # w1 stops before its item is written
    assert two.poll().given_back == 1
    record = two.take(lambda _: True, 6.0)
    assert record is not None and record.url in (front, link)
    if record.url == link:
        record = two.take(lambda _: True, 6.0)
    assert record is not None and record.url == front and record.cycles == 0  # fetched again
    two.fetched(front, [link], 6.0, hold=True)
    done = two.written(front, 6.0)
    assert done is not None and done.state is QueueState.HARVESTED
    assert (done.record.cycles, done.record.last_harvest) == (1, 6.0)  # one harvest
    assert client.hget("t:{held}:utaken", front) is None and front not in two.taken
