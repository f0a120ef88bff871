"""A crawl with ``IDCRAWL_WARC_DIR`` replayed in a real pywb (issue 33, "Replay tested with a real wayback").

A local site of six notices is crawled, then crawled again due (``resume=due``) a simulated two days later:
notice 2 has changed (a new response), notice 3 sits behind a backend that ignores validators (200, the same
body: an identical-payload-digest revisit), the others answer 304 (server-not-modified revisits). The notices
link to a few pages of crawl scope (the target's crawl profile, ``revisit = "1d"``: harvested again by the
second run), one of which has changed by then. The WARC files go into a pywb collection
(tests/support/wayback.py); each capture replays with its body, each revisit with the body of the capture it
refers to. ``scrapy idwacz`` packs the same files.

pywb missing: skipped, except under CI=true (tests/support/wayback.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from idcrawl.demo.site import Reply
from tests.crawl.test_recrawl_pages_crawl import DAY, T0, ChangingModel, at
from tests.support.crawl import run_crawl
from tests.support.states import scrapy
from tests.support.warcs import IDENTICAL, NOT_MODIFIED, check_warc
from tests.support.wayback import require_pywb, wayback

IDS = range(1, 7)
CHANGED, SAME_BODY = 2, 3
#: the linked pages, at the site's second prefix: notice N links to agency 50 + N % 3, each agency to the index 60
AGENCIES, INDEX = (50, 51, 52), 60
LINKED = (*AGENCIES, INDEX)
LINKED_CHANGED = 51


class SixNotices(ChangingModel):
    """Notices 1-6 (7 on missing); ``ignore_validators``: notices answered 200 whatever the request asks.
    ``linked``: the notices link to pages of crawl scope (:data:`LINKED`), served at the soft prefix."""

    def __init__(self, *, linked: bool = False) -> None:
        super().__init__()
        self.ignore_validators: set[int] = set()
        self.linked = linked

    def page(self, id_: int) -> bytes:
        body = super().page(id_)
        if not self.linked:
            return body
        return body.replace(b"</body>", f"<a href='/register/{AGENCIES[id_ % 3]}'>agency</a></body>".encode())

    def linked_page(self, n: int) -> bytes:
        links = "" if n == INDEX else f"<a href='/register/{INDEX}'>all agencies</a>"
        return (f"<!doctype html><html><head><title>Agency page {n}</title></head><body><h1>Agency page {n}</h1>"
                f"<p class='v'>version {self.version.get(n, 1)}</p>{links}</body></html>").encode()

    def soft_reply(self, id_: int, host: str, nth: int) -> Reply:
        if not self.linked or id_ not in LINKED:
            return super().soft_reply(id_, host, nth)
        return Reply(200, self.linked_page(id_), (("Content-Type", "text/html; charset=utf-8"),))

    def exists(self, id_: int) -> bool:
        return id_ in IDS

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        if id_ in self.ignore_validators:
            return Reply(200, self.page(id_), (("Content-Type", "text/html; charset=utf-8"), ("ETag", self.etag(id_)),
                                               ("Last-Modified", self.last_modified(id_))))
        return super().reply_to(id_, host, nth, headers)


def captures(warcs: list[Path]) -> dict[str, list[tuple[str, str, str]]]:
    """Per URL: (WARC-Date, record type, WARC-Profile) of its response and revisit records, in file order."""
    from warcio.archiveiterator import ArchiveIterator

    found: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for path in warcs:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit"):
                    headers = record.rec_headers
                    found[headers.get_header("WARC-Target-URI")].append(
                        (headers.get_header("WARC-Date"), record.rec_type, headers.get_header("WARC-Profile") or ""))
    return found


def timestamp(warc_date: str) -> str:
    return "".join(ch for ch in warc_date if ch.isdigit())[:14]


def job_file(tmp_path: Path, template: str) -> Path:
    """The notices as an id target whose found pages are hop 0 of a crawl profile (its links followed)."""
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[crawl_profiles]]
name = "linked"
max_hops = 2
revisit = "1d"

[[targets]]
name = "reg"
url = "{template}"
start = 1
margin = 3
crawl_profiles = ["linked"]
""")
    return path


