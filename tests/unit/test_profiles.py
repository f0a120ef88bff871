"""Settings profiles picked with IDCRAWL_PROFILE: values, precedence, unknown names."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from idcrawl import default_settings
from idcrawl.core.limits import SURVEY_TABLE_3, Limits
from idcrawl.core.targets import TargetError, parse_job
from idcrawl.errors import BadInputError
from idcrawl.settings_profiles import PROFILE_PRIORITY, apply_job_profile, apply_profile, known_profiles, load_profile
from idcrawl.spiders.idseq import IdSeqSpider
from tests.conftest import GapModel
from tests.support.crawl import REPO, run_crawl


def applied(values: dict[str, object], priority: str = "project") -> Settings:
    settings = Settings()
    settings.setdict(values, priority=priority)
    IdSeqSpider.update_settings(settings)
    return settings


def test_the_survey_profile_is_table_3_of_seed_002() -> None:
    crawler = get_crawler(IdSeqSpider, {"IDCRAWL_PROFILE": "survey"})
    crawler._apply_settings()
    settings = crawler.settings
    assert Limits.from_settings(settings.get, "IDCRAWL_LIMIT_") == SURVEY_TABLE_3
    assert settings.getint("IDCRAWL_LIMIT_IMAX") == 100 and settings["IDCRAWL_LIMIT_TDL"] == "15m"


def test_a_profile_overrides_project_settings_but_not_explicit_ones() -> None:
    project = applied({"IDCRAWL_PROFILE": "survey", "IDCRAWL_LIMIT_IMAX": 7})
    assert project.getint("IDCRAWL_LIMIT_IMAX") == 100
    explicit = Settings()
    explicit.set("IDCRAWL_PROFILE", "survey", priority="cmdline")
    explicit.set("IDCRAWL_LIMIT_IMAX", 7, priority="cmdline")
    IdSeqSpider.update_settings(explicit)
    assert explicit.getint("IDCRAWL_LIMIT_IMAX") == 7
    assert explicit.getint("IDCRAWL_LIMIT_PLMAX") == 500


def test_no_profile_changes_nothing() -> None:
    assert applied({}).getint("IDCRAWL_LIMIT_IMAX") == 0


def test_an_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(BadInputError, match=r"IDCRAWL_PROFILE='nope': unknown profile \(known: .*survey"):
        applied({"IDCRAWL_PROFILE": "nope"})
    assert "survey" in known_profiles()


def test_an_unknown_profile_stops_the_crawl_with_one_line(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 100, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0}, {"IDCRAWL_PROFILE": "nope"})
    assert result.returncode != 0
    # raised while Scrapy applies settings: its command line reports it as a usage error
    assert "error: IDCRAWL_PROFILE='nope': unknown profile (known: default, distributed, fast, polite, survey)" in (
        result.stderr)
    assert "Traceback" not in result.stderr
    assert site.log == []


def test_a_profile_from_an_extra_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text("IDCRAWL_MARGIN = 42  # my margin\n")
    settings = applied({"IDCRAWL_PROFILE": "mine", "IDCRAWL_PROFILES_DIR": str(tmp_path)})
    assert settings.getint("IDCRAWL_MARGIN") == 42


# -- the shipped profiles --------------------------------------------------------------------------


def test_the_shipped_profiles() -> None:
    assert {"default", "polite", "fast", "survey", "distributed"} <= set(known_profiles())


@pytest.mark.parametrize("name", ["default", "polite", "fast", "survey", "distributed"])
def test_a_shipped_profile_is_small_commented_and_names_known_settings(name: str) -> None:
    values = load_profile(name)
    assert 1 <= len(values) <= 20
    unknown = {k for k in values if k.startswith("IDCRAWL_") and not hasattr(default_settings, k)}
    assert unknown == set()
    text = (REPO / "idcrawl" / "settings_profiles" / f"{name}.toml").read_text()
    setting_lines = [line for line in text.splitlines() if re.match(r"\s*[A-Z][A-Z0-9_]*\s*=", line)]
    assert len(setting_lines) == len(values)
    assert all("#" in line.split("=", 1)[1] for line in setting_lines), "one comment per setting"


def test_the_top_level_folder_holds_no_profile_that_would_not_be_packaged() -> None:
    assert not list((REPO / "settings_profiles").glob("*.toml"))


# -- loading and applying ------------------------------------------------------------------------


def test_a_profile_table_adds_to_a_component_dict_key_by_key(tmp_path: Path) -> None:
    (tmp_path / "mw.toml").write_text(
        '[DOWNLOADER_MIDDLEWARES]  # one more middleware\n"my.Middleware" = 650  # after the others\n'
    )
    settings = Settings()
    settings.set("DOWNLOADER_MIDDLEWARES", {"project.Middleware": 10}, priority="project")
    settings.set("IDCRAWL_PROFILES_DIR", str(tmp_path))
    settings.set("IDCRAWL_PROFILE", "mw")
    apply_profile(settings)
    assert settings.getdict("DOWNLOADER_MIDDLEWARES") == {"project.Middleware": 10, "my.Middleware": 650}
    assert settings["DOWNLOADER_MIDDLEWARES"].getpriority("my.Middleware") == PROFILE_PRIORITY


def test_a_profile_in_the_extra_folder_shadows_a_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "survey.toml").write_text("IDCRAWL_LIMIT_IMAX = 5  # mine\n")
    settings = applied({"IDCRAWL_PROFILE": "survey", "IDCRAWL_PROFILES_DIR": str(tmp_path)})
    assert settings.getint("IDCRAWL_LIMIT_IMAX") == 5 and settings.getint("IDCRAWL_LIMIT_PLMAX") == 0


def test_a_profile_cannot_pick_profiles(tmp_path: Path) -> None:
    (tmp_path / "loop.toml").write_text('IDCRAWL_PROFILE = "survey"  # no\n')
    with pytest.raises(BadInputError, match=r"IDCRAWL_PROFILE='loop': .*loop.toml sets IDCRAWL_PROFILE"):
        applied({"IDCRAWL_PROFILE": "loop", "IDCRAWL_PROFILES_DIR": str(tmp_path)})


def test_a_broken_profile_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("IDCRAWL_MARGIN = = 3\n")
    with pytest.raises(BadInputError, match=r"IDCRAWL_PROFILE='bad': .*bad.toml is not valid TOML"):
        applied({"IDCRAWL_PROFILE": "bad", "IDCRAWL_PROFILES_DIR": str(tmp_path)})


def test_an_unknown_idcrawl_setting_in_a_profile_warns_and_other_settings_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "odd.toml").write_text('IDCRAWL_MARGN = 3  # typo\nSOME_ADDON_SETTING = "x"  # not ours\n')
    with caplog.at_level(logging.WARNING, logger="idcrawl.settings_profiles"):
        settings = applied({"IDCRAWL_PROFILE": "odd", "IDCRAWL_PROFILES_DIR": str(tmp_path)})
    assert settings["SOME_ADDON_SETTING"] == "x"
    assert "IDCRAWL_MARGN, which this version of idcrawl does not know" in caplog.text


# -- a job file's profile key ---------------------------------------------------------------------


def job_file(tmp_path: Path, profile: object, url: str = "http://127.0.0.1:1/{id}") -> Path:
    path = tmp_path / "job.toml"
    head = f"profile = {json.dumps(profile)}\n" if profile is not None else ""
    path.write_text(f'{head}[[targets]]\nurl = "{url}"\nstart = 1\nmax = 5\nmargin = 0\n')
    return path


def test_parse_job_accepts_a_profile_key_and_checks_it(tmp_path: Path) -> None:
    assert len(parse_job(job_file(tmp_path, "survey"))) == 1
    with pytest.raises(TargetError, match=r"job file .*: profile=3: must be the name of a settings profile"):
        parse_job(job_file(tmp_path, 3))


def test_a_job_files_profile_counts_as_the_spiders_choice(tmp_path: Path) -> None:
    settings = Settings()
    assert apply_job_profile(settings, str(job_file(tmp_path, "survey"))) == "survey"
    assert settings["IDCRAWL_PROFILE"] == "survey" and settings.getpriority("IDCRAWL_PROFILE") == 30
    assert settings.getint("IDCRAWL_LIMIT_IMAX") == 100
    assert apply_job_profile(Settings(), str(job_file(tmp_path, None))) is None


def test_an_explicit_profile_on_the_command_line_beats_the_job_files(tmp_path: Path) -> None:
    settings = Settings()
    settings.set("IDCRAWL_PROFILE", "polite", priority="cmdline")
    apply_profile(settings)
    assert apply_job_profile(settings, str(job_file(tmp_path, "survey"))) is None
    assert settings["IDCRAWL_PROFILE"] == "polite" and settings.getint("IDCRAWL_LIMIT_IMAX") == 0


def test_a_job_profile_that_differs_from_the_projects_applied_one_is_refused(tmp_path: Path) -> None:
    settings = applied({"IDCRAWL_PROFILE": "polite"})
    with pytest.raises(BadInputError, match=r"profile='survey': the settings already applied IDCRAWL_PROFILE='polite'"):
        apply_job_profile(settings, str(job_file(tmp_path, "survey")))


def test_a_job_profile_may_not_set_what_the_spider_read_before_the_job_file(tmp_path: Path) -> None:
    (tmp_path / "early.toml").write_text("IDCRAWL_MARGIN = 3  # a target default\n")
    settings = Settings({"IDCRAWL_PROFILES_DIR": str(tmp_path)})
    with pytest.raises(BadInputError, match=r"profile='early': the profile sets IDCRAWL_MARGIN, which is read before "
                                            r"the job file; pick it with -s IDCRAWL_PROFILE=early instead"):
        apply_job_profile(settings, str(job_file(tmp_path, "early")))
    with pytest.raises(BadInputError, match=r"profile='distributed': the profile sets IDCRAWL_DISTRIBUTED"):
        apply_job_profile(Settings(), str(job_file(tmp_path, "distributed")))


def test_an_unknown_job_profile_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"IDCRAWL_PROFILE='nope': unknown profile \(known: default, "):
        apply_job_profile(Settings(), str(job_file(tmp_path, "nope")))


# -- real crawls ----------------------------------------------------------------------------------

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
