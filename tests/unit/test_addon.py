"""The IdCrawl add-on: what it wires, and that a project overrides any single piece (a fresh
``scrapy startproject`` project that adopts idcrawl with one ADDONS line: tests/crawl/test_addon_crawl.py)."""

from __future__ import annotations

import json

import pytest
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings, Settings
from scrapy.utils.test import get_crawler

from idcrawl.addon import (
    ATTEMPTS_MIDDLEWARE,
    BOUNDS,
    CONTENT_PIPELINE,
    DUPEFILTER,
    EXTENSIONS,
    FEED_STORAGE,
    ID_LOGSTATS,
    ID_METAREFRESH,
    ID_ROBOTS,
    ID_SPIDERSTATE,
    POLITE,
    REDIRECTS_MIDDLEWARE,
    SCHEDULER,
    SCRAPY_LOGSTATS,
    SCRAPY_METAREFRESH,
    SCRAPY_ROBOTS,
    SCRAPY_SPIDERSTATE,
    SOFT404_MIDDLEWARE,
    WARC_MIDDLEWARE,
    IdCrawl,
    IdSeqNeeds,
)
from idcrawl.components import setdefault_component, swap_component
from idcrawl.downloadermiddlewares.attempts import IdAttemptsMiddleware
from idcrawl.extensions.limits import IdLimits
from idcrawl.extensions.progress import IdProgress
from idcrawl.runtime import IdRuntime
from idcrawl.scheduler import IdScheduler
from idcrawl.spidermiddlewares.soft404 import IdSoft404Middleware
from idcrawl.spiders.idseq import ID_CONCURRENT_ITEMS, IdSeqSpider


class MyScheduler(IdScheduler):
    """A project's own subclass of IdScheduler."""


def wired(project: dict[str, object] | None = None, priority: str = "project") -> Settings:
    settings = Settings()
    settings.setdict(project or {}, priority=priority)
    IdCrawl().update_settings(settings)
    return settings


def spider_wired(settings: BaseSettings) -> BaseSettings:
    """What the idseq spider wires: its ``update_settings``, then the add-on it lists for its needs."""
    IdSeqSpider.update_settings(settings)
    assert settings.getdict("ADDONS")[IdSeqNeeds] == IdSeqNeeds.priority
    IdSeqNeeds().update_settings(settings)
    return settings


def components(settings: BaseSettings, name: str) -> dict[object, object]:
    return dict(settings.getdict(name))


def test_the_addon_wires_every_piece_at_addon_priority() -> None:
    settings = wired()
    assert settings["SCHEDULER"] == SCHEDULER and settings.getpriority("SCHEDULER") == 15
    assert settings["DUPEFILTER_CLASS"] == DUPEFILTER and settings.getpriority("DUPEFILTER_CLASS") == 15
    middlewares = components(settings, "DOWNLOADER_MIDDLEWARES")
    assert middlewares == {ATTEMPTS_MIDDLEWARE: 549, SCRAPY_ROBOTS: None, ID_ROBOTS: 100,
                           SCRAPY_METAREFRESH: None, ID_METAREFRESH: 580, REDIRECTS_MIDDLEWARE: 40, WARC_MIDDLEWARE: 950}
    assert components(settings, "SPIDER_MIDDLEWARES") == {SOFT404_MIDDLEWARE: 1100}
    assert settings["SPIDER_MIDDLEWARES"].getpriority(SOFT404_MIDDLEWARE) == 15
    assert components(settings, "EXTENSIONS") == {**EXTENSIONS, SCRAPY_SPIDERSTATE: None, ID_SPIDERSTATE: 0,
                                                  SCRAPY_LOGSTATS: None, ID_LOGSTATS: 0}
    assert {settings["EXTENSIONS"].getpriority(k) for k in EXTENSIONS} == {15}
    assert components(settings, "ITEM_PIPELINES") == {CONTENT_PIPELINE: 100}
    assert components(settings, "FEED_STORAGES") == {"": FEED_STORAGE, "file": FEED_STORAGE}


