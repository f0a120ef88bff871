"""Stored signatures and captures of crawl-scope pages in a fleet (issues 31, 33): the one-process test
(tests/crawl/test_url_signatures_crawl.py) on fleets of two workers sharing the URL queue in Redis. A
page's signature, validators and WARC capture are kept in its ``U:<url>`` hash, so whichever worker
revisits it: no item unless its signature is new, and revisit records refer to any worker's capture.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idcrawl.archive.middleware import IDENTICAL, NOT_MODIFIED
from idcrawl.distributed.urlqueue import read_entries
from tests.crawl.test_url_signatures_crawl import ETAGS, GRAPH, job, new_records, path_of
from tests.crawl.test_urlqueue_crawl import at
from tests.integration.test_distributed_revisit import fleet, total
from tests.support.linkgraph import LinkGraphSite

redis = pytest.importorskip("redis")


@pytest.fixture
def site() -> Iterator[LinkGraphSite]:
    gate = threading.Event()
    gate.set()
    server = LinkGraphSite(GRAPH, gate=gate, etags=ETAGS).start()
    yield server
    server.stop()


def items(results: list[Any], site: LinkGraphSite) -> list[str]:
    return sorted(path_of(site, item["url"]) for result in results for item in result.items)


def test_a_fleets_recrawl_of_unchanged_url_pages_gives_no_item_and_writes_revisits(
    site: LinkGraphSite, redis_server: Any, tmp_path: Path,
) -> None:
    warc = tmp_path / "warc"
    extra = {"IDCRAWL_WARC_DIR": str(warc)}
    client = redis.Redis.from_url(redis_server.url)
    seen: set[str] = set()

    first = fleet(site, tmp_path, "us", 1, 2, job(site), redis_server, {**at(0), **extra})
    assert items(first, site) == ["/", "/1", "/2", "/3"]
    captures = {path_of(site, r.uri): r for r in new_records(warc, seen)}
    checksums = {path_of(site, item["url"]): item["checksum"] for result in first for item in result.items}
    kept = {path_of(site, e.url): e.record for e in read_entries(client, "idcrawl:{us}:")}
    for path, record in kept.items():
        assert record.checksum == checksums[path]
        assert record.capture == (captures[path].uri, captures[path].date,
                                  captures[path].headers["WARC-Payload-Digest"])
        assert (record.etag is not None) == (f"http://a.test{path}" in ETAGS)

    site.graph["http://a.test/2"] = ["http://a.test/3"]
    second = fleet(site, tmp_path, "us", 2, 2, job(site), redis_server, {**at(25), **extra})
    assert items(second, site) == ["/2"]
    assert total(second, "idcrawl/crawl_profiles/daily/not_modified") == 2
    assert total(second, "idcrawl/crawl_profiles/daily/unchanged") == 1
    after = {path_of(site, e.url): e.record for e in read_entries(client, "idcrawl:{us}:")}
    for path in ("/", "/1", "/3"):
        assert (after[path].checksum, after[path].capture) == (kept[path].checksum, kept[path].capture)
    later = {path_of(site, r.uri): r for r in new_records(warc, seen)}
    assert {path: r.headers.get("WARC-Profile") for path, r in later.items()} == {
        "/": IDENTICAL, "/1": NOT_MODIFIED, "/2": None, "/3": NOT_MODIFIED}
    for path in ("/", "/1", "/3"):
        assert later[path].headers["WARC-Refers-To-Target-URI"] == captures[path].uri
        assert later[path].headers["WARC-Refers-To-Date"] == captures[path].date

    site.etags.clear()  # 200s with the bodies that answered 304
    third = fleet(site, tmp_path, "us", 3, 2, job(site), redis_server, {**at(50), **extra})
    assert items(third, site) == []
    assert total(third, "idcrawl/crawl_profiles/daily/unchanged") == 4
