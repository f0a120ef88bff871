"""The IdCrawl add-on: what it wires, that a project overrides any single piece, and a fresh
``scrapy startproject`` project that adopts idcrawl with one ADDONS line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scrapy import Spider
from scrapy.settings import BaseSettings, Settings
from scrapy.utils.test import get_crawler

from idcrawl.addon import (
    ATTEMPTS_MIDDLEWARE,
    CONTENT_PIPELINE,
    DUPEFILTER,
    EXTENSIONS,
    ID_ROBOTS,
    SCHEDULER,
    SCRAPY_ROBOTS,
    IdCrawl,
    setdefault_component,
)
from idcrawl.downloadermiddlewares.attempts import IdAttemptsMiddleware
from idcrawl.extensions.progress import IdProgress
from idcrawl.runtime import IdRuntime
from idcrawl.scheduler import IdScheduler
from idcrawl.spiders.idseq import IdSeqSpider
from tests.conftest import GapModel
from tests.support.crawl import read_items

NOTICES_SPIDER = '''\
from idcrawl.spiders.idseq import IdSeqSpider


class NoticesSpider(IdSeqSpider):
    name = "notices"

    def parse_found(self, response, item):
        item["title"] = response.css("h1::text").get()
        yield item
'''


class MyScheduler(IdScheduler):
    """A project's own subclass of IdScheduler."""


def wired(project: dict[str, object] | None = None, priority: str = "project") -> Settings:
    settings = Settings()
    settings.setdict(project or {}, priority=priority)
    IdCrawl().update_settings(settings)
    return settings


def components(settings: BaseSettings, name: str) -> dict[object, object]:
    return dict(settings.getdict(name))


def test_the_addon_wires_every_piece_at_addon_priority() -> None:
    settings = wired()
    assert settings["SCHEDULER"] == SCHEDULER and settings.getpriority("SCHEDULER") == 15
    assert settings["DUPEFILTER_CLASS"] == DUPEFILTER and settings.getpriority("DUPEFILTER_CLASS") == 15
    middlewares = components(settings, "DOWNLOADER_MIDDLEWARES")
    assert middlewares == {ATTEMPTS_MIDDLEWARE: 549, SCRAPY_ROBOTS: None, ID_ROBOTS: 100}
    assert components(settings, "EXTENSIONS") == EXTENSIONS
    assert {settings["EXTENSIONS"].getpriority(k) for k in EXTENSIONS} == {15}
    assert components(settings, "ITEM_PIPELINES") == {CONTENT_PIPELINE: 100}


def test_a_project_overrides_any_single_piece() -> None:
    settings = wired({
        "SCHEDULER": "tests.test_addon.MyScheduler",
        "DOWNLOADER_MIDDLEWARES": {ATTEMPTS_MIDDLEWARE: 600},
        "EXTENSIONS": {IdProgress: None},  # a class as the key: still recognised
    })
    assert settings["SCHEDULER"] == "tests.test_addon.MyScheduler"
    middlewares = components(settings, "DOWNLOADER_MIDDLEWARES")
    assert middlewares[ATTEMPTS_MIDDLEWARE] == 600
    assert middlewares[ID_ROBOTS] == 100
    extensions = components(settings, "EXTENSIONS")
    assert extensions[IdProgress] is None and "idcrawl.extensions.progress.IdProgress" not in extensions
    assert extensions["idcrawl.extensions.limits.IdLimits"] == 200


def test_a_project_that_lists_either_robots_middleware_decides_for_both() -> None:
    keep_scrapys = wired({"DOWNLOADER_MIDDLEWARES": {SCRAPY_ROBOTS: 100}})
    assert components(keep_scrapys, "DOWNLOADER_MIDDLEWARES") == {SCRAPY_ROBOTS: 100, ATTEMPTS_MIDDLEWARE: 549}
    no_ours = wired({"DOWNLOADER_MIDDLEWARES": {ID_ROBOTS: None}})
    assert components(no_ours, "DOWNLOADER_MIDDLEWARES") == {ID_ROBOTS: None, ATTEMPTS_MIDDLEWARE: 549}


def test_a_component_dict_from_the_command_line_still_gets_the_other_pieces() -> None:
    # -s EXTENSIONS='{"x": 0}' arrives as a JSON string at cmdline priority
    settings = wired({"EXTENSIONS": json.dumps({"tests.support.statsdump.StatsDump": 0})}, priority="cmdline")
    extensions = components(settings, "EXTENSIONS")
    assert extensions == {"tests.support.statsdump.StatsDump": 0, **EXTENSIONS}
    assert settings["EXTENSIONS"].getpriority("tests.support.statsdump.StatsDump") == 40


def test_setdefault_component_keeps_a_higher_priority_entry() -> None:
    settings = BaseSettings({"ITEM_PIPELINES": {"a.B": 1}}, priority="cmdline")
    assert not setdefault_component(settings, "ITEM_PIPELINES", "a.B", 300)
    assert setdefault_component(settings, "ITEM_PIPELINES", "c.D", 300)
    assert settings.getdict("ITEM_PIPELINES") == {"a.B": 1, "c.D": 300}


