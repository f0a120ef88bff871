"""Crawl-scope rules in a fleet (issue 30, findings 5 and 7): two ``scrapy crawl`` workers, one redis-server.

Redirects are links in the shared URL queue (a target new to the job is taken by the worker that follows the
redirect, filed taken by ``URL_OFFER``; a known or out-of-scope one is not followed) and a crawl profile's
canonicalisation rules make ``?utm_*`` variants one URL: the fleet fetches what one process fetches, each
page once, and the host out of scope gets no request.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.support.crawl import run_crawl
from tests.support.linkgraph import resolver_settings
from tests.support.redirect_site import RedirectSite

redis = pytest.importorskip("redis")

HOSTS = ("a.test", "x.test")
N = 12


def graph() -> tuple[dict[str, list[str]], dict[str, str]]:
    """The front page links to redirects r<i> and pages p<i> (each also under utm_* variants); r<i>
    redirects to x.test (i % 3 == 0: out of scope), to p<i> (1: known), or to t<i> (2: new)."""
    front = "http://a.test/"
    pages: dict[str, list[str]] = {front: []}
    redirects: dict[str, str] = {}
    for i in range(N):
        pages[front] += [f"http://a.test/r{i}", f"http://a.test/p{i}", f"http://a.test/p{i}?utm_source={i}"]
        pages[f"http://a.test/p{i}"] = [f"http://a.test/p{(i + 1) % N}?utm_medium=x", front]
        pages[f"http://a.test/t{i}"] = [f"http://a.test/p{i}"]
        pages[f"http://x.test/o{i}"] = []
        redirects[f"http://a.test/r{i}"] = ("http://x.test/o{i}", "http://a.test/p{i}", "http://a.test/t{i}")[
            i % 3].format(i=i)
    return pages, redirects


def job(path: Path, site: RedirectSite) -> Path:
    path.write_text(f"""
