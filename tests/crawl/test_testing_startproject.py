"""idcrawl's pytest plugin in a fresh ``scrapy startproject`` project: plain ``pytest`` finds the project's
package, the cassette holds the request the spider sends (the project's ``USER_AGENT``, default headers,
cookies) and what the project's download handler received, a redirect as Scrapy followed it, and no
test's teardown logs an error."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from idcrawl.demo.site import Reply
from tests.conftest import GapModel

USER_AGENT = "mysite-bot/1.0 (+https://mysite.example/bot)"
SETTINGS = f'''
USER_AGENT = "{USER_AGENT}"
DEFAULT_REQUEST_HEADERS = {{"Accept": "text/html", "Accept-Language": "de"}}
ADDONS = {{"idcrawl.addon.IdCrawl": 0}}
DOWNLOAD_HANDLERS = {{"http": "mysite.handlers.TaggingHandler"}}
'''
HANDLER = '''\
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler


class TaggingHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler, its responses tagged: a cassette written from them says who fetched."""

    async def download_request(self, request):
        response = await super().download_request(request)
        response.headers["X-Handled-By"] = "mysite"
        return response
'''
SPIDER = '''\
from idcrawl.spiders.idseq import IdSeqSpider


class NoticesSpider(IdSeqSpider):
    name = "notices"

    def parse_found(self, response, item):
        item["title"] = response.css("h1::text").get()
        yield item
'''
TEST = '''\
from mysite.spiders.notices import NoticesSpider


def test_notices(recorded_crawl):
    crawl = recorded_crawl(NoticesSpider, url="{url}", start=1)
    assert crawl.fetch(1).item["title"]
    assert crawl.outcome(2) == "missing"
    redirected = crawl.fetch(3)
    assert redirected.item["title"] == "Procurement notice 4"
    assert [url.rsplit("/", 1)[1] for url in redirected.response.meta["redirect_urls"]] == ["3"]
    assert redirected.response.url.endswith("/notice/4")
'''


class CookieModel(GapModel):
    """Every page sets a session cookie, as many sites do; id 3 moved to id 4 (a 302)."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ == 3:
            return Reply(302, b"", (("Location", "/notice/4"),))
        reply = super().reply(id_, host, nth)
        return replace(reply, headers=(*reply.headers, ("Set-Cookie", "session=s1; Path=/")))


def startproject(tmp_path: Path, url: str) -> tuple[Path, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "PYTHONPATH", "CI")}
    subprocess.run([sys.executable, "-m", "scrapy", "startproject", "mysite"], cwd=tmp_path, env=env,
                   check=True, capture_output=True)
    project = tmp_path / "mysite"
    (project / "mysite" / "spiders" / "notices.py").write_text(SPIDER)
    (project / "mysite" / "handlers.py").write_text(HANDLER)
    with (project / "mysite" / "settings.py").open("a") as fh:
        fh.write(SETTINGS)
    (project / "tests").mkdir()
    (project / "tests" / "test_notices.py").write_text(TEST.format(url=url))
    return project, env


def plain_pytest(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``pytest tests/test_notices.py`` as docs/testing.md writes it: the script, not ``python -m pytest``."""
    script = Path(sys.executable).with_name("pytest")
    return subprocess.run([str(script), "-p", "no:cacheprovider", "tests/test_notices.py"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_plain_pytest_records_the_request_the_spider_sends(make_site, tmp_path: Path) -> None:
    site = make_site(CookieModel(1, 4, {2}))
    project, env = startproject(tmp_path, site.url())
    recorded = plain_pytest(project, env)
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-3000:]
    output = recorded.stdout + recorded.stderr
    assert "ERROR" not in output and "MemoryUsage" not in output, output[-3000:]
    cassette = project / "tests" / "fixtures" / "cassettes" / "test_notices" / "test_notices.yaml"
    interactions = yaml.safe_load(cassette.read_text())["interactions"]
    pages = [i["request"] for i in interactions if "/notice/" in i["request"]["uri"]]
    assert [p["uri"].rsplit("/", 1)[1] for p in pages] == ["1", "2", "3", "4"]  # 3 redirected to 4, by Scrapy
    answers = [i["response"] for i in interactions if "/notice/" in i["request"]["uri"]]
    assert [answer["status"]["code"] for answer in answers] == [200, 404, 302, 200]
    for answer in answers:  # each as the project's download handler gave it (requests's would say nothing)
        assert {key.lower(): value for key, value in answer["headers"].items()}["x-handled-by"] == ["mysite"]
    for page in pages:
        headers = {key.lower(): value for key, value in page["headers"].items()}
        assert headers["user-agent"] == [USER_AGENT]  # the project's, not python-requests/...
        assert headers["accept"] == ["text/html"] and headers["accept-language"] == ["de"]
        assert "gzip" in headers["accept-encoding"][0]  # Scrapy's compression middleware's
    first, *later = pages
    assert "cookie" not in {key.lower() for key in first["headers"]}
    for page in later:  # the cookie the site set, sent back by Scrapy's cookies middleware
        assert {key.lower(): value for key, value in page["headers"].items()}["cookie"] == ["session=s1"]
    site.stop()
    replayed = plain_pytest(project, {**env, "CI": "true"})  # the site is gone: the cassette answers
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