def test_the_idseq_spider_works_without_the_addon() -> None:
    settings = Settings()  # Scrapy's defaults: its own scheduler
    IdSeqSpider.update_settings(settings)
    assert settings["SCHEDULER"] == SCHEDULER
    assert components(settings, "DOWNLOADER_MIDDLEWARES") == {ATTEMPTS_MIDDLEWARE: 549}
    assert "idcrawl.settings_profiles.JobProfile" in settings.getdict("ADDONS")


def test_the_idseq_spider_replaces_another_scheduler_but_keeps_a_subclass() -> None:
    other = Settings({"SCHEDULER": "scrapy.core.scheduler.Scheduler"})
    IdSeqSpider.update_settings(other)
    assert other["SCHEDULER"] == SCHEDULER
    mine = Settings({"SCHEDULER": "tests.test_addon.MyScheduler"})
    IdSeqSpider.update_settings(mine)
    assert mine["SCHEDULER"] == "tests.test_addon.MyScheduler"


def test_the_idseq_spider_leaves_a_listed_attempts_middleware_alone() -> None:
    settings = Settings({"DOWNLOADER_MIDDLEWARES": {IdAttemptsMiddleware: None}})
    IdSeqSpider.update_settings(settings)
    assert components(settings, "DOWNLOADER_MIDDLEWARES") == {IdAttemptsMiddleware: None}


def test_the_addon_checks_settings_only_of_crawls_whose_spider_did_not(monkeypatch) -> None:
    checked: list[object] = []
    monkeypatch.setattr("idcrawl.addon.validate_settings", checked.append)
    id_crawl = get_crawler(IdSeqSpider)
    IdRuntime(id_crawl, [])  # what IdSeqSpider.from_crawler makes, after its own validate_settings
    IdCrawl(id_crawl).update_settings(Settings())  # (the crawler's own are frozen by get_crawler)
    assert checked == []
    settings = Settings()
    IdCrawl(get_crawler(Spider)).update_settings(settings)
    assert checked == [settings]


# -- a fresh `scrapy startproject` project ----------------------------------------------------


def startproject(tmp_path: Path, addon: bool) -> tuple[Path, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "PYTHONPATH")}
    subprocess.run([sys.executable, "-m", "scrapy", "startproject", "shop"], cwd=tmp_path, env=env,
                   check=True, capture_output=True)
    project = tmp_path / "shop"
    (project / "shop" / "spiders" / "notices.py").write_text(NOTICES_SPIDER)
    if addon:
        with (project / "shop" / "settings.py").open("a") as fh:
            fh.write('\nADDONS = {"idcrawl.addon.IdCrawl": 0}\n')
    return project, env


def crawl_notices(project: Path, env: dict[str, str], url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "notices", "-a", f"url={url}", "-a", "start=100",
         "-a", "margin=5", "-O", "items.jsonl", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "LOG_LEVEL=INFO",
         # the startproject template's DOWNLOAD_DELAY = 1 (one id a second) only slows the test down
         "-s", "DOWNLOAD_DELAY=0"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def test_a_fresh_startproject_project_with_one_addons_line_runs_an_id_crawl(make_site, tmp_path: Path) -> None:
    gaps = {103, 110, 111, 150}
    site = make_site(GapModel(100, 160, gaps))
    project, env = startproject(tmp_path, addon=True)
    result = crawl_notices(project, env, site.url())
    assert result.returncode == 0, result.stderr[-3000:]
    items = read_items(project / "items.jsonl")
    assert sorted(item["id"] for item in items) == [i for i in range(100, 161) if i not in gaps]
    assert all(item["title"] and item["checksum"] for item in items)
    assert "idcrawl.addon.IdCrawl" in result.stderr  # "Enabled addons"
    assert "idcrawl.extensions.progress.IdProgress" in result.stderr  # "Enabled extensions": wired by the add-on
    assert "idcrawl.pipelines.ContentDuplicates" in result.stderr  # "Enabled item pipelines"
    assert "'DUPEFILTER_CLASS': 'idcrawl.dupefilters.IdDupeFilter'" in result.stderr  # "Overridden settings"
    assert not any("duplicate_of" in item for item in items)  # every notice page differs
    # the commands reach the project through idcrawl's entry points (no COMMANDS_MODULE)
    plan = subprocess.run([sys.executable, "-m", "scrapy", "idplan", "--spider", "notices", "--json"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert plan.returncode == 0, plan.stderr
    lane = json.loads(plan.stdout)["targets"][0]["lanes"][0]
    assert lane["cut_reason"] == "margin" and lane["content"]["count"] == len(items)


def test_a_fresh_project_without_the_addon_still_runs_idseq_spiders(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(100, 120, {105}))
    project, env = startproject(tmp_path, addon=False)
    result = crawl_notices(project, env, site.url())
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(item["id"] for item in read_items(project / "items.jsonl")) == [
        i for i in range(100, 121) if i != 105
    ]
    assert "idcrawl.scheduler.IdScheduler" in result.stderr  # forced by the spider: Scrapy's would dispense nothing
    assert "idcrawl.addon.IdCrawl" not in result.stderr
