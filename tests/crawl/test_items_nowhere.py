"""A crawl that keeps state but whose items go nowhere is refused before its first request.

Its state would remember the ids it found and no later run would fetch them again: the items would be
lost for good. ``IDCRAWL_DISCARD_ITEMS = True`` says dropping them is intended; a crawl without state
(``IDCRAWL_STATE = False``) forgets them too and is not refused. scrapyd 1.6 passes a feed only when
its ``items_dir`` is set: its own ``Environment`` gives the settings a job would get.
"""

from __future__ import annotations

import json
import pkgutil
from configparser import ConfigParser
from pathlib import Path

from scrapyd.config import Config
from scrapyd.environ import Environment

from tests.support.crawl import read_items, run_crawl

ARGS = {"start": 10_000, "direction": "asc", "margin": 5, "max": 10_030, "name": "t"}
REFUSAL = ("items go nowhere", "-o items.jsonl", "FEEDS", "items_dir", "IDCRAWL_DISCARD_ITEMS=True")


def assert_refused(result, site, state: Path) -> None:  # type: ignore[no-untyped-def]
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert all(part in errors[0] for part in REFUSAL), errors[0]
    assert "Traceback" not in result.stderr
    assert site.log == []
    assert not state.exists(), "the refused crawl wrote state"


def test_a_crawl_with_state_and_no_feed_is_refused_in_one_line_before_any_request(make_site, tmp_path: Path) -> None:
    site = make_site()
    state = tmp_path / "state.sqlite"
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {"IDCRAWL_STATE_PATH": str(state)}, output=None)
    assert_refused(result, site, state)


def test_discard_items_lets_it_run(make_site, tmp_path: Path) -> None:
    site = make_site()
    settings = {"IDCRAWL_STATE_PATH": str(tmp_path / "state.sqlite"), "IDCRAWL_DISCARD_ITEMS": True}
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, settings, output=None)
    assert result.returncode == 0, result.stderr[-3000:]
    assert site.log
    assert result.stats["item_scraped_count"] > 0


def test_a_crawl_without_state_and_no_feed_runs(make_site, tmp_path: Path) -> None:
    site = make_site()
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {"IDCRAWL_STATE": False}, output=None)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["item_scraped_count"] > 0


def scrapyd_settings(tmp_path: Path, items_dir: str | None) -> dict[str, str]:
    """The settings scrapyd 1.6 gives a job (``-s`` on its command line), from its own Environment and its
    default configuration (``items_dir`` None: left at its default)."""
    scrapyd = Config(values={})
    scrapyd.cp = ConfigParser()
    scrapyd.cp.read_string((pkgutil.get_data("scrapyd", "default_scrapyd.conf") or b"").decode())
    scrapyd.cp.set("scrapyd", "logs_dir", str(tmp_path / "logs"))
    scrapyd.cp.set("scrapyd", "jobs_dir", str(tmp_path / "jobs"))
    if items_dir is not None:
        scrapyd.cp.set("scrapyd", "items_dir", items_dir)
    message = {"_project": "idcrawl", "_spider": "idseq", "_job": "j1"}
    return Environment(scrapyd).get_settings(message)


def test_under_scrapyd_with_items_dir_unset_the_job_is_refused(make_site, tmp_path: Path) -> None:
    site = make_site()
    settings = scrapyd_settings(tmp_path, None)
    assert "FEEDS" not in settings  # scrapyd's default: no feed
    settings.pop("LOG_FILE")  # the refusal is read from stderr here
    state = tmp_path / "jobs" / "idcrawl" / "idseq" / "j1" / "idcrawl-state.sqlite"
    result = run_crawl(tmp_path, {**ARGS, "url": site.url(), "_job": "j1"}, settings, output=None)
    assert_refused(result, site, state)


def test_under_scrapyd_with_items_dir_set_the_items_are_in_its_feed(make_site, tmp_path: Path) -> None:
    site = make_site()
    settings = scrapyd_settings(tmp_path, str(tmp_path / "items"))
    settings.pop("LOG_FILE")
    feed = tmp_path / "items" / "idcrawl" / "idseq" / "j1.jl"
    assert json.loads(settings["FEEDS"]) == {feed.as_uri(): {"format": "jsonlines"}}
    result = run_crawl(tmp_path, {**ARGS, "url": site.url(), "_job": "j1"}, settings, output=None)
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_items(feed) and len(read_items(feed)) == result.stats["item_scraped_count"]