def test_a_project_overrides_any_single_piece() -> None:
    settings = wired({
        "SCHEDULER": "tests.unit.test_addon.MyScheduler",
        "DOWNLOADER_MIDDLEWARES": {ATTEMPTS_MIDDLEWARE: 600},
        "SPIDER_MIDDLEWARES": {IdSoft404Middleware: None},
        "EXTENSIONS": {IdProgress: None},  # a class as the key: still recognised
    })
    assert settings["SCHEDULER"] == "tests.unit.test_addon.MyScheduler"
    middlewares = components(settings, "DOWNLOADER_MIDDLEWARES")
    assert middlewares[ATTEMPTS_MIDDLEWARE] == 600
    assert middlewares[ID_ROBOTS] == 100
    assert components(settings, "SPIDER_MIDDLEWARES") == {IdSoft404Middleware: None}
    extensions = components(settings, "EXTENSIONS")
    assert extensions[IdProgress] is None and "idcrawl.extensions.progress.IdProgress" not in extensions
    assert extensions["idcrawl.extensions.limits.IdLimits"] == 200


def test_a_project_that_lists_either_robots_middleware_decides_for_both() -> None:
    keep_scrapys = wired({"DOWNLOADER_MIDDLEWARES": {SCRAPY_ROBOTS: 100}})
    assert components(keep_scrapys, "DOWNLOADER_MIDDLEWARES") == {
        SCRAPY_ROBOTS: 100, ATTEMPTS_MIDDLEWARE: 549, SCRAPY_METAREFRESH: None, ID_METAREFRESH: 580,
        REDIRECTS_MIDDLEWARE: 40, WARC_MIDDLEWARE: 950}
    no_ours = wired({"DOWNLOADER_MIDDLEWARES": {ID_ROBOTS: None}})
    assert components(no_ours, "DOWNLOADER_MIDDLEWARES") == {
        ID_ROBOTS: None, ATTEMPTS_MIDDLEWARE: 549, SCRAPY_METAREFRESH: None, ID_METAREFRESH: 580,
        REDIRECTS_MIDDLEWARE: 40, WARC_MIDDLEWARE: 950}


def test_a_project_that_lists_either_meta_refresh_middleware_decides_for_both() -> None:
    keep_scrapys = wired({"DOWNLOADER_MIDDLEWARES": {SCRAPY_METAREFRESH: 580}})
    middlewares = components(keep_scrapys, "DOWNLOADER_MIDDLEWARES")
    assert middlewares[SCRAPY_METAREFRESH] == 580 and ID_METAREFRESH not in middlewares
    off = wired({"DOWNLOADER_MIDDLEWARES": {SCRAPY_METAREFRESH: None}})
    middlewares = components(off, "DOWNLOADER_MIDDLEWARES")
    assert middlewares[SCRAPY_METAREFRESH] is None and ID_METAREFRESH not in middlewares


def test_a_component_dict_from_the_command_line_still_gets_the_other_pieces() -> None:
    # -s EXTENSIONS='{"x": 0}' arrives as a JSON string at cmdline priority
    settings = wired({"EXTENSIONS": json.dumps({"tests.support.statsdump.StatsDump": 0})}, priority="cmdline")
    extensions = components(settings, "EXTENSIONS")
    assert extensions == {"tests.support.statsdump.StatsDump": 0, **EXTENSIONS, SCRAPY_SPIDERSTATE: None,
                          ID_SPIDERSTATE: 0, SCRAPY_LOGSTATS: None, ID_LOGSTATS: 0}
    assert settings["EXTENSIONS"].getpriority("tests.support.statsdump.StatsDump") == 40


def test_setdefault_component_keeps_a_higher_priority_entry() -> None:
    settings = BaseSettings({"ITEM_PIPELINES": {"a.B": 1}}, priority="cmdline")
    assert not setdefault_component(settings, "ITEM_PIPELINES", "a.B", 300)
    assert setdefault_component(settings, "ITEM_PIPELINES", "c.D", 300)
    assert settings.getdict("ITEM_PIPELINES") == {"a.B": 1, "c.D": 300}


def test_the_idseq_spider_works_without_the_addon() -> None:
    settings = spider_wired(Settings())  # Scrapy's defaults: its own scheduler
    assert settings["SCHEDULER"] == SCHEDULER
    assert components(settings, "DOWNLOADER_MIDDLEWARES") == {ATTEMPTS_MIDDLEWARE: 549, REDIRECTS_MIDDLEWARE: 40, WARC_MIDDLEWARE: 950}
    assert components(settings, "SPIDER_MIDDLEWARES") == {SOFT404_MIDDLEWARE: 1100}
    assert "idcrawl.settings_profiles.JobProfile" in settings.getdict("ADDONS")