[[crawl_profiles]]
name = "site"
max_hops = 3
canonicalise = {{drop_query = ["utm_*"]}}

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["site"]
""")
    return path


def test_two_workers_follow_redirects_as_links_and_fetch_each_canonical_url_once(redis_server, tmp_path: Path) -> None:
    pages, redirects = graph()
    with RedirectSite(pages, redirects) as site:
        path = job(tmp_path / "job.toml", site)
        (tmp_path / "single").mkdir()
        single = run_crawl(tmp_path / "single", {"job": path}, resolver_settings(HOSTS))
        assert single.returncode == 0, single.stderr[-3000:]
        one = Counter(site.fetched("a.test"))
        expected = {"/", *(f"/r{i}" for i in range(N)), *(f"/p{i}" for i in range(N)),
                    *(f"/t{i}" for i in range(N) if i % 3 == 2)}
        assert one == Counter(dict.fromkeys(expected, 1))
        assert site.fetched("x.test") == []
        site.log.clear()

        settings = {**worker_settings(redis_server, job="rules"), **resolver_settings(HOSTS)}
        procs = [start_worker(tmp_path / f"w{n}", {"job": path}, settings) for n in range(2)]
        results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
        for result in results:
            assert result.returncode == 0, result.stderr[-3000:]
        assert Counter(site.fetched("a.test")) == one  # the same pages, each once
        assert site.fetched("x.test") == []
        items = sorted(item["url"] for result in results for item in result.items)
        assert items == sorted(item["url"] for item in single.items)
        finals = {item["url"]: item.get("final_url") for result in results for item in result.items}
        for i in range(2, N, 3):  # reached only through its redirect: followed, both URLs on the item
            assert finals[site.url(f"http://a.test/r{i}")] == site.url(f"http://a.test/t{i}")

        def total(key: str) -> int:
            return sum(result.stats.get(f"idcrawl/scope/redirects/{key}", 0) for result in results)

        assert (total("out_of_scope"), total("known"), total("followed")) == (N // 3, N // 3, N // 3)


def test_the_shared_queue_takes_a_redirects_new_target_for_the_worker_that_follows_it(redis_server) -> None:
    """``RedisUrlQueue.redirected``: a new target in scope is claimed by the redirected worker (no other
    worker takes it), a known or out-of-scope one is not followed, as in one process."""
    import random

    from idcrawl.core.scope import CrawlProfile, Hops, JobScope, Seed
    from idcrawl.core.urlqueue import QueueState
    from idcrawl.distributed.urlqueue import RedisUrlQueue

    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"t": Seed("t", "http://a.test/", ("p",))}, {"p": CrawlProfile("p", 2)}, pages=("t",))

    def worker(name: str) -> RedisUrlQueue:
        queue = RedisUrlQueue(client, "r:{claim}:", name, lease_ms=60_000, rng=random.Random(1))
        queue.start(scope, 0.0)
        return queue

    one, two = worker("w1"), worker("w2")
    one.seed("t", "http://a.test/", 0.0)
    assert one.take(lambda _: True, 0.0) is not None
    one.fetched("http://a.test/", ["http://a.test/r1", "http://a.test/a1"], 0.0)
    taken = {record.url for record in (one.take(lambda _: True, 0.0), one.take(lambda _: True, 0.0)) if record}
    assert taken == {"http://a.test/r1", "http://a.test/a1"}
    assert one.redirected("http://a.test/r1", "http://x.test/out", 1.0) is None  # another host
    assert one.get("http://x.test/out") is None
    assert one.redirected("http://a.test/a1", "http://a.test/r1", 1.0) is None  # known
    one.fetched("http://a.test/r1", ["http://a.test/a1"], 1.0)
    claimed = one.redirected("http://a.test/a1", "http://a.test/a5", 1.0)
    assert claimed is not None and claimed.state is QueueState.TAKEN and claimed.record.hops == Hops(2, 0)
    assert two.take(lambda _: True, 1.0) is None  # the other worker finds nothing to take
    entry = two.get("http://a.test/a5")
    assert entry is not None and entry.state is QueueState.TAKEN and "http://a.test/a5" in one.taken


def test_a_redirects_new_target_is_never_ready_for_another_worker_before_the_redirected_one_takes_it(
        redis_server) -> None:
    """Between the offer of a redirect's new target and the rest of ``redirected``, another worker asks for
    a URL: it finds none, and the redirected worker follows the redirect (before, the target was queued
    first and claimed after: the other worker could take it and fetch it as a plain link)."""
    import random

    from idcrawl.core.scope import CrawlProfile, JobScope, Seed
    from idcrawl.core.urlqueue import QueueState
    from idcrawl.distributed.urlqueue import RedisUrlQueue

    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"t": Seed("t", "http://a.test/", ("p",))}, {"p": CrawlProfile("p", 2)}, pages=("t",))
    one, two = (RedisUrlQueue(client, "r:{race}:", name, lease_ms=60_000, rng=random.Random(1)) for name in ("w1", "w2"))
    one.start(scope, 0.0)
    two.start(scope, 0.0)
    one.seed("t", "http://a.test/", 0.0)
    assert one.take(lambda _: True, 0.0) is not None
    one.fetched("http://a.test/", ["http://a.test/r1"], 0.0)
    assert one.take(lambda _: True, 0.0) is not None
    follow = one._follow
    others: list[object] = []

    def between(*args: object, **kwargs: object) -> None:  # the other worker's turn, after the offer
        others.append(two.take(lambda _: True, 1.0))
        follow(*args, **kwargs)  # type: ignore[arg-type]

    one._follow = between  # type: ignore[method-assign]
    claimed = one.redirected("http://a.test/r1", "http://a.test/t1", 1.0)
    assert others == [None]
    assert claimed is not None and claimed.state is QueueState.TAKEN and claimed.record.url == "http://a.test/t1"
