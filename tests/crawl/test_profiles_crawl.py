"""Settings profiles in real crawls: an unknown name, the precedence of every settings source, a job file's profile."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from idcrawl.settings_profiles import PROFILE_PRIORITY
from tests.conftest import GapModel
from tests.support.crawl import REPO, run_crawl
from tests.support.states import scrapy_many
from tests.unit.test_profiles import job_file


def test_an_unknown_profile_stops_the_crawl_with_one_line(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 100, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0}, {"IDCRAWL_PROFILE": "nope"})
    assert result.returncode != 0
    # raised while Scrapy applies settings: its command line reports it as a usage error
    assert "error: IDCRAWL_PROFILE='nope': unknown profile (known: default, distributed, fast, polite, survey)" in (
        result.stderr)
    assert "Traceback" not in result.stderr
    assert site.log == []



def test_an_unknown_profile_stops_every_command_with_one_line(tmp_path: Path) -> None:
    """Commands apply the profile as a crawl does: the same refusal, before any state or Redis is read."""
    commands = [["idplan"], ["idplan", "--json"], ["iddue"], ["idcoverage", "-o", "map.svg"], ["idjob", "status"]]
    runs = scrapy_many(tmp_path, *([*c, "-s", "IDCRAWL_PROFILE=nope", "-s", "REDIS_URL=redis://127.0.0.1:1/0"]
                                   for c in commands))
    for command, run in zip(commands, runs, strict=True):
        assert run.returncode == 1, (command, run.stderr)
        assert run.stderr.splitlines() == [
            f"{command[0]}: error: IDCRAWL_PROFILE='nope': unknown profile "
            "(known: default, distributed, fast, polite, survey)"
        ], command
        assert run.stdout == "", command
    assert not (tmp_path / "map.svg").exists()


PRECEDENCE_PROJECT = """\
ADDONS = {"idcrawl.addon.IdCrawl": 0}
TELNETCONSOLE_ENABLED = False
PREC_PROJECT = "project"
PREC_PROFILE = "project"
PREC_CMDLINE = "project"
DOWNLOADER_MIDDLEWARES = {"idcrawl.downloadermiddlewares.attempts.IdAttemptsMiddleware": 600}
EXTENSIONS = {"idcrawl.extensions.progress.IdProgress": None}
"""

PRECEDENCE_PROFILE = """\
PREC_PROFILE = "profile"         # beats the project's settings file
PREC_SPIDER_PROFILE = "profile"  # beats the spider's custom_settings
PREC_CMDLINE = "profile"         # loses to -s

