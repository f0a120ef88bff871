"""Stored signatures and captures of crawl-scope pages (issues 31, 33), one process, SQLite state: a
recrawl of the URL queue's pages gives an item only for a page with a new signature, as for id pages;
a 304 keeps the stored signature; the WARC output has revisit records referring to the stored captures.

The link-graph site answers two of its four pages with an ETag (and a 304 to its ``If-None-Match``);
run 2 changes one page without an ETag; run 3 stops sending ETags (a backend that ignores validators),
so the pages that answered 304 answer 200 with the same body.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idcrawl.archive.middleware import IDENTICAL, NOT_MODIFIED
from idcrawl.core.clock import parse_time
from idcrawl.core.scope import UrlRecord, canonical
from tests.crawl.test_urlqueue_crawl import at, crawl, stored
from tests.support.linkgraph import LinkGraphSite
from tests.support.redirect_site import RedirectSite
from tests.support.warcs import read_warcs

GRAPH = {
    "http://a.test/": ["http://a.test/1", "http://a.test/2"],
    "http://a.test/1": ["http://a.test/2", "http://a.test/3"],
    "http://a.test/2": [],
    "http://a.test/3": [],
}
ETAGS = {"http://a.test/1", "http://a.test/3"}


def job(site: LinkGraphSite | RedirectSite) -> str:
    return f"""
