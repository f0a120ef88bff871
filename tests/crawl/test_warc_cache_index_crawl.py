"""WARC output (issue 33): what Scrapy's HTTP cache serves is not archived again; the CDXJ indexes, made by
a thread of their own, are all there when the crawl has ended.

With the cache, the first crawl fetches from the site (and fills ``HTTPCACHE_DIR``); the second, without
state, gets every answer from the cache: the site sees no request, and no record is written
(``idcrawl/warc/cached``). One request at a time, so both crawls send the same requests: how far a
lane speculates past its end depends on when answers arrive, and an id only the second crawl asks for
would be fetched from the site. With a small ``IDCRAWL_WARC_MAX_SIZE`` a crawl rotates its file many times:
each finished file has an index listing each of its records when the process exits.
"""

from __future__ import annotations

from pathlib import Path

from tests.crawl.test_recrawl_pages_crawl import ChangingModel
from tests.support.crawl import run_crawl
from tests.support.warcs import read_warcs


def test_responses_served_by_the_http_cache_are_not_archived_again(make_site, tmp_path: Path) -> None:
    site = make_site(ChangingModel())
    warc = tmp_path / "warc"
    args = {"url": site.url(), "start": 95, "margin": 3, "name": "reg"}
    settings = {"IDCRAWL_WARC_DIR": str(warc), "IDCRAWL_STATE": False, "HTTPCACHE_ENABLED": True,
                "HTTPCACHE_DIR": str(tmp_path / "httpcache"), "CONCURRENT_REQUESTS": 1}
    first = run_crawl(tmp_path, args, settings, output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.ids == list(range(95, 101))
    fetched = len(site.log)
    assert fetched == 10
    records = read_warcs(warc)
    assert len([r for r in records if r.type == "response"]) == fetched  # robots.txt and 9 ids
    assert "idcrawl/warc/cached" not in first.stats

    second = run_crawl(tmp_path, args, settings, output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.ids == list(range(95, 101))
    assert len(site.log) == fetched  # all from the cache
    assert read_warcs(warc) == records  # nothing written again, not even a file
    assert second.stats["idcrawl/warc/cached"] == fetched
    assert "idcrawl/warc/response" not in second.stats and "idcrawl/warc/request" not in second.stats


def test_every_file_of_a_rotating_crawl_has_its_whole_index_when_the_crawl_ends(make_site, tmp_path: Path) -> None:
    from tests.support.warcs import check_warc

    site = make_site(ChangingModel())
    warc = tmp_path / "warc"
    settings = {"IDCRAWL_WARC_DIR": str(warc), "IDCRAWL_WARC_MAX_SIZE": 8_000}
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "margin": 3, "name": "reg"}, settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1, 101))
    files = sorted(warc.glob("*.warc.gz"))
    assert len(files) >= 10
    assert not list(warc.glob("*.open")) and not list(warc.glob("*.tmp"))
    indexed = 0
    for path in files:
        assert check_warc(path) == [], path
        records = [r for r in read_warcs(warc, path.name) if r.type in ("response", "revisit")]
        lines = path.with_name(path.name + ".cdxj").read_text().splitlines()
        assert len(lines) == len(records) and all(path.name in line for line in lines), path
        indexed += len(lines)
    assert indexed == len(site.log)  # each answer's record, robots.txt's too
