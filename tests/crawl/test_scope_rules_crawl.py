"""Crawl-scope rules in real crawls (issue 30, findings 5-7): redirects are links, canonicalisation rules, traps.

The site (tests/support/redirect_site.py) serves a.test and x.test on one local port, the product's resolver
(``IDCRAWL_RESOLVE``, ``IDCRAWL_RESOLVE_ONLY``) sends them to 127.0.0.1: no real DNS lookup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crawl import run_crawl
from tests.support.linkgraph import resolver_settings
from tests.support.redirect_site import RedirectSite

A, X = "a.test", "x.test"

GRAPH = {
    "http://a.test/": ["http://a.test/r1", "http://a.test/a1", "http://a.test/r2", "http://a.test/r3",
                       "http://a.test/a1?utm_source=feed&utm_medium=rss", "http://a.test/cal/y/y/y/y"],
    "http://a.test/a1": ["http://a.test/"],
    "http://a.test/a5": [],
    "http://x.test/out": [],
    "http://a.test/cal/y/y/y/y": [],
    "http://a.test/a1?utm_source=feed&utm_medium=rss": [],
}
REDIRECTS = {
    "http://a.test/r1": "http://x.test/out",  # another host: out of the host scope
    "http://a.test/r2": "http://a.test/a1",  # a page linked directly too: fetched once
    "http://a.test/r3": "http://a.test/a5",  # reached through the redirect only
}


@pytest.fixture
def site() -> Iterator[RedirectSite]:
    with RedirectSite(GRAPH, REDIRECTS) as server:
        yield server


def job(tmp_path: Path, site: RedirectSite, max_hops: int, redirect_hops: bool) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f"""
profile = "fast"

[[crawl_profiles]]
name = "site"
max_hops = {max_hops}
redirect_hops = {str(redirect_hops).lower()}
canonicalise = {{drop_query = ["utm_*"]}}
traps = {{max_segment_repeats = 3}}

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["site"]
""")
    return path


@pytest.mark.parametrize(("max_hops", "redirect_hops", "a5"), [(2, True, True), (1, True, False), (1, False, True)])
def test_a_redirect_is_a_link_in_scope_fetched_once_and_counted(
    site: RedirectSite, tmp_path: Path, max_hops: int, redirect_hops: bool, a5: bool,
) -> None:
    result = run_crawl(tmp_path, {"job": job(tmp_path, site, max_hops, redirect_hops)}, resolver_settings([A, X]))
    assert result.returncode == 0, result.stderr[-3000:]
    assert site.fetched(X) == []  # the redirect out of scope is not followed: not even robots.txt
    expected = ["/", "/r1", "/a1", "/r2", "/r3"] + (["/a5"] if a5 else [])
    assert Counter(site.fetched(A)) == Counter(expected)  # each once; utm_* dropped; the trap not fetched
    prefix = f"http://a.test:{site.port}"
    items = {item["url"].removeprefix(prefix): item for item in result.items}
    assert sorted(items) == sorted(["/", "/a1"] + (["/r3"] if a5 else []))
    if a5:
        assert items["/r3"]["final_url"] == f"{prefix}/a5"  # the requested and the final URL
        assert items["/r3"]["hops"] == (2 if redirect_hops else 1)
    stats = result.stats
    assert stats["idcrawl/scope/redirects/out_of_scope"] == (1 if a5 else 2)
    assert stats["idcrawl/scope/redirects/known"] == 1
    assert stats.get("idcrawl/scope/redirects/followed", 0) == (1 if a5 else 0)
    assert stats["idcrawl/scope/traps/repeated_segment"] == 1


def test_the_scope_report_shows_the_last_runs_trap_refusals_and_redirects(site: RedirectSite, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    result = run_crawl(tmp_path, {"job": job(tmp_path, site, 2, True)}, resolver_settings([A, X]))
    assert result.returncode == 0, result.stderr[-3000:]
    env = {"SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PATH": "/usr/bin:/bin"}

    def idplan(*more: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "scrapy", "idplan", *more], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    assert json.loads(idplan("--json"))["scope_refusals"] == {
        "scope/redirects/followed": 1, "scope/redirects/known": 1, "scope/redirects/out_of_scope": 1,
        "scope/traps/repeated_segment": 1}
    text = idplan()
    assert "last run: links refused by traps: repeated segment 1" in text
    assert "last run: redirects: followed 1, known 1, out of scope 1" in text