[[crawl_profiles]]
name = "daily"
max_hops = 2
revisit = "1d"

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["daily"]
"""


@pytest.fixture
def site() -> Iterator[LinkGraphSite]:
    server = LinkGraphSite(GRAPH, etags=ETAGS).start()
    yield server
    server.stop()


def path_of(site: LinkGraphSite, url: str) -> str:
    return url.split(f":{site.port}", 1)[1]


def records(workdir: Path, site: LinkGraphSite) -> dict[str, UrlRecord]:
    return {path_of(site, url): entry.record for url, entry in stored(workdir).items()}


def new_records(warc: Path, seen: set[str]) -> list[Any]:
    """The page records (responses, revisits) of ``warc`` whose record id is not in ``seen`` (added to it)."""
    out = [r for r in read_warcs(warc) if r.headers["WARC-Record-ID"] not in seen
           and r.type in ("response", "revisit") and not r.uri.endswith("/robots.txt")]
    seen.update(r.headers["WARC-Record-ID"] for r in out)
    return out


def test_a_recrawl_of_unchanged_url_pages_gives_no_item_and_writes_revisits(site: LinkGraphSite,
                                                                            tmp_path: Path) -> None:
    warc = tmp_path / "warc"
    settings = {"IDCRAWL_WARC_DIR": str(warc)}
    seen: set[str] = set()

    first = crawl(tmp_path, job(site), {**at(0), **settings})
    assert sorted(path_of(site, item["url"]) for item in first.items) == ["/", "/1", "/2", "/3"]
    captures = {path_of(site, r.uri): r for r in new_records(warc, seen)}
    assert {path: r.type for path, r in captures.items()} == dict.fromkeys(["/", "/1", "/2", "/3"], "response")
    kept = records(tmp_path, site)
    for item in first.items:  # each URL record keeps its signature, validators and capture
        record = kept[path_of(site, item["url"])]
        capture = captures[path_of(site, item["url"])]
        assert record.checksum == item["checksum"]
        assert (record.etag is not None) == (canonical(f"http://a.test{path_of(site, item['url'])}") in ETAGS)
        assert record.capture == (capture.uri, capture.date, capture.headers["WARC-Payload-Digest"])

    site.graph["http://a.test/2"] = ["http://a.test/3"]  # /2 changes; the others do not
    second = crawl(tmp_path, job(site), {**at(25), **settings})  # a day later: all four due
    assert [path_of(site, item["url"]) for item in second.items] == ["/2"]
    assert second.stats["idcrawl/crawl_profiles/daily/revisits"] == 4
    assert second.stats["idcrawl/crawl_profiles/daily/conditional"] == 2
    assert second.stats["idcrawl/crawl_profiles/daily/not_modified"] == 2
    assert second.stats["idcrawl/crawl_profiles/daily/unchanged"] == 1
    after = records(tmp_path, site)
    assert after["/2"].checksum == second.items[0]["checksum"] != kept["/2"].checksum
    for path in ("/", "/1", "/3"):  # a 304 and a same signature keep the stored signature and capture
        assert (after[path].checksum, after[path].capture) == (kept[path].checksum, kept[path].capture)
        assert after[path].cycles == 2
    later = {path_of(site, r.uri): r for r in new_records(warc, seen)}
    assert later["/2"].type == "response"
    profiles = {path: r.headers.get("WARC-Profile") for path, r in later.items() if r.type == "revisit"}
    assert profiles == {"/": IDENTICAL, "/1": NOT_MODIFIED, "/3": NOT_MODIFIED}
    for path in profiles:  # referring to run 1's capture
        assert later[path].headers["WARC-Refers-To-Target-URI"] == captures[path].uri
        assert later[path].headers["WARC-Refers-To-Date"] == captures[path].date
        assert later[path].headers["WARC-Payload-Digest"] == captures[path].headers["WARC-Payload-Digest"]
    captures["/2"] = later["/2"]

    site.etags.clear()  # a backend that ignores validators: 200s with the bodies that answered 304
    third = crawl(tmp_path, job(site), {**at(50), **settings})
    assert third.items == []
    assert third.stats["idcrawl/crawl_profiles/daily/unchanged"] == 4
    last = {path_of(site, r.uri): r for r in new_records(warc, seen)}
    assert {path: r.headers.get("WARC-Profile") for path, r in last.items()} == dict.fromkeys(
        ["/", "/1", "/2", "/3"], IDENTICAL)
    for path, revisit in last.items():
        assert revisit.headers["WARC-Refers-To-Date"] == captures[path].date


def test_a_url_page_whose_body_is_older_than_refetch_after_is_fetched_without_validators(site: LinkGraphSite,
                                                                                        tmp_path: Path) -> None:
    """A server stuck on 304 cannot hide a change for ever (issue 31's forced refetch, for crawl-scope pages
    as for id pages): past ``IDCRAWL_RECRAWL_REFETCH_AFTER`` a revisit sends no validators, and the body it
    reads restarts that clock."""
    day = {"IDCRAWL_RECRAWL_REFETCH_AFTER": "1d"}
    crawl(tmp_path, job(site), {**at(0), **day})
    site.graph["http://a.test/3"] = ["http://a.test/2"]  # changed behind its ETag: a 304 would hide it
    second = crawl(tmp_path, job(site), {**at(25), **day})  # bodies read 25 h ago: refetched
    assert "idcrawl/crawl_profiles/daily/conditional" not in second.stats
    assert second.stats["idcrawl/crawl_profiles/daily/refetched"] == 4
    assert [path_of(site, item["url"]) for item in second.items] == ["/3"]
    assert {path: record.read_at for path, record in records(tmp_path, site).items()} == dict.fromkeys(
        ["/", "/1", "/2", "/3"], parse_time(at(25)["IDCRAWL_NOW"]))
    third = crawl(tmp_path, job(site), {**at(50), "IDCRAWL_RECRAWL_REFETCH_AFTER": "2d"})  # 25 h old: conditional
    assert third.stats["idcrawl/crawl_profiles/daily/conditional"] == 2
    assert third.stats["idcrawl/crawl_profiles/daily/not_modified"] == 2
    assert "idcrawl/crawl_profiles/daily/refetched" not in third.stats
    assert third.items == []


def test_a_page_redirected_to_its_own_canonical_url_keeps_its_signature(tmp_path: Path) -> None:
    """A queued URL whose site redirects it to another spelling of itself (the same canonical URL, as
    ``:80`` or reordered query arguments): the redirected request still carries the stored signature,
    so an unchanged page is no item on its revisit."""
    spelled = "http://a.test/p?b=1&a=2"  # the site's spelling; the queue keeps the canonical one
    graph = {"http://a.test/": ["http://a.test/p?a=2&b=1"], spelled: []}
    with RedirectSite(graph, {"http://a.test/p?a=2&b=1": spelled}) as server:
        first = crawl(tmp_path, job(server), at(0))
        assert sorted(item["url"].split(f":{server.port}", 1)[1] for item in first.items) == ["/", "/p?a=2&b=1"]
        second = crawl(tmp_path, job(server), at(25))  # a day later: both due, neither changed
        assert second.stats["idcrawl/crawl_profiles/daily/revisits"] == 2
        assert second.items == []
        assert second.stats["idcrawl/crawl_profiles/daily/unchanged"] == 2