def test_a_crawl_and_its_due_recrawl_replay_in_pywb(make_site, tmp_path: Path) -> None:
    require_pywb()
    model = SixNotices(linked=True)
    site = make_site(model)
    warc_dir = tmp_path / "warc"
    args = {"job": str(job_file(tmp_path, site.url()))}
    settings = {"IDCRAWL_WARC_DIR": str(warc_dir), "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    first = run_crawl(tmp_path, args, {**settings, "IDCRAWL_NOW": at(T0)}, output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(item["id"] for item in first.items if item.get("id") is not None) == list(IDS)
    linked_url = {n: f"http://127.0.0.1:{site.port}/register/{n}" for n in LINKED}
    assert sorted(item["url"] for item in first.items if item.get("id") is None) == sorted(linked_url.values())
    before = {id_: model.page(id_) for id_ in IDS}
    linked_before = {n: model.linked_page(n) for n in LINKED}
    model.version[CHANGED] += 1
    model.version[LINKED_CHANGED] = 2
    model.ignore_validators.add(SAME_BODY)
    second = run_crawl(tmp_path, {**args, "resume": "due"}, {**settings, "IDCRAWL_NOW": at(T0 + 2 * DAY)},
                       output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    after = {id_: model.page(id_) for id_ in IDS}
    linked_after = {n: model.linked_page(n) for n in LINKED}
    assert (second.stats.get("idcrawl/pages/not_modified"), second.stats.get("idcrawl/pages/unchanged"),
            second.stats.get("idcrawl/pages/changed")) == (len(IDS) - 2, 1, 1), second.stats
    assert second.stats.get("idcrawl/crawl_profiles/linked/revisits") == len(LINKED), second.stats

    assert warc_dir.is_dir(), "IDCRAWL_WARC_DIR was not created"
    warcs = sorted(warc_dir.glob("*.warc.gz"))
    assert warcs, sorted(p.name for p in warc_dir.iterdir())
    for path in warcs:
        assert check_warc(path) == [], path
        assert path.with_name(path.name + ".cdxj").is_file(), path
    caught = captures(warcs)
    url = {id_: site.url().format(id=id_) for id_ in IDS}
    for id_ in IDS:
        kinds = [(kind, profile) for _date, kind, profile in caught[url[id_]]]
        assert kinds[0] == ("response", ""), (id_, kinds)
        second_kind = ("response", "") if id_ == CHANGED else (
            ("revisit", IDENTICAL) if id_ == SAME_BODY else ("revisit", NOT_MODIFIED))
        assert kinds[1:] == [second_kind], (id_, kinds)
    assert caught[f"http://127.0.0.1:{site.port}/robots.txt"], "robots.txt was fetched: it has its capture"
    for n in LINKED:
        kinds = [(kind, profile) for _date, kind, profile in caught[linked_url[n]]]
        # harvested in each run: a full response, then a response again if it changed, else a revisit of
        # the stored capture (the URL record keeps it)
        assert kinds[0] == ("response", "") and len(kinds) == 2, (n, kinds)
        assert kinds[1] == (("response", "") if n == LINKED_CHANGED else ("revisit", IDENTICAL)), (n, kinds)

    with wayback(tmp_path / "pywb", warcs) as server:
        for id_ in IDS:
            (date1, _, _), (date2, _, _) = caught[url[id_]]
            assert timestamp(date1) < timestamp(date2), (date1, date2)
            then = server.replay(url[id_], timestamp(date1))
            assert (then.status, then.body) == (200, before[id_]), id_
            now = server.replay(url[id_], timestamp(date2))
            assert (now.status, now.body) == (200, after[id_]), (id_, now.status, now.body[:200])
            assert now.body == (after[id_] if id_ == CHANGED else before[id_])
        for n in LINKED:  # the pages of crawl scope, as each run saw them
            (date1, _, _), (date2, _, _) = caught[linked_url[n]]
            then = server.replay(linked_url[n], timestamp(date1))
            assert (then.status, then.body) == (200, linked_before[n]), (n, then.status, then.body[:200])
            now = server.replay(linked_url[n], timestamp(date2))
            assert (now.status, now.body) == (200, linked_after[n]), (n, now.status, now.body[:200])
            assert (now.body == then.body) is (n != LINKED_CHANGED)

    package = tmp_path / "job.wacz"
    packed = scrapy(tmp_path, "idwacz", str(warc_dir), "-o", str(package),
                    "--state", str(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite"))
    assert packed.returncode == 0, packed.stderr
    with zipfile.ZipFile(package) as wacz:
        pages = [json.loads(line) for line in wacz.read("pages/pages.jsonl").decode().splitlines()[1:] if line]
    assert sorted(page["url"] for page in pages) == sorted([*url.values(), *linked_url.values()])
    from wacz.main import main as wacz_main

    with contextlib.redirect_stdout(io.StringIO()):
        assert wacz_main(["validate", "-f", str(package)]) == 0
