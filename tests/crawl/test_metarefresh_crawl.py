"""A meta refresh still decides an id's outcome in a real crawl with the add-on (IdMetaRefreshMiddleware)."""

from __future__ import annotations

from pathlib import Path

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import run_crawl

#: Ids whose page is a "not found" page that sends the browser to the register's front page.
REFRESHING = {7, 13}


class RefreshModel(GapModel):
    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ in REFRESHING:
            body = (b"<!doctype html><html><head><meta charset='utf-8'>"
                    b"<META HTTP-EQUIV='Refresh' CONTENT='0; URL=/front'></head><body>Gone</body></html>")
            return Reply(200, body, (("Content-Type", "text/html; charset=utf-8"),))
        return super().reply(id_, host, nth)


def test_a_page_that_refreshes_is_followed_and_pages_without_a_refresh_are_taken(make_site, tmp_path: Path) -> None:
    site = make_site(RefreshModel(1, 20, {4}))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 20, "margin": 0},
                       {"IDCRAWL_PROFILE": "fast"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "idcrawl.downloadermiddlewares.metarefresh.IdMetaRefreshMiddleware" in result.stderr  # enabled
    assert [e.path for e in site.log if e.path == "/front"] == ["/front", "/front"]  # each refresh followed once
    # the refreshes end at the front page's 404: ids 7 and 13 are missing, as with Scrapy's middleware
    assert result.ids == [i for i in range(1, 21) if i not in {4, *REFRESHING}]