[DOWNLOADER_MIDDLEWARES]         # merged key by key
"scrapy.downloadermiddlewares.useragent.UserAgentMiddleware" = 401
"""


def test_precedence_defaults_addon_project_spider_profile_cmdline(tmp_path: Path) -> None:
    """Scrapy defaults < add-on < project settings file < custom_settings < profile < -s, in a real crawl."""
    (tmp_path / "precproject.py").write_text(PRECEDENCE_PROJECT)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "prec.toml").write_text(PRECEDENCE_PROFILE)
    names = ["SCHEDULER", "DOWNLOADER_MIDDLEWARES", "EXTENSIONS", "PREC_PROJECT", "PREC_PROFILE", "PREC_CMDLINE",
             "PREC_SPIDER", "PREC_SPIDER_PROFILE", "RETRY_TIMES"]
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "precproject",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    command = [sys.executable, "-m", "scrapy", "runspider", str(REPO / "tests" / "support" / "settings_spider.py"),
               "-s", "IDCRAWL_PROFILE=prec", "-s", f"IDCRAWL_PROFILES_DIR={tmp_path / 'profiles'}",
               "-s", "PREC_CMDLINE=cmdline", "-s", f"DUMP_PATH={tmp_path / 'dump.json'}",
               "-s", f"DUMP_NAMES={','.join(names)}"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dump = json.loads((tmp_path / "dump.json").read_text())
    value = {name: dump[name]["value"] for name in names}
    assert value["RETRY_TIMES"] == 2 and dump["RETRY_TIMES"]["priority"] == 0  # nobody set it: Scrapy's default
    assert value["SCHEDULER"] == "idcrawl.scheduler.IdScheduler"  # add-on > Scrapy default
    assert dump["SCHEDULER"]["priority"] == 15
    middlewares = value["DOWNLOADER_MIDDLEWARES"]
    assert middlewares["idcrawl.downloadermiddlewares.attempts.IdAttemptsMiddleware"] == 600  # project > add-on, one piece
    assert middlewares["idcrawl.downloadermiddlewares.robotstxt.IdRobotsTxtMiddleware"] == 100  # the add-on's other pieces stay
    assert middlewares["scrapy.downloadermiddlewares.useragent.UserAgentMiddleware"] == 401  # profile table merged
    assert value["EXTENSIONS"]["idcrawl.extensions.progress.IdProgress"] is None  # project > add-on
    assert value["EXTENSIONS"]["idcrawl.extensions.limits.IdLimits"] == 200
    assert value["PREC_PROJECT"] == "project"
    assert value["PREC_PROFILE"] == "profile"  # profile > project settings file
    assert value["PREC_SPIDER"] == "spider"
    assert value["PREC_SPIDER_PROFILE"] == "profile"  # profile > custom_settings
    assert value["PREC_CMDLINE"] == "cmdline"  # -s > profile
    assert [dump[n]["priority"] for n in ("PREC_PROJECT", "PREC_SPIDER", "PREC_PROFILE", "PREC_CMDLINE")] == [
        20, 30, PROFILE_PRIORITY, 40]


def test_a_job_files_profile_shapes_the_crawl_and_an_explicit_one_wins(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1, 400, set()))
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "three.toml").write_text("CLOSESPIDER_ITEMCOUNT = 3  # stop after 3 items\n")
    (profiles / "pages.toml").write_text("CLOSESPIDER_PAGECOUNT = 5  # stop after 5 responses\n")
    job = job_file(tmp_path, "three", url=site.url())
    job.write_text(job.read_text().replace("max = 5", "max = 400"))
    settings = {"IDCRAWL_PROFILES_DIR": str(profiles), "CONCURRENT_REQUESTS": 1}
    by_job = run_crawl(tmp_path, {"job": job}, settings)
    assert by_job.returncode == 0, by_job.stderr[-3000:]
    assert by_job.stats["finish_reason"] == "closespider_itemcount"
    assert "settings profile 'three' from job file" in by_job.stderr
    explicit = run_crawl(tmp_path, {"job": job, "resume": "none"}, {**settings, "IDCRAWL_PROFILE": "pages"})
    assert explicit.returncode == 0, explicit.stderr[-3000:]
    assert explicit.stats["finish_reason"] == "closespider_pagecount"
    assert "is overridden by -s IDCRAWL_PROFILE=pages" in explicit.stderr


def test_a_job_profile_that_sets_a_target_default_stops_the_crawl_with_one_line(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1, 100, set()))
    (tmp_path / "early.toml").write_text("IDCRAWL_MARGIN = 3  # a target default\n")
    result = run_crawl(tmp_path, {"job": job_file(tmp_path, "early", url=site.url())},
                       {"IDCRAWL_PROFILES_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "profile='early': the profile sets IDCRAWL_MARGIN, which is read before the job file" in result.stderr
    assert "Traceback" not in result.stderr
    assert site.log == []


def test_a_fast_crawl_gives_exactly_the_items_of_a_default_crawl(make_site, tmp_path: Path) -> None:
    """The `fast` profile trims cost, not results: the same items (but for the fetch time) as no profile,
    on a site with scattered gaps shorter than the margin and a run of misses that ends the lane."""
    rng = random.Random(18)  # seeded: the same gaps every run
    gaps = {i for i in range(2, 300) if rng.random() < 0.08} | set(range(300, 321))
    site = make_site(GapModel(1, 340, gaps))
    expected = [i for i in range(1, 300) if i not in gaps]  # 300-319 cut the lane: 321-340 are never asked for
    args = {"url": site.url(), "start": 1, "margin": 20}
    items = {}
    for name, settings in (("fast", {"IDCRAWL_PROFILE": "fast"}), ("none", {})):
        workdir = tmp_path / name
        workdir.mkdir()
        result = run_crawl(workdir, args, settings)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.ids == expected
        items[name] = sorted(({k: v for k, v in item.items() if k != "fetched_at"} for item in result.items),
                             key=lambda item: item["id"])
        if name == "fast":  # the profile was in effect: no downloader/* stats (DOWNLOADER_STATS = false)
            assert not any(key.startswith("downloader/") for key in result.stats)
            assert result.stats["response_received_count"] >= 320  # CoreStats still counts every response
    assert items["fast"] == items["none"]
