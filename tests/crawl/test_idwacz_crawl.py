"""``scrapy idwacz``: a job's WARC files packed as one WACZ whose pages.jsonl lists the found pages of its state.

A real crawl of a local site records its found ids in a state file; WARC files written as idcrawl's writer writes
them (tests/support/warcs.py: one per rotation) hold captures of them, of a missing id and of a page that is no
found page. The package passes py-wacz's own ``wacz validate``; bad input gets one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from pathlib import Path

from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.states import scrapy
from tests.support.warcs import Capture, write_captures

T1, T2 = "2026-11-28T10:00:00Z", "2026-11-28T11:00:00Z"


def test_the_package_lists_the_found_pages_captured_and_validates(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1000, 1009, {1003}))
    state = tmp_path / "state.sqlite"
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1000, "margin": 3},
                       {"IDCRAWL_STATE_PATH": str(state)})
    assert result.returncode == 0, result.stderr[-3000:]
    found = [site.url().format(id=n) for n in range(1000, 1010) if n != 1003]
    assert sorted(item["url"] for item in result.items) == sorted(found)
    warcs = tmp_path / "warc"
    warcs.mkdir()
    captured = [url for url in found if not url.endswith("/1005")]  # one found page never captured
    digests = write_captures(warcs / "job-20261128100000-w1-00000.warc.gz",
                             [Capture(url, T1, f"<h1>{url}</h1>".encode()) for url in captured[:5]]
                             + [Capture(site.url().format(id=1003), T1, b"gone", status="404 Not Found"),
                                Capture(f"http://127.0.0.1:{site.port}/robots.txt", T1, b"")])
    second = [Capture(url, T2, f"<h1>{url}</h1>".encode()) for url in captured[5:]]
    second.append(Capture(captured[0], T2, revisit="304", refers_date=T1, digest=digests[f"{captured[0]} {T1}"],
                          block_headers=False))
    write_captures(warcs / "job-20261128110000-w1-00000.warc.gz", second)

    out = tmp_path / "out" / "job.wacz"
    run = scrapy(tmp_path, "idwacz", str(warcs), "-o", str(out), "--state", str(state), "--title", "notices")
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        f"idwacz: {out}: 2 WARC files, 8 pages; 1 found pages have no capture in these files")
    with zipfile.ZipFile(out) as package:
        names = set(package.namelist())
        pages = [json.loads(line) for line in package.read("pages/pages.jsonl").decode().splitlines() if line]
    assert {"archive/job-20261128100000-w1-00000.warc.gz", "archive/job-20261128110000-w1-00000.warc.gz",
            "datapackage.json", "datapackage-digest.json", "indexes/index.cdx.gz"} <= names
    assert pages[0]["format"] == "json-pages-1.0" and pages[0]["title"] == "notices"
    # each found page at its first capture; the missing id and robots.txt are no pages
    assert sorted((p["url"], p["ts"]) for p in pages[1:]) == sorted(
        [(url, T1) for url in captured[:5]] + [(url, T2) for url in captured[5:]])
    from wacz.main import main as wacz_main

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert wacz_main(["validate", "-f", str(out)]) == 0, said.getvalue()


def test_bad_input_gets_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    runs = {
        "nothing": scrapy(tmp_path, "idwacz", str(tmp_path / "empty"), "-o", "a.wacz", "--state", "none.sqlite"),
        "name": scrapy(tmp_path, "idwacz", str(tmp_path / "nowhere"), "-o", "a.wacz"),
    }
    for run in runs.values():
        assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert runs["nothing"].stderr.strip().splitlines()[-1].startswith("idwacz: error: no *.warc.gz file in ")
    assert runs["name"].stderr.strip().splitlines()[-1].endswith("is neither a file nor a folder")
    missing_o = scrapy(tmp_path, "idwacz", str(tmp_path / "empty"))
    assert missing_o.returncode == 2 and "-o FILE.wacz is required" in missing_o.stderr
