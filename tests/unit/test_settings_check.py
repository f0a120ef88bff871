"""Every IDCRAWL_* setting is checked once against one table (idcrawl.core.setting_specs)."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl import default_settings
from idcrawl.core.setting_specs import SPECS, SettingError, check_setting, check_settings

NAMES = sorted(name for name in vars(default_settings) if name.startswith("IDCRAWL_"))


def test_every_setting_of_default_settings_has_a_spec() -> None:
    # a new setting needs an entry in idcrawl/core/setting_specs.py SPECS (its type and range)
    missing = [name for name in NAMES if name not in SPECS]
    assert missing == [], f"add these settings to idcrawl.core.setting_specs.SPECS: {missing}"
    assert sorted(set(SPECS) - set(NAMES)) == [], "SPECS names a setting that default_settings does not have"


@pytest.mark.parametrize("name", NAMES)
def test_every_documented_default_passes(name: str) -> None:
    check_setting(name, getattr(default_settings, name))


def test_every_packaged_profile_passes() -> None:
    for entry in resources.files("idcrawl.settings_profiles").iterdir():
        if entry.name.endswith(".toml"):
            values = tomllib.loads(entry.read_text(encoding="utf-8"))
            check_settings(lambda name, values=values: values.get(name))


BAD = [
    ("IDCRAWL_WINDOW", "abc", "IDCRAWL_WINDOW='abc': must be an integer >= 1"),
    ("IDCRAWL_WINDOW", "0", "must be an integer >= 1"),
    ("IDCRAWL_WINDOW", 2.5, "must be an integer >= 1"),
    ("IDCRAWL_MARGIN", "-1", "IDCRAWL_MARGIN='-1': must be an integer >= 0"),
    ("IDCRAWL_POLITENESS_FACTOR", "abc", "IDCRAWL_POLITENESS_FACTOR='abc': must be a finite number >= 0"),
    ("IDCRAWL_POLITENESS_FACTOR", "nan", "must be a finite number >= 0"),
    ("IDCRAWL_POLITENESS_FACTOR", "inf", "must be a finite number >= 0"),
    ("IDCRAWL_STATE_COMMIT_ITEMS", "0", "IDCRAWL_STATE_COMMIT_ITEMS='0': must be an integer in 1..1000000000"),
    ("IDCRAWL_STATE_COMMIT_INTERVAL", "-1", "must be a finite number >= 0"),
    ("IDCRAWL_STATE", "yes", "IDCRAWL_STATE='yes': must be True or False"),
    ("IDCRAWL_DISTRIBUTED", "2", "must be True or False"),
    ("IDCRAWL_STATE_BACKEND", "postgres", "must be one of sqlite, redis"),
    ("IDCRAWL_DUPEFILTER_BACKEND", "bloom", "must be one of pybloom, rbloom, set"),
    ("IDCRAWL_DUPEFILTER_ERROR_RATE", "1", "must be a number between 0 and 1 (exclusive)"),
    ("IDCRAWL_CONTENT_DUPLICATES", "keep", "must be one of mark, drop, off"),
    ("IDCRAWL_CONTENT_NEAR_DUPLICATES", "1.5", "must be a Jaccard threshold in [0, 1]"),
    ("IDCRAWL_MISSING_STATUSES", "404,abc", "must be a list of HTTP statuses"),
    ("IDCRAWL_MISSING_STATUSES", "404,99", "must be a list of HTTP statuses"),
    ("IDCRAWL_INCIDENT_RULES", "TTmax,nope", "must be a list of rule names"),
    ("IDCRAWL_LIMIT_TDL", "15y", "must be a duration"),
    ("IDCRAWL_JOB_LIMIT_PLMAX", "-3", "must be a whole number >= 0"),
    ("IDCRAWL_PROFILE", 3, "must be the name of a settings profile"),
    ("IDCRAWL_REDIS_CLAIM_BLOCK", "0", "must be an integer in 1..1000000000"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_a_bad_value_names_the_setting_and_the_value(name: str, value: object, message: str) -> None:
    with pytest.raises(SettingError) as info:
        check_settings({name: value}.get)
    assert message in str(info.value)
    assert str(info.value).startswith(f"{name}={value!r}: ")


@pytest.mark.parametrize(
    ("name", "value"),
    [("IDCRAWL_WINDOW", "64"), ("IDCRAWL_STATE", "false"), ("IDCRAWL_STATE", "0"), ("IDCRAWL_DISTRIBUTED", True),
     ("IDCRAWL_STATE_BACKEND", " Redis "), ("IDCRAWL_MISSING_STATUSES", "404,410,451"),
     ("IDCRAWL_MISSING_STATUSES", [404]), ("IDCRAWL_LIMIT_TDL", "15m"), ("IDCRAWL_STATE_PATH", ""),
     ("IDCRAWL_INCIDENT_RULES", "ttmax,errors"), ("IDCRAWL_STATE_COMMIT_ITEMS", "1")],
)
def test_good_values_pass(name: str, value: object) -> None:
    check_settings({name: value}.get)


def _scrapy_reads(name: str, value: object) -> object:
    """What the component reading ``name`` gets from Scrapy's getters (a ValueError is the traceback of issue 12)."""
    from scrapy.settings import Settings

    from idcrawl.core.limits import Limits

    if SPECS[name].optional and isinstance(value, str) and not value.strip():
        return None  # unset: the reader keeps the default
    if name.startswith(("IDCRAWL_LIMIT_", "IDCRAWL_JOB_LIMIT_")):  # read by idcrawl.core.limits, not a getter
        prefix = "IDCRAWL_LIMIT_" if name.startswith("IDCRAWL_LIMIT_") else "IDCRAWL_JOB_LIMIT_"
        return Limits.from_settings({name: value}.get, prefix, level="domain" if "JOB" not in prefix else "job")
    got = Settings({name: value})
    default = getattr(default_settings, name)
    if isinstance(default, bool):
        return got.getbool(name)
    if isinstance(default, int):
        return got.getint(name)
    if isinstance(default, float):
        return got.getfloat(name)
    return got.get(name)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    value=st.one_of(
        st.text(max_size=12), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.booleans(),
        st.sampled_from(["", " ", "0", "1", "-1", "1e3", "nan", "inf", "true", "False", "15m", "404,410", "1_000"]),
    ),
)
def test_a_value_passes_the_table_only_if_scrapy_can_read_it(name: str, value: object) -> None:
    """Either one SettingError naming the setting and the value, or Scrapy's getter reads it."""
    try:
        check_setting(name, value)
    except SettingError as exc:
        assert str(exc).startswith(f"{name}={value!r}: ")
        assert "\n" not in str(exc)
        return
    _scrapy_reads(name, value)  # must not raise
