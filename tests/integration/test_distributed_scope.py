"""Crawl scope in a distributed job: three real ``scrapy crawl`` workers, one redis-server, the
link-graph site (several host names on one local port, resolved to 127.0.0.1 by the tests'
resolver, never a real DNS lookup).

The outlinks go through the job's shared URL queue (:mod:`idcrawl.distributed.urlqueue`): the fleet
fetches the URL set one process fetches, each URL once; a worker SIGKILLed while it holds taken
URLs loses none of them (another worker fetches them after the lease).
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.integration.test_idjob import redis_settings, scrapy
from tests.support.crawl import read_items, run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings

redis = pytest.importorskip("redis")

HOSTS = ("a.test", "b.test", "c.test", "d.test")


def make_graph(seed: int, pages: int = 90) -> dict[str, list[str]]:
    """A seeded link graph over four hosts (d.test out of scope: no request), some pages missing (404)."""
    rng = random.Random(seed)
    urls = ["http://a.test/"] + [f"http://{rng.choice(HOSTS)}/p{i}" for i in range(1, pages)]
    graph = {url: [rng.choice(urls) for _ in range(rng.randint(1, 5))] for url in urls}
    for url in rng.sample(urls[1:], pages // 10):
        del graph[url]  # 404
    return graph


def job(path: Path, site: LinkGraphSite) -> Path:
    path.write_text(f"""
[[crawl_profiles]]
name = "net"
scope = "any"
max_hops = 8
exclude = ["//d\\\\.test"]

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["net"]
""")
    return path


def fetched(site: LinkGraphSite) -> Counter[tuple[str, str]]:
    with site._lock:
        return Counter((host, path) for host, path in site.log if path != "/robots.txt")


def page_of(url: bytes) -> tuple[str, str]:
    """A URL of the fleet's queue as the site logs its request: (host, path)."""
    parts = urlsplit(url.decode())
    return parts.hostname or "", parts.path


def settings(redis_server: object, name: str, **extra: object) -> dict[str, object]:
    return {**worker_settings(redis_server, job=name, **extra), **resolver_settings(HOSTS)}


def test_three_workers_fetch_the_url_set_of_one_process_each_url_once(redis_server, tmp_path: Path) -> None:
    site = LinkGraphSite(make_graph(16)).start()
    try:
        path = job(tmp_path / "job.toml", site)
        (tmp_path / "single").mkdir()
        single = run_crawl(tmp_path / "single", {"job": path}, resolver_settings(HOSTS))
        assert single.returncode == 0, single.stderr[-3000:]
        one = fetched(site)
        assert max(one.values()) == 1 and len(one) > 40  # 49 pages
        assert not any(host == "d.test" for host, _ in one)
        site.log.clear()

        procs = [start_worker(tmp_path / f"w{n}", {"job": path}, settings(redis_server, "scope")) for n in range(3)]
        results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
        for result in results:
            assert result.returncode == 0, result.stderr[-3000:]
            assert result.stats["finish_reason"] == "finished"
        fleet = fetched(site)
        assert set(fleet) == set(one)  # the same URL set as one process
        assert max(fleet.values()) == 1, [page for page, n in fleet.items() if n > 1]  # each URL once
        items = [item["url"] for result in results for item in result.items]
        assert sorted(items) == sorted(item["url"] for item in single.items)
        shares = [result.stats.get("idcrawl/crawl_profiles/net/fetched", 0) for result in results]
        assert sum(shares) == single.stats["idcrawl/crawl_profiles/net/fetched"]
        # how the work is shared depends on the workers' start times: one worker that started first may take
        # all of it (seen at load 15); that another worker fetches what one holds is the SIGKILL test below
        # idplan reads the fleet's queue from Redis: the single process's counts by hops
        fleet_plan = scrapy(tmp_path, "idplan", "--json", settings=redis_settings(redis_server, "scope"))
        single_plan = scrapy(tmp_path / "single", "idplan", "--json", settings={})
        assert fleet_plan.returncode == 0 and single_plan.returncode == 0, fleet_plan.stderr + single_plan.stderr
        scope = json.loads(fleet_plan.stdout)["scope"]
        assert scope == json.loads(single_plan.stdout)["scope"]
        assert [row["harvested"] for row in scope] == [len(one)]
        table = scrapy(tmp_path, "idplan", settings=redis_settings(redis_server, "scope"))
        assert "crawl scope: URLs by hops" in table.stdout, table.stdout + table.stderr
    finally:
        site.stop()


