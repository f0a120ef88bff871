"""``scrapy parse`` and ``scrapy check`` on id spiders: one page through the id path (outcome rules,
``parse_found``), no id crawl, no state written; contracts on ``parse_found``."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from idcrawl.demo.site import DemoModel, IdSite
from tests.support.crawl import run_crawl
from tests.support.states import scrapy, snapshot

SUPPORT_SPIDERS = "SPIDER_MODULES=idcrawl.spiders,tests.support.contract_spiders"


def test_scrapy_parse_runs_one_id_page_through_the_id_path_and_writes_no_state(make_site, tmp_path: Path) -> None:
    model = DemoModel(low=1, high=40, gap_percent=0)
    site = make_site(model)
    args = {"url": site.url(), "start": 5, "margin": 3}
    job = f"JOBDIR={tmp_path / 'job'}"
    finished = run_crawl(tmp_path, args, {"JOBDIR": str(tmp_path / "job")}, spider="demo")
    assert finished.returncode == 0, finished.stderr[-3000:]
    before = snapshot(tmp_path / "job")
    site.log.clear()
    page = site.url().format(id=7)
    for callback in ([], ["-c", "parse_found"]):
        run = scrapy(tmp_path, "parse", page, "--spider", "demo", "-a", f"url={site.url()}", "-a", "start=5",
                     "-s", job, "--nocolour", *callback)
        assert run.returncode == 0, run.stderr[-3000:]
        assert f">>> {page}: target '127.0.0.1', id 7: found (status 200) <<<" in run.stdout
        assert "'title': 'Procurement notice 7'" in run.stdout
        assert "Traceback" not in run.stderr
    assert site.ids() == [7, 7], "that page only: no id crawl"
    assert snapshot(tmp_path / "job") == before, "the finished job's state is untouched"
    # without -a url=, the page's last number is its id; a missing page is said so, with no item
    model.high = 30
    run = scrapy(tmp_path, "parse", site.url().format(id=33), "--spider", "demo", "--nocolour")
    assert run.returncode == 0, run.stderr[-3000:]
    assert ": target '127.0.0.1', id 33: missing (status 404) <<<" in run.stdout
    assert "# Scraped Items  " in run.stdout and "\n[]\n" in run.stdout
    # a URL no target's template renders is one line
    run = scrapy(tmp_path, "parse", f"http://127.0.0.1:{site.port}/other/7", "--spider", "demo",
                 "-a", f"url={site.url()}", "-a", "start=5")
    assert run.returncode == 1
    assert f"parse: error: http://127.0.0.1:{site.port}/other/7: no target's url template renders it" in run.stderr
    assert "Traceback" not in run.stderr


def test_scrapy_check_demo_passes_against_the_demo_site(tmp_path: Path) -> None:
    try:
        site = IdSite(port=8000).start()  # the port of the demo spider's contracts (python -m idcrawl.demo serve)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        pytest.skip("port 8000 of 127.0.0.1 is in use: the demo site cannot serve the demo spider's contracts")
    try:
        run = scrapy(tmp_path, "check", "demo", "-v")
    finally:
        site.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    assert "[demo] parse_found (@scrapes post-hook) ... ok" in run.stderr
    assert "Ran 3 contracts" in run.stderr and "\nOK" in run.stderr
    assert site.ids() == [12345], "the contract's page only: no id crawl"
    assert not (tmp_path / ".scrapy").exists(), "no state"


def test_a_broken_contract_on_parse_found_fails_scrapy_check(make_site, tmp_path: Path, monkeypatch) -> None:
    site = make_site(DemoModel(low=1, high=40, gap_percent=0))
    monkeypatch.setenv("IDCRAWL_TEST_CONTRACT_URL", site.url().format(id=12))
    run = scrapy(tmp_path, "check", "broken_contract", "-s", SUPPORT_SPIDERS)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "FAIL: [broken_contract] parse_found (@scrapes post-hook)" in run.stderr
    assert "Missing fields: deadline" in run.stderr
    assert "FAILED (failures=1)" in run.stderr
    assert site.ids() == [12]
