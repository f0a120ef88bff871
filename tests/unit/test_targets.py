"""Targets: parse_target / parse_targets / parse_job.

Every bad input must give one TargetError whose text names the field and the
value (ARCHITECTURE.md, semantics 5); good inputs of either form (spider
argument strings, TOML values) give the same Target.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import parse_job
from idcrawl.core.targets import DEFAULTS, TARGET_KEYS, Direction, Target, parse_target, parse_targets
from idcrawl.core.templates import same_host

URL = "https://example.org/item/{id}"


def bad(raw: dict[str, Any], field: str, value: Any = None, *, defaults: dict[str, Any] | None = None) -> str:
    """parse_target(raw) must fail on ``field``; the message names field and value on one line."""
    with pytest.raises(TargetError) as info:
        parse_target(raw, defaults)
    err = info.value
    text = str(err)
    assert err.field == field, text
    assert "\n" not in text
    if value is None:
        value = raw[field]
    assert f"{field}={value!r}" in text, text
    return text


def job_file(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def job_error(path: Path | str) -> TargetError:
    with pytest.raises(TargetError) as info:
        parse_job(path)
    assert "\n" not in str(info.value)
    return info.value


# -- url template ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/item/",
        "https://example.org/item/{{id}}",
        "https://example.org/{id}/{id}",
        "https://example.org/{id}{id}",
        "https://example.org/{id}{x}",
        "https://example.org/{x}",
        "https://example.org/{}",
        "https://example.org/{0}",
        "https://example.org/{id.real}",
        "https://example.org/{id[0]}",
    ],
)
def test_template_without_exactly_one_id_field_is_rejected_naming_url(url: str) -> None:
    text = bad({"url": url, "start": 1}, "url")
    assert "exactly one {id}" in text


def test_template_without_id_field_says_none_found() -> None:
    assert "found: none" in bad({"url": "https://example.org/", "start": 1}, "url")


def test_template_with_two_fields_lists_what_it_found() -> None:
    assert "{id}, {x}" in bad({"url": "https://example.org/{id}{x}", "start": 1}, "url")


@pytest.mark.parametrize("url", ["ftp://example.org/{id}", "file:///tmp/{id}", "example.org/{id}", "//example.org/{id}"])
def test_template_with_non_http_scheme_is_rejected(url: str) -> None:
    assert "http or https" in bad({"url": url, "start": 1}, "url")


def test_template_without_host_is_rejected() -> None:
    assert "no host" in bad({"url": "http:///path/{id}", "start": 1}, "url")


@pytest.mark.parametrize("url", ["https://example.org/{id:s}", "https://example.org/{id:q}", "https://example.org/{id"])
def test_template_with_unusable_format_is_rejected(url: str) -> None:
    bad({"url": url, "start": 1}, "url")


@pytest.mark.parametrize("url", ["", "   ", 42, None])
def test_empty_or_non_string_url_is_rejected(url: Any) -> None:
    bad({"url": url, "start": 1}, "url")


def test_missing_url_is_rejected_naming_url() -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"start": "1"})
    assert info.value.field == "url"
    assert str(info.value).startswith("url: ")


def test_format_spec_in_template_is_applied_to_the_id() -> None:
    target = parse_target({"url": "https://example.org/p/{id:08d}", "start": "1"})
    assert target.url_for(42) == "https://example.org/p/00000042"


def test_template_is_stripped_and_id_may_be_anywhere() -> None:
    target = parse_target({"url": "  http://example.org/show?id={id}&x=1 ", "start": "7"})
    assert target.url == "http://example.org/show?id={id}&x=1"
    assert target.url_for(7) == "http://example.org/show?id=7&x=1"


def test_id_in_host_part_is_allowed() -> None:
    target = parse_target({"url": "https://n{id}.example.org/", "start": "3"})
    assert target.url_for(3) == "https://n3.example.org/"


# -- integers and bounds ----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (field, value)
        for field in ("start", "min", "max", "margin", "window", "attempts")
        for value in ("abc", "1.5", "", "1e3", 1.5, True, [1])
        if not (value == "" and field in ("start", "min", "max"))  # an empty bound means "not given"
    ],
)
def test_non_integer_is_rejected_naming_field_and_value(field: str, value: Any) -> None:
    raw = {"url": URL, "start": "5", "min": "0", "max": "100", field: value}
    assert "must be an integer" in bad(raw, field)


@pytest.mark.parametrize("field", ["start", "min", "max"])
def test_negative_ids_are_rejected(field: str) -> None:
    raw = {"url": URL, "start": "5", field: "-1"}
    assert ">= 0" in bad(raw, field)


def test_min_above_max_is_rejected() -> None:
    text = bad({"url": URL, "start": "5", "min": "10", "max": "3"}, "min")
    assert "max (3)" in text


def test_min_equal_to_max_is_a_one_id_range() -> None:
    target = parse_target({"url": URL, "min": "4", "max": "4"})
    assert (target.min, target.start, target.max) == (4, 4, 4)


@pytest.mark.parametrize(("start", "reason"), [("4", "below min (5)"), ("11", "above max (10)")])
def test_start_outside_bounds_is_rejected(start: str, reason: str) -> None:
    text = bad({"url": URL, "start": start, "min": "5", "max": "10"}, "start")
    assert reason in text


@pytest.mark.parametrize("start", ["5", "7", "10"])
def test_start_on_or_inside_bounds_is_accepted(start: str) -> None:
    assert parse_target({"url": URL, "start": start, "min": "5", "max": "10"}).start == int(start)


def test_integers_accept_underscores_and_spaces() -> None:
    target = parse_target({"url": URL, "start": " 38_401_264 ", "margin": " 3 "})
    assert target.start == 38401264
    assert target.margin == 3


def test_huge_bounds_are_plain_ints() -> None:
    target = parse_target({"url": URL, "start": "0", "max": str(10**15)})
    assert target.max == 10**15


def test_start_defaults_to_min_for_asc() -> None:
    target = parse_target({"url": URL, "min": "100", "max": "200"})
    assert target.start == 100


def test_start_defaults_to_max_for_desc() -> None:
    target = parse_target({"url": URL, "direction": "desc", "min": "100", "max": "200"})
    assert target.start == 200


@pytest.mark.parametrize(
    "raw",
    [
        {"url": URL},
        {"url": URL, "max": "10"},  # asc needs min
        {"url": URL, "direction": "desc", "min": "10"},  # desc needs max
        {"url": URL, "direction": "both", "min": "1", "max": "10"},  # both always needs start
        {"url": URL, "start": ""},
    ],
)
def test_missing_start_without_usable_bound_is_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(raw)
    assert info.value.field == "start"
    assert str(info.value).startswith("start: is required")


@pytest.mark.parametrize("value", ["", None])
def test_empty_bound_means_unbounded(value: Any) -> None:
    target = parse_target({"url": URL, "start": "3", "min": value, "max": value})
    assert target.min is None
    assert target.max is None


# -- margin -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", -1, "-10"])
def test_negative_margin_is_rejected(value: Any) -> None:
    assert ">= 0" in bad({"url": URL, "start": "1", "margin": value}, "margin")


def test_margin_zero_without_max_is_rejected_for_asc() -> None:
    text = bad({"url": URL, "start": "1", "margin": "0"}, "margin")
    assert "needs max" in text


def test_margin_zero_without_min_is_rejected_for_desc() -> None:
    text = bad({"url": URL, "start": "10", "direction": "desc", "margin": "0"}, "margin")
    assert "needs min" in text


@pytest.mark.parametrize(
    ("bounds", "needs"),
    [({}, "needs max"), ({"min": "0"}, "needs max"), ({"max": "20"}, "needs min")],
)
def test_margin_zero_for_both_needs_both_bounds(bounds: dict[str, str], needs: str) -> None:
    raw = {"url": URL, "start": "10", "direction": "both", "margin": "0", **bounds}
    assert needs in bad(raw, "margin")


@pytest.mark.parametrize(
    ("direction", "bounds"),
    [("asc", {"max": "20"}), ("desc", {"min": "0"}), ("both", {"min": "0", "max": "20"})],
)
def test_margin_zero_with_the_needed_bounds_is_accepted(direction: str, bounds: dict[str, str]) -> None:
    target = parse_target({"url": URL, "start": "10", "direction": direction, "margin": "0", **bounds})
    assert target.margin == 0


def test_margin_zero_asc_does_not_need_min() -> None:
    assert parse_target({"url": URL, "start": "10", "margin": 0, "max": 20}).min is None


# -- direction, rate ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["up", "ascending", "", "a", 1])
def test_unknown_direction_is_rejected(value: Any) -> None:
    text = bad({"url": URL, "start": "1", "direction": value}, "direction")
    assert "asc, desc, both" in text


@pytest.mark.parametrize(("value", "expected"), [("asc", Direction.ASC), (" DESC ", Direction.DESC), ("Both", Direction.BOTH)])
def test_direction_is_case_and_space_insensitive(value: str, expected: Direction) -> None:
    assert parse_target({"url": URL, "start": "5", "direction": value}).direction is expected


@pytest.mark.parametrize("value", ["0", "-1", 0, -3, "", "x", "1.5", 1.5, True, "1:2:3", ":", "1:", ":2", "0:1", "1:-1"])
def test_bad_rate_is_rejected(value: Any) -> None:
    text = bad({"url": URL, "start": "5", "direction": "both", "rate": value}, "rate")
    assert "positive integer" in text


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_rate_pair_needs_direction_both(direction: str) -> None:
    text = bad({"url": URL, "start": "5", "direction": direction, "rate": "1:2"}, "rate")
    assert "direction='both'" in text


def test_rate_pair_for_both_sets_asc_and_desc_weights() -> None:
    target = parse_target({"url": URL, "start": "5", "direction": "both", "rate": "1:2"})
    assert (target.rate_asc, target.rate_desc) == (1, 2)


def test_single_rate_for_both_applies_to_both_lanes() -> None:
    target = parse_target({"url": URL, "start": "5", "direction": "both", "rate": "3"})
    assert (target.rate_asc, target.rate_desc) == (3, 3)


@pytest.mark.parametrize("value", [4, "4", " 4 "])
def test_single_rate_accepts_int_or_string(value: Any) -> None:
    assert parse_target({"url": URL, "start": "5", "rate": value}).rate_asc == 4


# -- other keys -----------------------------------------------------------------------


def test_unknown_key_is_rejected_naming_the_typo() -> None:
    text = bad({"url": URL, "start": "1", "margn": "3"}, "margn")
    assert "unknown key" in text
    assert "margin" in text  # the list of known keys helps spot the typo


@pytest.mark.parametrize(("field", "value"), [("window", "0"), ("attempts", "0")])
def test_window_and_attempts_must_be_positive(field: str, value: str) -> None:
    assert ">= 1" in bad({"url": URL, "start": "1", field: value}, field)


@pytest.mark.parametrize("value", ["-1", "abc", "inf", "nan", True, [1]])
def test_bad_cooldown_is_rejected(value: Any) -> None:
    bad({"url": URL, "start": "1", "cooldown": value}, "cooldown")


@pytest.mark.parametrize("value", ["0.5", "0", "nan"])
def test_backoff_below_one_is_rejected(value: str) -> None:
    bad({"url": URL, "start": "1", "backoff": value}, "backoff")


def test_cooldown_and_backoff_accept_numbers_and_strings() -> None:
    target = parse_target({"url": URL, "start": "1", "cooldown": "2.5", "backoff": 3})
    assert (target.cooldown, target.backoff) == (2.5, 3.0)


@pytest.mark.parametrize("value", ["a/b", "   ", 5])
def test_bad_name_is_rejected(value: Any) -> None:
    bad({"url": URL, "start": "1", "name": value}, "name")


def test_name_defaults_to_host() -> None:
    assert parse_target({"url": "https://Shop.Example.org:8080/p/{id}", "start": "1"}).name == "shop.example.org"


def test_explicit_name_is_stripped() -> None:
    assert parse_target({"url": URL, "start": "1", "name": " sirup "}).name == "sirup"


def test_defaults_apply_to_keys_left_out() -> None:
    target = parse_target({"url": URL, "start": "1"})
    assert target.direction is Direction(DEFAULTS["direction"])
    assert target.margin == DEFAULTS["margin"]
    assert target.window == DEFAULTS["window"]
    assert target.rate_asc == target.rate_desc == DEFAULTS["rate"]
    assert target.attempts == DEFAULTS["attempts"]


def test_given_defaults_fill_in_and_raw_keys_win() -> None:
    target = parse_target({"url": URL, "start": "1", "window": "4"}, {"margin": 7, "window": 9})
    assert (target.margin, target.window) == (7, 4)


def test_bad_value_from_defaults_is_reported_with_its_field() -> None:
    bad({"url": URL, "start": "1"}, "margin", "-2", defaults={"margin": "-2"})


def test_string_and_native_values_give_the_same_target() -> None:
    strings = {"url": URL, "start": "10", "min": "0", "max": "99", "margin": "4", "window": "8",
               "rate": "2", "attempts": "5", "cooldown": "1.5", "backoff": "2"}
    native = {"url": URL, "start": 10, "min": 0, "max": 99, "margin": 4, "window": 8,
              "rate": 2, "attempts": 5, "cooldown": 1.5, "backoff": 2}
    assert parse_target(strings) == parse_target(native)


def test_target_keys_are_the_documented_set() -> None:
    assert {"name", "url", "start", "min", "max", "direction", "margin", "window", "rate",
            "attempts", "cooldown", "backoff", "missing_statuses", "soft404_regex", "soft404_css",
            "soft404_xpath", "found_css", "found_xpath", "soft404_max_bytes", "soft404_probe", "soft404_similarity",
            "resume", "holes", "recrawl_inc_rate", "recrawl_dec_rate", "recrawl_min", "recrawl_max",
            "recrawl_initial", "recrawl_gone", "follow_redirects", "signature", "signature_drop",
            "last_modified", "late_every", "late_max"} == TARGET_KEYS


def test_host_of_a_target() -> None:
    assert parse_target({"url": URL, "start": "1"}).host == "example.org"


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=12))
def test_any_string_either_parses_as_margin_or_gives_a_target_error(value: str) -> None:
    try:
        target = parse_target({"url": URL, "start": "1", "margin": value, "max": "100"})
    except TargetError as exc:
        assert exc.field == "margin"
        assert f"margin={value!r}" in str(exc)
        assert "\n" not in str(exc)
    else:
        assert target.margin >= 0


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(0, 10**6), span=st.integers(0, 10**6), offset=st.integers(-5, 10**6 + 5))
def test_start_is_accepted_exactly_inside_the_bounds(lo: int, span: int, offset: int) -> None:
    hi = lo + span
    start = lo + offset
    raw = {"url": URL, "start": str(start), "min": str(lo), "max": str(hi)}
    if lo <= start <= hi:
        assert parse_target(raw).start == start
    else:
        with pytest.raises(TargetError) as info:
            parse_target(raw)
        assert info.value.field == "start"


# -- parse_targets ------------------------------------------------------------------


def test_parse_targets_keeps_order() -> None:
    targets = parse_targets([{"url": URL, "start": "1", "name": "a"}, {"url": URL, "start": "2", "name": "b"}])
    assert [t.name for t in targets] == ["a", "b"]
    assert all(isinstance(t, Target) for t in targets)


def test_duplicate_target_names_are_rejected() -> None:
    with pytest.raises(TargetError) as info:
        parse_targets([{"url": URL, "start": "1", "name": "a"}, {"url": URL, "start": "2", "name": "a"}])
    text = str(info.value)
    assert info.value.field == "name"
    assert "targets[1]" in text
    assert "name='a'" in text
    assert "targets[0]" in text


def test_duplicate_default_names_from_the_same_host_are_rejected() -> None:
    with pytest.raises(TargetError) as info:
        parse_targets([{"url": URL, "start": "1"}, {"url": "https://example.org/other/{id}", "start": "2"}])
    assert "name='example.org'" in str(info.value)


def test_error_in_one_of_many_targets_says_which() -> None:
    with pytest.raises(TargetError) as info:
        parse_targets([{"url": URL, "start": "1", "name": "a"}, {"url": URL, "start": "x", "name": "b"}])
    text = str(info.value)
    assert text.startswith("targets[1]: start='x'")


def test_non_table_target_is_rejected() -> None:
    with pytest.raises(TargetError) as info:
        parse_targets([{"url": URL, "start": "1"}, "https://example.org/{id}"])  # type: ignore[list-item]
    assert "targets[1]='https://example.org/{id}'" in str(info.value)


def test_no_targets_is_rejected() -> None:
    with pytest.raises(TargetError) as info:
        parse_targets([])
    assert "no target given" in str(info.value)


def test_defaults_apply_to_every_target() -> None:
    targets = parse_targets(
        [{"url": URL, "start": "1", "name": "a"}, {"url": URL, "start": "2", "name": "b", "margin": "9"}],
        {"margin": "4"},
    )
    assert [t.margin for t in targets] == [4, 9]


# -- parse_job ----------------------------------------------------------------------

GOOD_JOB = """
[defaults]
margin = 5
window = "16"

