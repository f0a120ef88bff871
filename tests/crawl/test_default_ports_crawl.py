"""Default ports in a real crawl (issue 30, finding 7): a site on http://127.0.0.1:80/ whose links and
sitemap name its pages with and without ``:80`` is walked as one set of URLs, each fetched once.

Binding port 80 needs root: elsewhere the test skips with one line, except under ``CI=true`` (CI runs
as root: a skip there would hide the test), where it fails.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crawl import run_crawl
from tests.support.sitemap_site import SitemapSite, urlset

GRAPH = {
    "/": ["http://127.0.0.1:80/a", "/a", "http://127.0.0.1/b#top", "/b", "HTTP://127.0.0.1:80/c"],
    "/a": ["http://127.0.0.1:80/", "/"],
    "/b": ["http://127.0.0.1:80/a?"],
    "/c": [],
    "/d": ["http://127.0.0.1:80/b"],
}


@pytest.fixture
def site80() -> Iterator[SitemapSite]:
    try:
        site = SitemapSite(GRAPH, port=80)
    except OSError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: port 80 of 127.0.0.1 must be bindable (run as root): {exc}")
        pytest.skip(f"port 80 of 127.0.0.1 not bindable here ({exc.strerror or exc}); CI runs it as root")
    site.put("/robots.txt", b"User-agent: *\nAllow: /\nSitemap: http://127.0.0.1:80/sitemap.xml\n", "text/plain")
    site.put("/sitemap.xml", urlset([{"loc": "http://127.0.0.1:80/d"}, {"loc": "http://127.0.0.1/a"}]))
    site.start()
    yield site
    site.stop()


def test_a_site_on_port_80_named_with_and_without_80_is_crawled_as_one_url_per_page(
    site80: SitemapSite, tmp_path: Path,
) -> None:
    path = tmp_path / "job.toml"
    path.write_text("""
[[crawl_profiles]]
name = "site"
max_hops = 3

[[targets]]
name = "front"
url = "http://127.0.0.1:80/"
crawl_profiles = ["site"]
sitemaps = true
""")
    result = run_crawl(tmp_path, {"job": path}, {"CONCURRENT_REQUESTS": 4})
    assert result.returncode == 0, result.stderr[-3000:]
    assert Counter(site80.fetched()) == Counter(["/robots.txt", "/sitemap.xml", "/", "/a", "/b", "/c", "/d"])
    urls = sorted(item["url"] for item in result.items if "hops" in item)
    assert urls == [f"http://127.0.0.1/{p}" for p in ("", "a", "b", "c", "d")]  # stored without the port
