"""Settings profiles picked with IDCRAWL_PROFILE: values, precedence, unknown names (real crawls:
tests/crawl/test_profiles_crawl.py)."""

from __future__ import annotations

import json
import logging
import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from idcrawl import default_settings
from idcrawl.config import IdConfig, config_from
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import parse_job
from idcrawl.core.limits import SURVEY_TABLE_3, Limits
from idcrawl.core.politeness import PolitenessRule
from idcrawl.errors import BadInputError
from idcrawl.settings_profiles import PROFILE_PRIORITY, apply_job_profile, apply_profile, known_profiles, load_profile
from idcrawl.spiders.idseq import IdSeqSpider
from tests.support.crawl import REPO


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


def test_a_profile_from_an_extra_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text("IDCRAWL_MARGIN = 42  # my margin\n")
    settings = applied({"IDCRAWL_PROFILE": "mine", "IDCRAWL_PROFILES_DIR": str(tmp_path)})
    assert settings.getint("IDCRAWL_MARGIN") == 42


# -- the shipped profiles --------------------------------------------------------------------------


def test_the_shipped_profiles() -> None:
    assert {"default", "polite", "fast", "survey", "distributed"} <= set(known_profiles())


@pytest.mark.parametrize("name", ["polite", "fast", "survey", "distributed"])
def test_a_shipped_profile_is_small_commented_and_names_known_settings(name: str) -> None:
    values = load_profile(name)
    assert 1 <= len(values) <= 20
    unknown = {k for k in values if k.startswith("IDCRAWL_") and not hasattr(default_settings, k)}
    assert unknown == set()
    text = (REPO / "idcrawl" / "settings_profiles" / f"{name}.toml").read_text()
    setting_lines = [line for line in text.splitlines() if re.match(r"\s*[A-Z][A-Z0-9_]*\s*=", line)]
    assert len(setting_lines) == len(values)
    assert all("#" in line.split("=", 1)[1] for line in setting_lines), "one comment per setting"


def test_the_default_profile_is_what_a_crawl_gets_with_no_profile() -> None:
    """One source of truth: ``default`` sets nothing (the defaults are default_settings.py's), and the
    values its comments quote are those defaults; with it or without a profile, politeness is on."""
    assert load_profile("default") == {}
    text = (REPO / "idcrawl" / "settings_profiles" / "default.toml").read_text()
    assert all(not line.strip() or line.startswith("#") for line in text.splitlines())
    quoted = dict(re.findall(r"\b(IDCRAWL_POLITENESS_[A-Z_]+) = ([0-9.]+)", text))
    assert quoted == {name: str(getattr(default_settings, name)) for name in quoted}
    assert len(quoted) == 3
    none, chosen = config_from(applied({})), config_from(applied({"IDCRAWL_PROFILE": "default"}))
    assert replace(none, profile="default") == chosen  # but for the name of the profile
    assert (none.politeness_factor, none.politeness_min_delay, none.politeness_max_delay) == (5.0, 1.0, 30.0)
    assert config_from(Settings()).politeness_factor == 5.0  # a project that does not import default_settings


def test_politeness_is_on_by_default_and_each_source_above_the_defaults_turns_it_off() -> None:
    """The defaults < the project's settings file < a profile (``fast``) < -s, as for every setting."""
    assert config_from(applied({})).politeness_factor == 5.0
    assert config_from(applied({"IDCRAWL_POLITENESS_FACTOR": 0})).politeness_factor == 0.0  # project
    fast = applied({"IDCRAWL_PROFILE": "fast", "IDCRAWL_POLITENESS_FACTOR": 3})  # the profile beats the project
    assert config_from(fast).politeness_factor == 0.0
    explicit = Settings()
    explicit.set("IDCRAWL_PROFILE", "fast", priority="cmdline")
    explicit.set("IDCRAWL_POLITENESS_FACTOR", 2, priority="cmdline")
    IdSeqSpider.update_settings(explicit)
    assert config_from(explicit).politeness_factor == 2.0  # -s beats the profile
    for name in ("survey", "distributed"):  # say nothing of politeness: the defaults hold
        assert not {k for k in load_profile(name) if k.startswith("IDCRAWL_POLITENESS_")}, name