@pytest.mark.parametrize("wire", ["addon", "spider"])
def test_an_id_crawl_is_bounded_unless_the_project_or_the_command_line_says_otherwise(wire: str) -> None:
    def wired_by(settings: BaseSettings) -> BaseSettings:
        if wire == "addon":
            IdCrawl().update_settings(settings)
        else:
            spider_wired(settings)
        return settings

    bounded = wired_by(Settings())
    assert {name: bounded.getint(name) for name in BOUNDS} == BOUNDS
    assert BOUNDS == {"DOWNLOAD_MAXSIZE": 32 * 1024 * 1024, "DOWNLOAD_WARNSIZE": 8 * 1024 * 1024,
                      "DOWNLOAD_TIMEOUT": 30}
    for priority in ("project", "spider", "cmdline"):
        told = Settings()
        told.set("DOWNLOAD_TIMEOUT", 180, priority=priority)
        assert wired_by(told).getint("DOWNLOAD_TIMEOUT") == 180, priority


def test_the_addon_obeys_robots_txt_unless_the_project_or_the_command_line_says_otherwise() -> None:
    assert POLITE == {"ROBOTSTXT_OBEY": True}
    assert Settings().getbool("ROBOTSTXT_OBEY") is False  # Scrapy's own default
    polite = wired()
    assert polite.getbool("ROBOTSTXT_OBEY") is True and polite.getpriority("ROBOTSTXT_OBEY") == 15
    for priority in ("project", "spider", "cmdline"):
        assert wired({"ROBOTSTXT_OBEY": False}, priority).getbool("ROBOTSTXT_OBEY") is False, priority


def test_the_idseq_spider_processes_a_responses_outputs_one_at_a_time_unless_told() -> None:
    settings = Settings()  # Scrapy's default CONCURRENT_ITEMS (100): 100 asyncio tasks per response
    IdSeqSpider.update_settings(settings)
    assert settings.getint("CONCURRENT_ITEMS") == ID_CONCURRENT_ITEMS == 1
    for priority in ("project", "spider", "cmdline"):
        told = Settings()
        told.set("CONCURRENT_ITEMS", 100, priority=priority)
        IdSeqSpider.update_settings(told)
        assert told.getint("CONCURRENT_ITEMS") == 100, priority


def test_the_idseq_spider_replaces_another_scheduler_but_keeps_a_subclass() -> None:
    other = Settings({"SCHEDULER": "scrapy.core.scheduler.Scheduler"})
    spider_wired(other)
    assert other["SCHEDULER"] == SCHEDULER
    mine = Settings({"SCHEDULER": "tests.unit.test_addon.MyScheduler"})
    spider_wired(mine)
    assert mine["SCHEDULER"] == "tests.unit.test_addon.MyScheduler"


def test_the_idseq_spider_leaves_a_listed_attempts_middleware_alone() -> None:
    settings = spider_wired(Settings({"DOWNLOADER_MIDDLEWARES": {IdAttemptsMiddleware: None}}))
    assert components(settings, "DOWNLOADER_MIDDLEWARES") == {IdAttemptsMiddleware: None, REDIRECTS_MIDDLEWARE: 40, WARC_MIDDLEWARE: 950}


def test_the_idseq_spider_leaves_a_listed_soft404_middleware_alone() -> None:
    settings = spider_wired(Settings({"SPIDER_MIDDLEWARES": {IdSoft404Middleware: None}}))
    assert components(settings, "SPIDER_MIDDLEWARES") == {IdSoft404Middleware: None}


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


def test_swap_component_puts_the_replacement_in_the_place_of_a_listed_component() -> None:
    limits, fleet = "idcrawl.extensions.limits.IdLimits", "myproject.extensions.MyLimits"  # a project's own
    settings = wired({"EXTENSIONS": {"tests.support.statsdump.StatsDump": 0}})
    swap_component(settings, "EXTENSIONS", limits, fleet)
    extensions = components(settings, "EXTENSIONS")
    assert extensions[limits] is None and extensions[fleet] == 200
    assert settings["EXTENSIONS"].getpriority(fleet) == 15  # the add-on's entry: the same priority
    moved = Settings()
    moved.set("EXTENSIONS", {IdLimits: 300}, priority="project")  # a class as the key, turned off below
    swap_component(moved, "EXTENSIONS", limits, fleet)
    assert components(moved, "EXTENSIONS") == {IdLimits: None, fleet: 300}
    chosen = Settings({"EXTENSIONS": {limits: 200, fleet: None}})  # the project decided: left alone
    swap_component(chosen, "EXTENSIONS", limits, fleet)
    assert components(chosen, "EXTENSIONS") == {limits: 200, fleet: None}
    unlisted = Settings()
    swap_component(unlisted, "EXTENSIONS", limits, fleet)
    assert components(unlisted, "EXTENSIONS") == {}


