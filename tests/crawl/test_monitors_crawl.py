"""IDCRAWL_SPIDERMON: real crawls with Spidermon and idcrawl's monitor suite; verdicts read from the stats."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from scrapy.settings import Settings

from idcrawl.demo.site import Reply
from idcrawl.spidermon.addon import EXTENSION, SUITE, Monitoring
from idcrawl.spidermon.monitors import IdCrawlMonitorSuite
from tests.conftest import GapModel
from tests.support.crawl import run_crawl

CHECKS = ("failed_ratio", "finish_reason", "incidents", "overshoot_ratio", "lost")
FLAKY = set(range(1010, 1020))  # 10 of 50 ids answer 503 on every attempt


class FlakyModel(GapModel):
    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ in FLAKY:
            return Reply(503, b"busy")
        return super().reply(id_, host, nth)


ARGS = {"start": 1000, "direction": "asc", "margin": 15, "attempts": 1, "name": "reg"}
#: The stats dump after Spidermon (1000): the verdicts are written in its spider_closed handler.
DUMP_LAST = {"EXTENSIONS": {"tests.support.statsdump.StatsDump": 2000}}


def verdicts(stats: dict[str, object]) -> dict[str, object]:
    return {check: stats.get(f"idcrawl/monitors/{check}") for check in CHECKS}


def test_a_crawl_with_many_failed_ids_fails_the_failed_ratio_check_only(make_site, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1049, set()))
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {**DUMP_LAST, "IDCRAWL_SPIDERMON": True})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["idcrawl/failed"] == len(FLAKY)
    assert verdicts(result.stats) == {**dict.fromkeys(CHECKS, "OK"), "failed_ratio": "FAIL"}
    assert (result.stats["idcrawl/monitors/passed"], result.stats["idcrawl/monitors/failed"]) == (4, 1)
    assert "10 of " in result.stderr and "decided ids failed" in result.stderr  # Spidermon logs why


def test_the_same_crawl_passes_every_check_with_a_higher_threshold(make_site, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1049, set()))
    settings = {**DUMP_LAST, "IDCRAWL_SPIDERMON": True, "IDCRAWL_MONITOR_MAX_FAILED_RATIO": 0.5}
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["idcrawl/failed"] == len(FLAKY)
    assert verdicts(result.stats) == dict.fromkeys(CHECKS, "OK")
    assert (result.stats["idcrawl/monitors/passed"], result.stats["idcrawl/monitors/failed"]) == (5, 0)


def test_the_finish_reason_check_agrees_with_the_exit_status(make_site, tmp_path: Path) -> None:
    """A bound the user set is a normal completion (exit 0, check OK); a site spider's own close reason
    is not (exit status non-zero, check FAIL); a listed IDCRAWL_MONITOR_FINISH_REASONS is stricter."""
    site = make_site(GapModel(1000, 1999, set()))
    settings = {**DUMP_LAST, "IDCRAWL_SPIDERMON": True, "CLOSESPIDER_PAGECOUNT": 20}
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "closespider_pagecount"
    assert verdicts(result.stats)["finish_reason"] == "OK"
    strict = run_crawl(tmp_path, {**ARGS, "url": site.url()},
                       {**settings, "IDCRAWL_MONITOR_FINISH_REASONS": "finished", "IDCRAWL_STATE_PATH": "strict.sqlite"})
    assert (strict.returncode, verdicts(strict.stats)["finish_reason"]) == (0, "FAIL")
    assert verdicts(strict.stats)["failed_ratio"] == "OK"
    site_closed = run_crawl(tmp_path, {**ARGS, "url": site.url()},
                            {**DUMP_LAST, "IDCRAWL_SPIDERMON": True, "IDCRAWL_STATE_PATH": "closing.sqlite",
                             "SPIDER_MODULES": "idcrawl.spiders,tests.support.closing_spider"}, spider="closing")
    assert site_closed.stats["finish_reason"] == "site_gone"
    assert site_closed.returncode != 0 and verdicts(site_closed.stats)["finish_reason"] == "FAIL"


def test_without_the_switch_spidermon_does_not_run(make_site, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1049, set()))
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, DUMP_LAST)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [key for key in result.stats if key.startswith("idcrawl/monitors/")]
    assert "[Spidermon]" not in result.stderr


class SuiteWithActions(IdCrawlMonitorSuite):
    monitors_failed_actions: ClassVar[list[object]] = []


def test_the_switch_keeps_explicit_settings() -> None:
    """An explicit SPIDERMON_ENABLED or EXTENSIONS entry wins; the suite is appended to the user's."""
    settings = Settings({"IDCRAWL_SPIDERMON": True, "SPIDERMON_SPIDER_CLOSE_MONITORS": ["spidermon.MonitorSuite"]})
    settings.set("SPIDERMON_ENABLED", False, priority="cmdline")
    settings.set("EXTENSIONS", {EXTENSION: None}, priority="project")
    Monitoring().update_settings(settings)
    assert settings.getbool("SPIDERMON_ENABLED") is False
    assert settings.getdict("EXTENSIONS") == {EXTENSION: None}
    assert settings.getlist("SPIDERMON_SPIDER_CLOSE_MONITORS") == ["spidermon.MonitorSuite", SUITE]
    untouched = Settings({"IDCRAWL_SPIDERMON": False})
    Monitoring().update_settings(untouched)
    assert "SPIDERMON_ENABLED" not in untouched


def test_a_subclass_of_the_suite_replaces_it() -> None:
    mine = f"{__name__}.SuiteWithActions"
    settings = Settings({"IDCRAWL_SPIDERMON": True, "SPIDERMON_SPIDER_CLOSE_MONITORS": [mine]})
    Monitoring().update_settings(settings)
    assert settings.getlist("SPIDERMON_SPIDER_CLOSE_MONITORS") == [mine]
    assert settings.getbool("SPIDERMON_ENABLED") is True
