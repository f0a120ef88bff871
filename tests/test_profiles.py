"""Settings profiles picked with IDCRAWL_PROFILE: values, precedence, unknown names."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from idcrawl.core.limits import SURVEY_TABLE_3, Limits
from idcrawl.errors import BadInputError
from idcrawl.profiles import known_profiles
from idcrawl.spiders.idseq import IdSeqSpider
from tests.conftest import GapModel
from tests.support.crawl import run_crawl


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
    assert "error: IDCRAWL_PROFILE='nope': unknown profile (known: survey)" in result.stderr
    assert "Traceback" not in result.stderr
    assert site.log == []


def test_a_profile_from_an_extra_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text("IDCRAWL_MARGIN = 42  # my margin\n")
    settings = applied({"IDCRAWL_PROFILE": "mine", "IDCRAWL_PROFILES_DIR": str(tmp_path)})
    assert settings.getint("IDCRAWL_MARGIN") == 42