def test_the_polite_profile_is_at_least_as_polite_as_the_defaults_at_every_response_time() -> None:
    def rule(config: IdConfig) -> PolitenessRule:
        return PolitenessRule(config.politeness_factor, config.politeness_min_delay, config.politeness_max_delay)

    default, polite = rule(config_from(applied({}))), rule(config_from(applied({"IDCRAWL_PROFILE": "polite"})))
    for latency in [None, *(i / 100 for i in range(0, 1000, 7))]:
        assert polite.gap(latency) >= default.gap(latency) >= 1.0, latency


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


def test_the_fast_profile_is_what_its_page_says() -> None:
    """docs/profiles.md, "The `fast` profile, line by line": every setting of fast.toml, with its value."""
    page = (REPO / "docs" / "profiles.md").read_text(encoding="utf-8")
    section = page.split("\n## The `fast` profile, line by line\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    documented = {name.strip().strip("`"): tomllib.loads(f"v = {value.strip().strip('`')}")["v"]
                  for name, value in rows}
    assert documented == load_profile("fast")


# -- the start line and the warning (idcrawl.settings_profiles.profile_line / profile_conflicts) ------------

#: what ``scrapy startproject`` writes into a project's settings.py
STARTPROJECT = {"ROBOTSTXT_OBEY": True, "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": 1}


def profiled(profile: str | None, project: dict[str, object], cmdline: dict[str, object] | None = None) -> Settings:
    from idcrawl.addon import IdCrawl

    settings = Settings()
    settings.setdict(project, priority="project")
    if profile:
        settings.set("IDCRAWL_PROFILE", profile, priority="cmdline")
    settings.setdict(cmdline or {}, priority="cmdline")
    IdCrawl().update_settings(settings)
    return settings


def test_the_start_line_says_the_profile_and_what_it_comes_to() -> None:
    from idcrawl.settings_profiles import profile_conflicts, profile_line

    fast = profiled("fast", STARTPROJECT)
    assert profile_line(fast) == ("idcrawl: settings profile 'fast': CONCURRENT_REQUESTS=32, 32 per host, "
                                  "DOWNLOAD_DELAY=0 s, politeness off, robots.txt obeyed")
    assert profile_conflicts(fast) == []  # fast sets the delay itself: startproject's 1 s does not hold it back
    none = profiled(None, STARTPROJECT)
    assert profile_line(none) == ("idcrawl: no settings profile: CONCURRENT_REQUESTS=16, 1 per host (politeness), "
                                  "DOWNLOAD_DELAY=1 s, politeness on (5x the last fetch, 1 to 30 s apart), "
                                  "robots.txt obeyed")
    polite = profiled("polite", STARTPROJECT, {"CONCURRENT_REQUESTS": 4})
    assert profile_line(polite).endswith("politeness on (5x the last fetch, 3 to 30 s apart), robots.txt obeyed; "
                                         "-s overrides the profile's CONCURRENT_REQUESTS")


def test_a_warning_when_the_projects_settings_keep_a_profile_from_doing_what_it_says() -> None:
    from idcrawl.settings_profiles import profile_conflicts

    settings = profiled("fast", {**STARTPROJECT, "AUTOTHROTTLE_ENABLED": True, "DOWNLOAD_DELAY": 2})
    lines = profile_conflicts(settings)
    assert lines == [
        "idcrawl: profile 'fast' turns politeness off, but AUTOTHROTTLE_ENABLED=True from the project's settings "
        "slows each host down to its latency: remove it there, or run with -s AUTOTHROTTLE_ENABLED=... to choose",
    ]  # DOWNLOAD_DELAY: fast sets it, above the project's
    spider = profiled("fast", {}, {})
    spider.set("DOWNLOAD_DELAY", 2, priority="cmdline")  # -s beats the profile: said on the start line, no warning
    assert profile_conflicts(spider) == []
    assert profile_conflicts(profiled("polite", {"AUTOTHROTTLE_ENABLED": True})) == []  # it promises no speed
