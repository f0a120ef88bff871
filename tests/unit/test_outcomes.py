"""Outcome rules (soft 404s): OutcomeRule.evaluate and the target keys that build it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import idcrawl.core.outcomes as outcomes
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import parse_job
from idcrawl.core.lanes import Outcome
from idcrawl.core.outcomes import DEFAULT_RULE, OutcomeRule, OutcomeRuleError
from idcrawl.core.targets import TARGET_KEYS, parse_target

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED
URL = "https://example.org/item/{id}"

PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>Notice 7</title></head><body>"
    b"<h1 class='title'>Procurement notice 7</h1><dd class='value'>123</dd></body></html>"
)
NOT_FOUND = (
    b"<!doctype html><html><head><title>Notice 8</title></head><body>"
    b"<div class='notfound'><h1>Notice 8 was not found</h1><p>2026-01-01T00:00:00Z</p></div></body></html>"
)


def rule(**keys: Any) -> OutcomeRule:
    """The rule of a target with these keys (through the target parser, as spiders build it)."""
    return parse_target({"url": URL, "start": "1", **keys}).rule


# -- statuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [(200, FOUND), (204, FOUND), (299, FOUND), (404, MISSING), (410, MISSING),
     (301, FAILED), (403, FAILED), (429, FAILED), (500, FAILED), (503, FAILED), (199, FAILED)],
)
def test_default_rule_by_status(status: int, expected: Outcome) -> None:
    assert DEFAULT_RULE.evaluate(status, b"whatever") is expected
    assert rule().evaluate(status, b"whatever") is expected


def test_missing_statuses_replace_the_default() -> None:
    r = rule(missing_statuses="403,404")
    assert r.evaluate(403, b"") is MISSING
    assert r.evaluate(404, b"") is MISSING
    assert r.evaluate(410, b"") is FAILED


def test_a_2xx_listed_as_missing_is_missing() -> None:
    assert rule(missing_statuses="204,404").evaluate(204, b"") is MISSING


def test_no_missing_statuses_makes_every_non_2xx_failed() -> None:
    for value in ("", []):
        r = rule(missing_statuses=value)
        assert r.missing_statuses == frozenset()
        assert r.evaluate(404, b"") is FAILED


@pytest.mark.parametrize("value", ["404,410", "404, 410", " 410 404 ", [404, 410], ["404", 410], (410, 404)])
def test_missing_statuses_accept_strings_and_lists(value: Any) -> None:
    assert rule(missing_statuses=value).missing_statuses == frozenset({404, 410})


def test_a_single_status_is_accepted() -> None:
    assert rule(missing_statuses=404).missing_statuses == frozenset({404})


def test_missing_statuses_default_comes_from_the_given_defaults() -> None:
    target = parse_target({"url": URL, "start": "1"}, {"missing_statuses": ["404", "451"]})
    assert target.rule.missing_statuses == frozenset({404, 451})
    assert parse_target({"url": URL, "start": "1"}).rule.missing_statuses == frozenset({404, 410})


def test_soft404_tests_never_turn_a_non_2xx_into_something_else() -> None:
    r = rule(soft404_regex="not found", found_css="h1.title", soft404_max_bytes="10000")
    assert r.evaluate(500, NOT_FOUND) is FAILED
    assert r.evaluate(404, PAGE) is MISSING
    assert r.evaluate(302, b"") is FAILED


# -- each soft-404 test ------------------------------------------------------------------


@pytest.mark.parametrize(
    "keys",
    [
        {"soft404_regex": "was not found"},
        {"soft404_regex": r"(?i)NOTICE \d+ WAS NOT"},
        {"soft404_css": "div.notfound"},
        {"soft404_css": "div.notfound h1::text"},
        {"soft404_xpath": "//div[@class='notfound']"},
        {"soft404_xpath": "boolean(//div[@class='notfound'])"},
        {"soft404_xpath": "count(//div[@class='notfound'])"},
        {"soft404_xpath": "string(//div[@class='notfound']/h1)"},
        {"soft404_xpath": "//h1[re:test(., 'not found$')]"},
        {"found_css": "h1.title"},
        {"found_css": "dd.value::text"},
        {"found_xpath": "//h1[@class='title']"},
        {"found_xpath": "//dd[@class='value']/text()"},
        {"soft404_max_bytes": str(len(NOT_FOUND))},
    ],
    ids=lambda keys: "=".join(next(iter(keys.items()))),
)
def test_each_test_tells_the_soft_404_from_the_page(keys: dict[str, str]) -> None:
    r = rule(**keys)
    assert r.has_soft404_tests
    assert r.evaluate(200, NOT_FOUND) is MISSING
    assert r.evaluate(200, PAGE) is FOUND
    assert r.evaluate(404, PAGE) is MISSING  # the status decides first


def test_max_bytes_is_inclusive() -> None:
    r = rule(soft404_max_bytes="10")
    assert r.evaluate(200, b"x" * 10) is MISSING
    assert r.evaluate(200, b"x" * 11) is FOUND
    assert rule(soft404_max_bytes=0).evaluate(200, b"") is MISSING
    assert rule(soft404_max_bytes=0).evaluate(200, b"x") is FOUND


def test_xpath_results_that_are_empty_or_false_do_not_match() -> None:
    for expression in ("//table", "boolean(//table)", "count(//table)", "string(//table)", "0 div 0"):
        assert rule(soft404_xpath=expression).evaluate(200, PAGE) is FOUND, expression
        assert rule(found_xpath=expression).evaluate(200, PAGE) is MISSING, expression


def test_regex_searches_the_decoded_text() -> None:
    body = "<p>Kunngjøringen finnes ikke</p>".encode("cp1252")
    r = rule(soft404_regex="gjøringen finnes ikke")
    assert r.evaluate(200, body, encoding="cp1252") is MISSING
    assert r.evaluate(200, body) is FOUND  # decoded as UTF-8 the ø is lost
    assert r.evaluate(200, body, text=body.decode("cp1252")) is MISSING
    assert r.evaluate(200, body, text=lambda: body.decode("cp1252")) is MISSING


def test_regex_is_searched_not_matched_at_the_start() -> None:
    assert rule(soft404_regex="notfound").evaluate(200, NOT_FOUND) is MISSING
    assert rule(soft404_regex="^notfound").evaluate(200, NOT_FOUND) is FOUND


def test_selectors_work_on_odd_bodies() -> None:
    assert rule(soft404_css="div").evaluate(200, b"") is FOUND
    assert rule(found_css="div").evaluate(200, b"") is MISSING
    assert rule(found_css="div").evaluate(200, b"\x00\x00") is MISSING
    assert rule(found_css="h1.title").evaluate(200, b"plain text, not HTML") is MISSING
    assert rule(soft404_css="p").evaluate(200, b"<p>no html element") is MISSING


def test_selectors_parse_with_the_given_encoding() -> None:
    body = "<html><body><p class='x'>Ærlig</p></body></html>".encode("cp1252")
    assert rule(soft404_xpath="//p[.='Ærlig']").evaluate(200, body, encoding="cp1252") is MISSING


def test_tests_are_alternatives_any_one_makes_missing() -> None:
    r = rule(soft404_regex="nothing like this", soft404_css="table.none", found_xpath="//h1", soft404_max_bytes="3")
    assert r.evaluate(200, PAGE) is FOUND
    assert r.evaluate(200, b"<p>a page without a heading</p>") is MISSING  # only found_xpath fails
    assert r.evaluate(200, b"<h1>x</h1><p>nothing like this</p>") is MISSING  # only the regex
    assert r.evaluate(200, b"<h1>x</h1><table class='none'/>") is MISSING  # only the css
    assert r.evaluate(200, b"abc") is MISSING  # only the size


def test_decide_names_the_test_that_made_a_2xx_missing() -> None:
    """The crawl counts soft 404s per test (idcrawl/soft404/<test>): decide names the one that judged."""
    r = rule(soft404_regex="nothing like this", soft404_css="table.none", soft404_xpath="//aside",
             found_css="h1", found_xpath="//dd", soft404_max_bytes="3")
    assert r.decide(200, PAGE) == (FOUND, None)
    assert r.decide(200, b"abc") == (MISSING, "max_bytes")  # the size first
    assert r.decide(200, b"<h1>x</h1><dd/><p>nothing like this</p>") == (MISSING, "regex")
    assert r.decide(200, b"<h1>x</h1><dd/><table class='none'/>") == (MISSING, "css")
    assert r.decide(200, b"<h1>x</h1><dd/><aside/>") == (MISSING, "xpath")
    assert r.decide(200, b"<p>no heading</p><dd/>") == (MISSING, "found_css")
    assert r.decide(200, b"<h1>x</h1><p>no value</p>") == (MISSING, "found_xpath")
    assert r.decide(404, b"abc") == (MISSING, None)  # a missing status is no soft 404
    assert r.decide(500, b"abc") == (FAILED, None)


def test_a_rule_without_tests_is_the_status_rule() -> None:
    r = rule(soft404_regex="", soft404_css="  ", soft404_xpath="", found_css="", found_xpath="", soft404_max_bytes="")
    assert r == DEFAULT_RULE
    assert not r.has_soft404_tests and not r.needs_text and not r.needs_tree
    assert r.evaluate(200, NOT_FOUND) is FOUND


# -- cost: parse once, only when needed -----------------------------------------------------


class Counter:
    def __init__(self, value: Any) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.value


ALL_SELECTORS = {
    "soft404_css": "div.notfound", "soft404_xpath": "//table", "found_css": "h1.title", "found_xpath": "//dd",
}


def test_the_tree_is_built_once_for_all_selector_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    parses = Counter(None)
    real = outcomes._parse_html

    def counting(body: bytes, encoding: str | None) -> Any:
        parses()
        return real(body, encoding)

    monkeypatch.setattr(outcomes, "_parse_html", counting)
    r = rule(**ALL_SELECTORS)
    assert r.evaluate(200, PAGE) is FOUND  # runs all four selector tests
    assert parses.calls == 1
    assert rule(soft404_regex="x", soft404_max_bytes="3").evaluate(200, PAGE) is FOUND
    assert DEFAULT_RULE.evaluate(200, PAGE) is FOUND
    assert parses.calls == 1  # no selector test: no parse


def test_a_given_tree_is_used_instead_of_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outcomes, "_parse_html", lambda *a: pytest.fail("parsed although a tree was given"))
    tree = Counter(outcomes.lxml_html.document_fromstring(PAGE))
    assert rule(**ALL_SELECTORS).evaluate(200, NOT_FOUND, root=tree) is FOUND  # judged by the given tree
    assert tree.calls == 1


def test_text_and_tree_are_only_asked_for_when_a_test_needs_them() -> None:
    text, tree = Counter(NOT_FOUND.decode()), Counter(None)
    assert DEFAULT_RULE.evaluate(200, NOT_FOUND, text=text, root=tree) is FOUND
    assert rule(soft404_max_bytes="100000", soft404_regex="x", found_css="p").evaluate(
        200, NOT_FOUND, text=text, root=tree) is MISSING  # the size decides first
    assert rule(soft404_regex="x", found_css="p").evaluate(500, NOT_FOUND, text=text, root=tree) is FAILED
    assert (text.calls, tree.calls) == (0, 0)
    assert rule(soft404_regex="not found", found_css="p").evaluate(200, NOT_FOUND, text=text, root=tree) is MISSING
    assert (text.calls, tree.calls) == (1, 0)  # the regex decided; the tree was never needed


# -- bad input ---------------------------------------------------------------------------------


def bad(field: str, value: Any, reason: str) -> None:
    """The target parser refuses ``field=value`` with one line naming both."""
    with pytest.raises(TargetError) as info:
        parse_target({"url": URL, "start": "1", field: value})
    text = str(info.value)
    assert info.value.field == field
    assert f"{field}={value!r}" in text, text
    assert reason in text, text
    assert "\n" not in text


@pytest.mark.parametrize("value", ["(", "a)", "[a-", "*x", "(?P<n>a)(?P<n>b)"])
def test_bad_regex_is_refused(value: str) -> None:
    bad("soft404_regex", value, "is not a valid regular expression")


@pytest.mark.parametrize("field", ["soft404_css", "found_css"])
@pytest.mark.parametrize("value", ["div[", "div..x", "a >", "::foo", "p:unknown-pseudo", "#"])
def test_bad_css_is_refused(field: str, value: str) -> None:
    bad(field, value, "is not a valid CSS selector")


@pytest.mark.parametrize("field", ["soft404_xpath", "found_xpath"])
@pytest.mark.parametrize("value", ["//div[", "//", "div)", "nosuchfunction()", "$undefined", "x:div"])
def test_bad_xpath_is_refused(field: str, value: str) -> None:
    bad(field, value, "is not a valid XPath expression")


@pytest.mark.parametrize("value", ["-1", -5, "abc", "1.5", 2.0, True, [10]])
def test_bad_max_bytes_is_refused(value: Any) -> None:
    bad("soft404_max_bytes", value, "must be an integer")


@pytest.mark.parametrize(
    ("value", "reason"),
    [("404,x", "'x' is not an integer"), ("4o4", "'4o4' is not an integer"), ([404, 1.5], "1.5 is not an integer"),
     ([True], "True is not an integer"), ("99", "'99' is not an HTTP status"), ([600], "600 is not an HTTP status"),
     (True, "must be a list"), (4.04, "must be a list"), ({"a": 1}, "must be a list")],
)
def test_bad_missing_statuses_are_refused(value: Any, reason: str) -> None:
    bad("missing_statuses", value, reason)


@pytest.mark.parametrize("field", ["soft404_regex", "soft404_css", "soft404_xpath", "found_css", "found_xpath"])
def test_non_string_patterns_are_refused(field: str) -> None:
    bad(field, 5, "must be a string")


def test_rule_refuses_bad_values_when_built_directly() -> None:
    with pytest.raises(OutcomeRuleError) as info:
        OutcomeRule(soft404_css="div[")
    assert info.value.field == "soft404_css"
    assert str(info.value).startswith("soft404_css='div[': is not a valid CSS selector")
    with pytest.raises(OutcomeRuleError, match="missing_statuses"):
        OutcomeRule(missing_statuses=frozenset({1000}))
    with pytest.raises(OutcomeRuleError, match="soft404_max_bytes"):
        OutcomeRule(soft404_max_bytes=-1)
    with pytest.raises(OutcomeRuleError, match="must be a non-empty string"):
        OutcomeRule(found_xpath="")


def test_bad_value_from_defaults_is_reported_with_its_field() -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": URL, "start": "1"}, {"soft404_regex": "("})
    assert str(info.value).startswith("soft404_regex='(': ")


# -- targets and job files ------------------------------------------------------------------------


def test_outcome_keys_are_target_keys() -> None:
    assert {"missing_statuses", "soft404_regex", "soft404_css", "soft404_xpath", "found_css", "found_xpath",
            "soft404_max_bytes"} <= TARGET_KEYS


def test_a_typo_in_an_outcome_key_is_refused() -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": URL, "start": "1", "soft404_cs": "div"})
    assert "unknown key" in str(info.value) and "soft404_css" in str(info.value)


def test_targets_with_rules_stay_hashable_and_compare_by_value() -> None:
    a = parse_target({"url": URL, "start": "1", "soft404_css": "div.nf", "missing_statuses": "410,404"})
    b = parse_target({"url": URL, "start": 1, "soft404_css": " div.nf ", "missing_statuses": [404, 410]})
    assert a == b and hash(a) == hash(b)
    assert len({a, b, parse_target({"url": URL, "start": "1"})}) == 2
    assert a.rule is not DEFAULT_RULE and parse_target({"url": URL, "start": "1"}).rule == DEFAULT_RULE


def test_job_file_keys_and_defaults_build_rules(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(
        """
