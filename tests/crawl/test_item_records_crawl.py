"""What a page's item carries when its URL's record changes later (issue 30): the record as it was when
the response was read. An owner change or a better path found later (a new target, a re-walk) changes the
stored record and the items of later fetches, never items written before; docs/scope.md "What an item carries".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from idcrawl.state.sqlite import SqliteStateStore
from tests.support.crawl import run_crawl
from tests.support.sitemap_site import SitemapSite

GRAPH = {"/": ["/art/en"], "/art/en": ["/art/en/p1"], "/art/en/p1": []}


def job(path: Path, site: SitemapSite, *, with_e: bool) -> Path:
    e = f'\n[[targets]]\nname = "E"\nurl = "{site.url("/art/en")}"\ncrawl_profiles = ["one"]\n' if with_e else ""
    path.write_text(f"""
[[crawl_profiles]]
name = "one"
max_hops = 1

[[targets]]
name = "D"
url = "{site.url('/')}"
crawl_profiles = ["one"]
{e}""")
    return path


def test_an_item_keeps_the_owner_and_hops_of_its_fetch_and_a_new_owner_shows_in_later_items_and_the_store(
    tmp_path: Path,
) -> None:
    site = SitemapSite(GRAPH).start()
    try:
        jobdir = {"JOBDIR": str(tmp_path / "jobdir")}
        first = run_crawl(tmp_path, {"job": job(tmp_path / "job.toml", site, with_e=False)}, jobdir)
        assert first.returncode == 0, first.stderr[-3000:]
        prefix = site.url("")
        records = {item["url"][len(prefix):]: (item["target"], item["hops"]) for item in first.items}
        assert records == {"/": ("D", 0), "/art/en": ("D", 1)}
        second = run_crawl(tmp_path, {"job": job(tmp_path / "job.toml", site, with_e=True)}, jobdir)
        assert second.returncode == 0, second.stderr[-3000:]
        assert Counter(p for p in site.fetched() if p != "/robots.txt") == Counter(["/", "/art/en", "/art/en/p1"])
        later = {item["url"][len(prefix):]: (item["target"], item["hops"]) for item in second.items}
        assert later == {"/art/en/p1": ("E", 1)}  # E's walk from /art/en's stored links, no refetch of it
        [state] = (tmp_path / "jobdir").rglob("*.sqlite")
        store = SqliteStateStore(state, read_only=True)
        stored = {e.url[len(prefix):]: (e.record.owner, e.record.hops.hops) for e in store.load_urls()}
        store.close()
        # the store has the record as it is now: /art/en is E's hop-0 page; run 1's item keeps (D, 1)
        assert stored == {"/": ("D", 0), "/art/en": ("E", 0), "/art/en/p1": ("E", 1)}
    finally:
        site.stop()