def test_a_sigkilled_workers_taken_urls_are_fetched_by_another(redis_server, tmp_path: Path) -> None:
    """The site's pages are held (its gate) until the three workers have joined and the one to kill,
    the worker that took the front page, is stopped with its requests for them sent (in the site's
    log) and its URLs read: what it held cannot change in between (no timing; a worker stopped between
    taking a URL and sending its request is let go on and stopped again), and no worker joins after the kill (a joining worker would take the dead one
    over itself). It dies before any answer, so it wrote no item (a killed worker's items still in its
    feed's buffer are lost: docs/distributed.md)."""
    gate = threading.Event()
    gate.set()  # the single process: open
    site = LinkGraphSite(make_graph(17), gate=gate).start()
    try:
        path = job(tmp_path / "job.toml", site)
        (tmp_path / "single").mkdir()
        single = run_crawl(tmp_path / "single", {"job": path}, resolver_settings(HOSTS))
        assert single.returncode == 0, single.stderr[-3000:]
        one = fetched(site)
        site.log.clear()

        gate.clear()
        extra = {"IDCRAWL_REDIS_LEASE_TIMEOUT": 3.0}
        procs = [start_worker(tmp_path / f"w{n}", {"job": path}, settings(redis_server, "kill", **extra))
                 for n in range(3)]
        client = redis.Redis.from_url(redis_server.url)

        def holders() -> dict[int, list[bytes]]:  # pid -> the URLs it took and has not answered
            held: dict[int, list[bytes]] = {}
            for url, worker in client.hgetall("idcrawl:{kill}:utaken").items():
                held.setdefault(int(worker.split(b":")[1]), []).append(url)
            return held

        def all_joined() -> bool:
            return client.zcard("idcrawl:{kill}:workers") >= 3

        deadline = time.monotonic() + 120
        while True:  # a worker holding URLs once all have joined, stopped: what it holds
            holding = holders() if all_joined() else {}
            victim = next((n for n, proc in enumerate(procs) if proc.pid in holding), None)
            if victim is not None:
                procs[victim].send_signal(signal.SIGSTOP)
                held = holders().get(procs[victim].pid, [])
                arrived = set(fetched(site))  # requests reach the site's log before its gate
                if held and all(page_of(url) in arrived for url in held):
                    break  # it took them and sent them: only their answers are missing
                procs[victim].send_signal(signal.SIGCONT)
            assert time.monotonic() < deadline, "a worker never joined, or none took a URL"
            time.sleep(0.01)
        procs[victim].send_signal(signal.SIGKILL)  # the survivors wait for its lease
        procs[victim].wait(timeout=30)
        gate.set()
        survivors = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs) if n != victim]
        for result in survivors:
            assert result.returncode == 0, result.stderr[-3000:]
            assert result.stats["finish_reason"] == "finished"
        fleet = fetched(site)
        assert set(fleet) == set(one)  # nothing lost
        twice = {page for page, n in fleet.items() if n > 1}
        dead = {page_of(url) for url in held}
        assert twice <= dead, (twice, dead)  # only what it held when it died is fetched again
        assert held == [site.url("http://a.test/").encode()] and twice == dead
        assert sum(r.stats.get("idcrawl/redis/urls_taken_over", 0) for r in survivors) == len(held)
        got = {item["url"] for item in read_items(tmp_path / f"w{victim}" / "items.jsonl")}
        got |= {item["url"] for r in survivors for item in r.items}
        assert got == {item["url"] for item in single.items}
    finally:
        gate.set()
        site.stop()


def id_graph() -> dict[str, list[str]]:
    """Id pages /item/1..30 (every third missing) linking to outlink pages and to other id pages."""
    rng = random.Random(18)
    pages = [f"http://{rng.choice(HOSTS[:3])}/o{i}" for i in range(40)]
    graph: dict[str, list[str]] = {}
    for i in range(1, 31):
        if i % 3:
            graph[f"http://a.test/item/{i}"] = [rng.choice(pages), f"http://a.test/item/{rng.randint(1, 35)}"]
    for page in pages:
        graph[page] = [rng.choice(pages) for _ in range(2)] + [f"http://a.test/item/{rng.randint(1, 35)}"]
    return graph


def test_three_workers_with_an_id_target_fetch_each_id_page_and_each_outlink_once(redis_server, tmp_path: Path) -> None:
    """Found id pages are hop 0 of their target; a link to an id page is left to the target's lanes."""
    site = LinkGraphSite(id_graph()).start()
    try:
        path = tmp_path / "job.toml"
        path.write_text(f"""
[[crawl_profiles]]
name = "near"
scope = "any"
max_hops = 2

[[targets]]
name = "items"
url = "{site.url('http://a.test/item/{id}')}"
start = 1
max = 30
margin = 0
crawl_profiles = ["near"]
""")
        (tmp_path / "single").mkdir()
        single = run_crawl(tmp_path / "single", {"job": path}, resolver_settings(HOSTS))
        assert single.returncode == 0, single.stderr[-3000:]
        one = fetched(site)
        assert max(one.values()) == 1 and sum(1 for _, p in one if p.startswith("/o")) > 10
        site.log.clear()

        procs = [start_worker(tmp_path / f"w{n}", {"job": path}, settings(redis_server, "ids")) for n in range(3)]
        results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
        for result in results:
            assert result.returncode == 0, result.stderr[-3000:]
        fleet = fetched(site)
        assert set(fleet) == set(one)
        assert max(fleet.values()) == 1, [page for page, n in fleet.items() if n > 1]
        items = sorted(item["url"] for result in results for item in result.items)
        assert items == sorted(item["url"] for item in single.items)
    finally:
        site.stop()