def test_the_idseq_spiders_needs_give_a_fleet_worker_the_id_scheduler_too() -> None:
    # the add-ons as Scrapy runs them (by priority): IdSeqNeeds forces IdScheduler, which a fleet's worker keeps
    # (it asks the worker for shared retries and the politeness gate: no scheduler of its own)
    crawler = Crawler(IdSeqSpider, Settings({"SCHEDULER": "scrapy.core.scheduler.Scheduler",
                                             "IDCRAWL_DISTRIBUTED": True}))  # runs update_settings
    crawler.addons.load_settings(crawler.settings)  # the add-ons' stage only (no reactor, no components)
    assert crawler.settings["SCHEDULER"] == "idcrawl.scheduler.IdScheduler"
    assert crawler.settings["IDCRAWL_WORKER_CLASS"] == "idcrawl.distributed.worker.RedisWorker"
    assert crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")[ATTEMPTS_MIDDLEWARE] == 549


def test_progress_lines_replace_scrapys_logstats_line_which_stays_available() -> None:
    """LogStats's "Crawled N pages" line beside idcrawl's progress lines said the same twice: the add-on puts
    IdLogStats in its place; a project that lists LogStats, or turns progress off, keeps Scrapy's."""
    extensions = components(wired(), "EXTENSIONS")
    assert (extensions[SCRAPY_LOGSTATS], extensions[ID_LOGSTATS]) == (None, 0)
    for project in ({"EXTENSIONS": {SCRAPY_LOGSTATS: 0}}, {"EXTENSIONS": {IdProgress: None}},
                    {"IDCRAWL_PROGRESS_INTERVAL": 0}):
        extensions = components(wired(project), "EXTENSIONS")
        assert ID_LOGSTATS not in extensions, project
        assert SCRAPY_LOGSTATS not in extensions or extensions[SCRAPY_LOGSTATS] is not None, project


def test_idlogstats_is_quiet_in_an_id_crawl_and_keeps_its_final_stats(caplog: pytest.LogCaptureFixture) -> None:
    from idcrawl.extensions.progress import IdLogStats

    plain = IdLogStats.from_crawler(get_crawler(Spider, {"LOGSTATS_INTERVAL": 60.0}))
    plain.pagesprev = plain.itemsprev = 0  # as spider_opened sets them
    with caplog.at_level("INFO"):
        plain.log(Spider("x"))
    assert "Crawled 0 pages" in caplog.text  # no id runtime: Scrapy's line
    caplog.clear()
    crawler = get_crawler(IdSeqSpider, {"LOGSTATS_INTERVAL": 60.0})
    crawler.spider = IdSeqSpider.from_crawler(crawler, url="http://127.0.0.1:9/{id}", start="1")
    quiet = IdLogStats.from_crawler(crawler)
    quiet.pagesprev = quiet.itemsprev = 0
    with caplog.at_level("INFO"):
        quiet.log(crawler.spider)
    assert "Crawled" not in caplog.text and quiet.pages == 0  # its rates still counted


def test_idcrawls_addons_have_readable_names_in_enabled_addons() -> None:
    from idcrawl.distributed.addon import Distributed
    from idcrawl.settings_profiles import JobProfile
    from idcrawl.spidermon.addon import Monitoring

    crawler = get_crawler(Spider)
    shown = repr([IdCrawl(crawler), IdSeqNeeds(), Distributed(), JobProfile(crawler), Monitoring()])
    assert shown == ("[idcrawl.addon.IdCrawl, idcrawl.addon.IdSeqNeeds, idcrawl.distributed.addon.Distributed, "
                     "idcrawl.settings_profiles.JobProfile, idcrawl.spidermon.addon.Monitoring]")