[defaults]
soft404_css = "div.notfound"
missing_statuses = [404, 410, 451]

[[targets]]
name = "a"
url = "https://a.example/{id}"
start = 1

[[targets]]
name = "b"
url = "https://b.example/{id}"
start = 1
soft404_css = ""                       # off for this target
found_xpath = "//h1[@class='title']"
soft404_regex = '(?i)tidak\\s+ditemukan'
soft404_max_bytes = 512
missing_statuses = "404"
""",
        encoding="utf-8",
    )
    a, b = parse_job(path, {"missing_statuses": [404]})
    assert a.rule == OutcomeRule(missing_statuses=frozenset({404, 410, 451}), soft404_css="div.notfound")
    assert b.rule == OutcomeRule(
        missing_statuses=frozenset({404}), found_xpath="//h1[@class='title']",
        soft404_regex=r"(?i)tidak\s+ditemukan", soft404_max_bytes=512,
    )
    assert a.rule.evaluate(200, NOT_FOUND) is MISSING
    assert b.rule.evaluate(200, b"<h1 class='title'>Tidak  ditemukan</h1>" + b" " * 600) is MISSING
    assert b.rule.evaluate(200, PAGE + b" " * 600) is FOUND


def test_bad_rule_in_a_job_file_names_the_target(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text("[[targets]]\nname='a'\nurl='https://a.example/{id}'\nstart=1\nsoft404_xpath='//div['\n")
    with pytest.raises(TargetError) as info:
        parse_job(path)
    assert "targets[0]: soft404_xpath='//div[': is not a valid XPath expression" in str(info.value)


def test_bad_rule_key_in_job_defaults_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text("[defaults]\nsoft404_max_bytes=-3\n[[targets]]\nurl='https://a.example/{id}'\nstart=1\n")
    with pytest.raises(TargetError) as info:
        parse_job(path)
    assert "soft404_max_bytes=-3: must be an integer >= 0" in str(info.value)
