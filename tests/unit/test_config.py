"""Settings read once: one table (idcrawl.core.setting_specs.IdConfig), a frozen typed config per crawl.

The table's defaults are the ones ``default_settings.py`` and the manual's settings page give, the
config holds what Scrapy's getters read, and no module outside the config reads an ``IDCRAWL_*``
setting itself (``settings.getint("IDCRAWL_...")``) but those the lead converts after issue 28's merge.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from idcrawl import default_settings
from idcrawl.config import config_from, config_of, setting
from idcrawl.core.setting_specs import DEFAULTS, SPECS, IdConfig, SettingError, build_config, check_setting
from idcrawl.errors import BadInputError

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "idcrawl"
SETTINGS_PAGE = REPO / "docs" / "reference" / "settings.md"

#: The modules that read settings for the others.
CONFIG_MODULES = {"idcrawl/config.py", "idcrawl/core/setting_specs.py"}

#: Modules other helpers of issue 28 restructure at the same time; the lead converts their reads to
#: ``config_of(crawler)`` after the merge and empties this list.
NOT_YET_CONVERTED: set[str] = set()

#: ``settings.get("IDCRAWL_X" ...)``, ``settings.getint(\n "IDCRAWL_X"``, ``settings["IDCRAWL_X"]``
SETTINGS_READ = re.compile(r"""settings\s*(?:\.get(?:bool|int|float|list|dict)?\(|\[)\s*["']IDCRAWL_""")


def _readers() -> dict[str, int]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        count = len(SETTINGS_READ.findall(path.read_text(encoding="utf-8")))
        if count:
            found[path.relative_to(REPO).as_posix()] = count
    return found


def test_no_module_reads_an_idcrawl_setting_itself() -> None:
    readers = _readers()
    outside = sorted(set(readers) - CONFIG_MODULES - NOT_YET_CONVERTED)
    assert outside == [], f"read settings through idcrawl.config (config_of(crawler).name): {outside}"


def test_the_allowlist_names_only_modules_that_still_read_settings() -> None:
    stale = sorted(NOT_YET_CONVERTED - set(_readers()))
    assert stale == [], f"converted: remove from NOT_YET_CONVERTED: {stale}"


def test_the_guard_sees_a_read() -> None:
    assert SETTINGS_READ.search('x = settings.getint(\n    "IDCRAWL_WINDOW", 3)')
    assert SETTINGS_READ.search("crawler.settings['IDCRAWL_STATE']")
    assert not SETTINGS_READ.search('settings.getpriority("IDCRAWL_PROFILE")')


# -- the table and its copies --------------------------------------------------------------


def _as_module_constant(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def test_default_settings_holds_the_tables_defaults() -> None:
    constants = {name: getattr(default_settings, name) for name in dir(default_settings) if name.startswith("IDCRAWL_")}
    assert sorted(constants) == sorted(DEFAULTS)
    for name, default in DEFAULTS.items():
        wanted = _as_module_constant(default)
        assert constants[name] == wanted, name
        assert type(constants[name]) is type(wanted), name


def _page_defaults() -> dict[str, str]:
    """``IDCRAWL_*`` name -> the default column of the settings page's table (a row may name several)."""
    found = {}
    for line in SETTINGS_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `IDCRAWL_"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            for name in re.findall(r"`(IDCRAWL_[A-Z0-9_]+)`", cells[0]):
                found[name] = cells[1].strip("`")
    return found


def _shown(value: object) -> str:
    """A default as the page writes it: strings without quotes, lists with double quotes."""
    value = _as_module_constant(value)
    if isinstance(value, str):
        return value
    return repr(value).replace("'", '"')


def test_the_settings_page_gives_the_tables_defaults() -> None:
    page = _page_defaults()
    assert sorted(page) == sorted(DEFAULTS)
    wrong = {name: (shown, _shown(DEFAULTS[name])) for name, shown in page.items()
             if shown.strip('"') != _shown(DEFAULTS[name])}
    assert wrong == {}, "docs/reference/settings.md: (page, table)"


def test_getting_started_gives_the_tables_defaults_of_the_settings_it_names() -> None:
    """Its argument table's default column says "`IDCRAWL_X` (value)": the value is the setting's default."""
    page = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    shown = dict(re.findall(r"\| (?:\{setting\})?`(IDCRAWL_[A-Z0-9_]+)` \(([^)]*)\) \|$", page, re.MULTILINE))
    assert {"IDCRAWL_MARGIN", "IDCRAWL_WINDOW", "IDCRAWL_MISSING_STATUSES"} <= shown.keys()
    wrong = {name: (value, _shown(DEFAULTS[name])) for name, value in shown.items()
             if f"[{value}]" != _shown(DEFAULTS[name]) and value != _shown(DEFAULTS[name])}
    assert wrong == {}, "docs/getting-started.md: (page, table)"


def test_every_field_of_the_config_is_a_setting() -> None:
    assert [f"IDCRAWL_{f.name.upper()}" for f in dataclasses.fields(IdConfig)] == list(SPECS)
    assert all(check_setting(name, default) is None for name, default in DEFAULTS.items())


# -- the config -----------------------------------------------------------------------------


def test_the_config_is_typed_and_frozen() -> None:
    config = build_config({
        "IDCRAWL_WINDOW": "64", "IDCRAWL_STATE": "false", "IDCRAWL_MISSING_STATUSES": "404, 451",
        "IDCRAWL_STATE_BACKEND": " Redis ", "IDCRAWL_FAIL_REASONS": "finished, shutdown",
        "IDCRAWL_STATE_PATH": "", "IDCRAWL_REDIS_PREFIX": "", "IDCRAWL_FAIL_EXIT_CODE": "3",
    }.get)
    assert config.window == 64
    assert config.state is False
    assert config.missing_statuses == (404, 451)
    assert config.state_backend == "redis"
    assert config.fail_reasons == ("finished", "shutdown")
    assert config.state_path is None  # empty: the default
    assert config.redis_prefix == "idcrawl"
    assert config.fail_exit_code == 3
    assert config.margin == 10  # unset: the default
    assert config.target_defaults() == {"margin": 10, "window": 64, "missing_statuses": (404, 451),
                                        "late_every": 0.0, "late_max": 1000}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.window = 3  # type: ignore[misc]


def test_a_bad_value_is_one_line_naming_the_setting_and_the_value() -> None:
    with pytest.raises(BadInputError) as info:
        config_from(Settings({"IDCRAWL_WINDOW": "abc"}))
    assert str(info.value) == "bad setting: IDCRAWL_WINDOW='abc': must be an integer >= 1"


def test_one_setting_read_while_settings_are_assembled() -> None:
    assert setting(Settings({"IDCRAWL_DISTRIBUTED": "1"}), "IDCRAWL_DISTRIBUTED") is True
    assert setting(Settings(), "IDCRAWL_REDIS_PREFIX") == "idcrawl"
    with pytest.raises(SettingError):  # a ValueError, as Scrapy's getbool raises
        setting(Settings({"IDCRAWL_DISTRIBUTED": "abc"}), "IDCRAWL_DISTRIBUTED")


def test_a_crawl_builds_its_config_once_its_settings_are_final() -> None:
    crawler = Crawler(Spider, Settings({"IDCRAWL_WINDOW": 32}))
    assert config_of(crawler).window == 32
    crawler.settings.set("IDCRAWL_WINDOW", 48, priority="cmdline")  # a profile, the spider: still changing
    assert config_of(crawler).window == 48
    crawler.settings.freeze()
    config = config_of(crawler)
    assert config.window == 48
    assert config_of(crawler) is config


SCALARS = sorted(name for name, default in DEFAULTS.items() if type(default) in (bool, int, float))


def _scrapy_reads(name: str, value: object) -> object:
    got = Settings({name: value})
    default = DEFAULTS[name]
    if isinstance(default, bool):
        return got.getbool(name)
    if isinstance(default, int):
        return got.getint(name)
    return got.getfloat(name)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    name=st.sampled_from(SCALARS),
    value=st.one_of(
        st.integers(min_value=-5, max_value=2**40), st.floats(allow_nan=False), st.booleans(),
        st.sampled_from(["0", "1", "3", "2.5", "1e3", "true", "False", "64", "0.001"]),
    ),
)
def test_the_config_holds_what_scrapys_getter_reads(name: str, value: object) -> None:
    if name.startswith(("IDCRAWL_LIMIT_", "IDCRAWL_JOB_LIMIT_")):
        return  # read by idcrawl.core.limits as given
    try:
        config = build_config({name: value}.get)
    except SettingError:
        return
    assert getattr(config, name.removeprefix("IDCRAWL_").lower()) == _scrapy_reads(name, value)