[[targets]]
url = "https://a.example/{id}"
start = 10
max = "20"

[[targets]]
name = "bee"
url = "https://b.example/{id:06d}"
start = "100"
direction = "both"
rate = "1:3"
margin = "2"
min = 0
"""


def test_job_file_gives_targets_with_defaults_applied(tmp_path: Path) -> None:
    a, b = parse_job(job_file(tmp_path, GOOD_JOB))
    assert (a.name, a.start, a.max, a.margin, a.window) == ("a.example", 10, 20, 5, 16)
    assert (b.name, b.start, b.min, b.margin, b.window) == ("bee", 100, 0, 2, 16)
    assert b.direction is Direction.BOTH
    assert (b.rate_asc, b.rate_desc) == (1, 3)
    assert b.url_for(7) == "https://b.example/000007"


def test_job_file_defaults_override_caller_defaults(tmp_path: Path) -> None:
    (a, _) = parse_job(job_file(tmp_path, GOOD_JOB), {"margin": 8, "attempts": 7})
    assert a.margin == 5
    assert a.attempts == 7


def test_job_file_accepts_a_str_path(tmp_path: Path) -> None:
    assert len(parse_job(str(job_file(tmp_path, GOOD_JOB)))) == 2


def test_missing_job_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    err = job_error(path)
    assert err.field == "job"
    assert f"job={str(path)!r}" in str(err)
    assert "not found" in str(err)


def test_job_path_that_is_a_directory_is_rejected(tmp_path: Path) -> None:
    err = job_error(tmp_path)
    assert err.field == "job"
    assert f"job={str(tmp_path)!r}" in str(err)


def test_broken_toml_is_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, "[[targets]]\nurl = 'https://a.example/{id}\nstart = 1\n")
    err = job_error(path)
    assert err.field == "job"
    assert f"job={str(path)!r}" in str(err)
    assert "not valid TOML" in str(err)


def test_job_file_with_non_table_target_is_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, 'targets = ["https://a.example/{id}"]\n')
    text = str(job_error(path))
    assert str(path) in text
    assert "targets[0]='https://a.example/{id}'" in text
    assert "must be a table" in text


def test_job_file_with_targets_not_an_array_is_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, '[targets]\nurl = "https://a.example/{id}"\n')
    err = job_error(path)
    assert err.field == "targets"


def test_job_file_without_targets_is_rejected(tmp_path: Path) -> None:
    err = job_error(job_file(tmp_path, "[defaults]\nmargin = 3\n"))
    assert err.field == "targets"
    assert "[[targets]]" in str(err)


def test_job_file_with_empty_targets_is_rejected(tmp_path: Path) -> None:
    err = job_error(job_file(tmp_path, "targets = []\n"))
    assert "no target given" in str(err)


def test_job_file_with_unknown_top_level_key_is_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, 'margin = 3\n[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n')
    err = job_error(path)
    assert err.field == "margin"
    assert "margin=3" in str(err)
    assert str(path) in str(err)


def test_job_file_with_unknown_defaults_key_is_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, '[defaults]\nmargn = 3\n[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n')
    err = job_error(path)
    assert "defaults.margn=3" in str(err)


@pytest.mark.parametrize("key", ["url", "name"])
def test_job_defaults_may_not_set_url_or_name(tmp_path: Path, key: str) -> None:
    path = job_file(tmp_path, f'[defaults]\n{key} = "x"\n[[targets]]\nurl = "https://a.example/{{id}}"\nstart = 1\n')
    assert f"defaults.{key}='x'" in str(job_error(path))


def test_job_file_defaults_not_a_table_is_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, 'defaults = 3\n[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n')
    assert "defaults=3" in str(job_error(path))


def test_job_file_error_in_a_target_names_file_target_field_and_value(tmp_path: Path) -> None:
    path = job_file(tmp_path, '[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n'
                              '[[targets]]\nurl = "https://b.example/{id}"\nstart = 1\nmargn = 4\n')
    text = str(job_error(path))
    assert text.startswith(f"job file {str(path)!r}: targets[1]: margn=4: unknown key")


def test_job_file_duplicate_target_names_are_rejected(tmp_path: Path) -> None:
    path = job_file(tmp_path, '[[targets]]\nname = "x"\nurl = "https://a.example/{id}"\nstart = 1\n'
                              '[[targets]]\nname = "x"\nurl = "https://b.example/{id}"\nstart = 1\n')
    err = job_error(path)
    assert err.field == "name"
    assert "name='x'" in str(err)
    assert str(path) in str(err)


def test_job_file_bad_value_from_its_defaults_is_reported(tmp_path: Path) -> None:
    path = job_file(tmp_path, '[defaults]\nmargin = -1\n[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n')
    err = job_error(path)
    assert err.field == "margin"
    assert "margin=-1" in str(err)


def test_located_error_keeps_field_value_and_reason() -> None:
    err = TargetError("margin", "-1", "must be an integer >= 0").located("target 'sirup'")
    assert str(err) == "target 'sirup': margin='-1': must be an integer >= 0"
    assert str(err.located("job file 'j.toml'")) == "job file 'j.toml': target 'sirup': margin='-1': must be an integer >= 0"


def test_id_of_reads_an_id_back_only_when_the_template_makes_exactly_that_url() -> None:
    from idcrawl.core.templates import id_in_template

    plain = parse_target({"url": "http://h/n/{id}?x={{1}}", "start": 1})
    assert plain.id_of("http://h/n/42?x={1}") == 42
    assert plain.id_of("http://h/n/42?x=1") is None
    assert plain.id_of("http://h/n/?x={1}") is None
    assert plain.id_of("http://h/n/4a?x={1}") is None
    padded = parse_target({"url": "http://h/n/{id:06d}.html", "start": 1})
    assert padded.id_of("http://h/n/000042.html") == 42
    assert padded.id_of("http://h/n/42.html") is None  # not the lane's URL of 42
    braces = parse_target({"url": "http://h/{{a}}/n/{id}", "start": 1})
    assert braces.id_of("http://h/{a}/n/42") == 42
    bounded = parse_target({"url": "http://h/n/{id:06d}.html", "start": 1, "max": 10})
    assert bounded.id_of("http://h/n/000042.html") is None  # outside the target's bounds
    assert id_in_template(bounded.url, "http://h/n/000042.html") == 42  # the template alone


FORGED = "t\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)"


@pytest.mark.parametrize("value", [FORGED, "t\x1b[2J", "bell\x07", "nul\x00", "sep\u2028x", "x" * 201])
def test_a_name_that_is_not_one_printable_bounded_line_is_refused_shown_escaped(value: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": URL, "start": "1", "name": value})
    text = str(info.value)
    assert info.value.field == "name"
    assert text.isprintable(), text  # one line, no raw control character
    assert text.startswith("name='"), text
    assert ("line break or a control character" in text) or ("201 characters long (at most 200)" in text)


def test_a_name_of_the_longest_length_and_any_printable_text_is_accepted() -> None:
    assert parse_target({"url": URL, "start": "1", "name": "ü" * 200}).name == "ü" * 200
    assert parse_target({"url": URL, "start": "1", "name": "a b [x] ❤"}).name == "a b [x] ❤"


@pytest.mark.parametrize("table", ["collections", "crawl_profiles"])
def test_collection_and_crawl_profile_names_are_checked_too(tmp_path: Path, table: str) -> None:
    path = job_file(tmp_path, f'[[{table}]]\nname = "c\\u001b[2J"\n'
                              '[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n')
    text = str(job_error(path))
    assert text.isprintable() and "name='c\\x1b[2J'" in text and "control character" in text, text


def test_a_target_naming_an_unprintable_crawl_profile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": URL, "start": "1", "crawl_profiles": ["ok", "bad\x07"]}, job=True)
    text = str(info.value)
    assert info.value.field == "crawl_profiles" and text.isprintable()
    assert "'bad\\x07' is not a name (holds a line break or a control character" in text, text


def test_a_password_in_a_refused_url_is_masked() -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": "https://user:s3cret@a.example/{id}/{id}", "start": "1"})
    assert "s3cret" not in str(info.value) and "user:***@a.example" in str(info.value)


@pytest.mark.parametrize(("a", "b", "same"), [
    ("https://example.org/item/1", "https://example.org/other", True),
    ("http://example.org/item/1", "https://example.org/item/1", True),  # the scheme's own ports
    ("https://example.org/item/1", "https://www.example.org/item/1", True),  # www. and the apex are one site
    ("https://WWW.Example.org./1", "https://example.org/1", True),
    ("https://example.org/1", "https://example.org:8443/1", False),
    ("http://127.0.0.1:8001/1", "http://127.0.0.1:8002/1", False),
    ("https://example.org/1", "https://login.example.org/1", False),
    ("https://example.org/1", "https://example.com/1", False),
])
def test_same_host_ignores_www_and_default_ports_only(a: str, b: str, same: bool) -> None:
    assert same_host(a, b) is same and same_host(b, a) is same


def test_follow_redirects_is_host_unless_any_and_anything_else_is_refused() -> None:
    target = parse_target({"url": URL, "start": "1"})
    assert target.follow_redirects == "host"
    assert not target.may_redirect("https://example.org/item/1", "https://example.com/")
    assert target.may_redirect("https://example.org/item/1", "https://www.example.org/item/1")
    anywhere = parse_target({"url": URL, "start": "1", "follow_redirects": "ANY"})
    assert anywhere.may_redirect("https://example.org/item/1", "https://example.com/")
    with pytest.raises(TargetError) as refused:
        parse_target({"url": URL, "start": "1", "follow_redirects": "sometimes"})
    assert str(refused.value) == "follow_redirects='sometimes': must be one of host, any"


def test_a_fleet_rebuilds_follow_redirects_and_old_specs_stay_equal() -> None:
    codec = pytest.importorskip("idcrawl.distributed.codec")
    default = parse_target({"url": URL, "start": "1"})
    assert "follow_redirects" not in codec.target_spec(default)  # a job made before the key: the same spec
    anywhere = parse_target({"url": URL, "start": "1", "follow_redirects": "any"})
    spec = codec.target_spec(anywhere)
    assert parse_target(spec).follow_redirects == "any"
    assert codec.spec_conflict(spec, codec.target_spec(default)) is not None  # workers must agree on it


@settings(derandomize=True, max_examples=200)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Nd", "Cs")), max_size=30),
    st.integers(min_value=0, max_value=10**15),
    st.text(alphabet=st.characters(blacklist_categories=("Nd", "Cs")), max_size=30),
)
def test_a_page_url_makes_a_template_that_renders_it_back_with_its_last_number(
    before: str, id_: int, after: str
) -> None:
    """``scrapy parse``/``check`` of an id page without ``-a url=``: its last number is the id."""
    from idcrawl.core.templates import id_in_template, url_template

    url = f"http://h/{before}{id_}{after}"
    made = url_template(url)
    assert made is not None
    template, got = made
    assert got == id_ and template.format(id=got) == url
    assert id_in_template(template, url) == id_


def test_a_url_without_a_number_makes_no_template() -> None:
    from idcrawl.core.templates import url_template

    assert url_template("http://host/about") is None
    assert url_template("http://h/{x}/7/notice") == ("http://h/{{x}}/{id}/notice", 7)


# -- a job of many targets: shared parts, the host derived once (docs/benchmarks.md, "at size") -----------


def test_targets_parsed_from_equal_values_share_their_rule_and_policy() -> None:
    raws = [{"name": f"t{i}", "url": f"https://h{i}.example/{{id}}", "start": 1, "missing_statuses": [404, 410],
             "soft404_css": "div.none", "recrawl_min": "5m"} for i in range(3)]
    a, b, c = parse_targets(raws, job=True)
    assert a.rule is b.rule is c.rule and a.policy is b.policy is c.policy
    other = parse_target({"url": "https://h.example/{id}", "start": 1, "missing_statuses": "404",
                          "recrawl_min": 300})
    assert other.rule != a.rule and other.rule.missing_statuses == frozenset({404})
    assert other.policy == a.policy  # 300 s and 5m parse alike, each from its own values
    with pytest.raises(TargetError, match="soft404_css"):  # a bad value is refused every time, never remembered
        parse_target({"url": "https://h.example/{id}", "start": 1, "soft404_css": "div["})
    with pytest.raises(TargetError, match="soft404_css"):
        parse_target({"url": "https://h.example/{id}", "start": 1, "soft404_css": "div["})


def test_a_targets_host_is_derived_from_url_and_start_and_not_compared() -> None:
    target = parse_target({"url": "https://{id}.Example.com./x", "start": 7})
    assert target.host == "7.example.com."  # what urlsplit gives: lower case, the dot kept
    moved = replace(target, start=8)
    assert moved.host == "8.example.com." and moved != target and replace(moved, start=7) == target
    assert " host=" not in repr(target)


def test_targets_share_one_options_object_and_keep_their_keywords() -> None:
    """The values most targets share live in one object (100,000 targets, one), read as before."""
    a, b = (parse_target({"url": f"https://h.example/{name}/{{id}}", "start": 1, "name": name}) for name in "ab")
    assert a.options is b.options and a.margin == b.margin == DEFAULTS["margin"]
    made = Target(name="a", url="https://h.example/a/{id}", start=1, direction=Direction.ASC, margin=a.margin,
                  window=a.window, soft404_similarity=a.soft404_similarity)
    assert made == a and made.options is a.options and repr(made) == repr(a)
    due = replace(a, resume="due")  # type: ignore[call-arg]  # a keyword as idseq's overrides (-a resume=) pass it
    assert due.resume == "due" and due.margin == a.margin and due != a
    assert a.with_resume("due") == due and a.with_resume("due").options is due.options
    assert replace(due, resume="auto").options is a.options and b.resume == "auto"  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="direction, margin, window"):
        Target(name="x", url="https://h.example/{id}", start=1)


@pytest.mark.parametrize("host", ["a b.example", "a\u00a0b.example", "a\u2028b.example", "a\x7fb.example"])
def test_a_host_with_any_whitespace_or_control_character_is_refused(host: str) -> None:
    with pytest.raises(TargetError, match="spaces or control characters"):
        parse_target({"url": f"https://{host}/{{id}}", "start": 1})
