"""Job limits (seed 002, Table 3): value parsing, the rules' data and each rule's decision."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.limits import (
    JOB_RULES,
    RULES,
    SURVEY_TABLE_3,
    UNLIMITED,
    Category,
    DomainLimits,
    JobLimits,
    LimitError,
    Limits,
    Unit,
    parse_count,
    parse_duration,
    rule,
)

DOMAIN = "IDCRAWL_LIMIT_"
JOB = "IDCRAWL_JOB_LIMIT_"


def settings_get(values: dict[str, object]):  # type: ignore[no-untyped-def]
    return values.get


# -- values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("15m", 900.0), ("900s", 900.0), ("900", 900.0), ("1h", 3600.0), ("1.5m", 90.0), (" 2 min ", 120.0),
     ("0", 0.0), (900, 900.0), (2.5, 2.5), ("0.25", 0.25), ("10sec", 10.0), ("1H", 3600.0)],
)  # fmt: skip
def test_durations_accept_units_and_plain_seconds(value: object, seconds: float) -> None:
    assert parse_duration("IDCRAWL_LIMIT_TDL", value) == seconds


@pytest.mark.parametrize(
    ("value", "reason"),
    [("15x", "unknown unit 'x'"), ("-5", "negative"), (-1, "negative"), ("-1m", "negative"),
     ("fast", "duration"), ("", "duration"), ("m", "duration"), ("inf", "duration"), (math.inf, "finite"),
     (math.nan, "finite"), (True, "duration"), (None, "duration"), ("15 m s", "duration"), ("1d", "unknown unit")],
)  # fmt: skip
def test_bad_durations_name_the_setting_and_the_value(value: object, reason: str) -> None:
    with pytest.raises(LimitError) as info:
        parse_duration("IDCRAWL_LIMIT_TDL", value)
    message = str(info.value)
    assert message.startswith(f"IDCRAWL_LIMIT_TDL={value!r}: ")
    assert reason in message
    assert isinstance(info.value, ValueError)
    assert info.value.setting == "IDCRAWL_LIMIT_TDL"


def test_the_issue_example_message() -> None:
    with pytest.raises(LimitError, match=r"^IDCRAWL_LIMIT_TDL='15x': unknown unit 'x'"):
        parse_duration("IDCRAWL_LIMIT_TDL", "15x")


@pytest.mark.parametrize(("value", "count"), [("500", 500), (500, 500), (" 3 ", 3), ("0", 0), (7.0, 7), ("+4", 4)])
def test_counts_are_whole_numbers(value: object, count: int) -> None:
    assert parse_count("IDCRAWL_LIMIT_PLMAX", value) == count


@pytest.mark.parametrize("value", ["-1", -3, "1.5", 1.5, "ten", "", "5m", True, None, "1e3"])
def test_bad_counts_name_the_setting_and_the_value(value: object) -> None:
    with pytest.raises(LimitError, match=r"^IDCRAWL_LIMIT_PLMAX=") as info:
        parse_count("IDCRAWL_LIMIT_PLMAX", value)
    assert repr(value) in str(info.value)


def test_limits_from_settings_reads_every_rule_with_the_prefix() -> None:
    get = settings_get({
        DOMAIN + "LT": "2", DOMAIN + "IMAX": 100, DOMAIN + "PLMAX": "500", DOMAIN + "TTMAX": "10000",
        DOMAIN + "TDL": "15m", DOMAIN + "TAC": "1m", DOMAIN + "TST": 3,
    })  # fmt: skip
    assert Limits.from_settings(get, DOMAIN) == Limits(lt=2, imax=100, plmax=500, ttmax=10000, tdl=900, tac=60, tst=3)


def test_unset_and_empty_settings_keep_the_defaults() -> None:
    assert Limits.from_settings(settings_get({DOMAIN + "TDL": ""}), DOMAIN) == Limits()
    assert Limits() == Limits(lt=1, imax=0, plmax=0, ttmax=0, tdl=0, tac=0, tst=0)
    assert list(Limits().enabled()) == []


def test_a_bad_setting_is_named_in_full() -> None:
    with pytest.raises(LimitError, match=r"^IDCRAWL_LIMIT_TAC='1 minute': unknown unit 'minute'"):
        Limits.from_settings(settings_get({DOMAIN + "TAC": "1 minute"}), DOMAIN)
    with pytest.raises(LimitError, match=r"^IDCRAWL_JOB_LIMIT_PLMAX=-2: "):
        Limits.from_settings(settings_get({JOB + "PLMAX": -2}), JOB, level="job")


def test_job_level_reads_only_rules_with_a_job_meaning() -> None:
    job = Limits.from_settings(settings_get({JOB + "TDL": "1h", JOB + "PLMAX": "9"}), JOB, level="job")
    assert job == Limits(lt=0, plmax=9, tdl=3600.0)
    for name in ("LT", "TST"):
        with pytest.raises(LimitError, match=rf"^IDCRAWL_JOB_LIMIT_{name}='2': .*domain rule"):
            Limits.from_settings(settings_get({JOB + name: "2"}), JOB, level="job")
    with pytest.raises(LimitError, match="TST"):
        JobLimits(Limits(lt=0, tst=3))


def test_table_3_values_and_their_settings() -> None:
    assert Limits(lt=1, imax=100, ttmax=10000, plmax=500, tdl=900.0, tac=60.0, tst=3) == SURVEY_TABLE_3
    profile = SURVEY_TABLE_3.as_settings(DOMAIN)
    assert profile == {
        DOMAIN + "LT": 1, DOMAIN + "IMAX": 100, DOMAIN + "PLMAX": 500, DOMAIN + "TTMAX": 10000,
        DOMAIN + "TDL": 900.0, DOMAIN + "TAC": 60.0, DOMAIN + "TST": 3,
    }  # fmt: skip
    assert Limits.from_settings(profile.get, DOMAIN) == SURVEY_TABLE_3


def test_rules_carry_the_seed_categories_and_units() -> None:
    categories = {r.name: r.category for r in RULES}
    assert {n for n, c in categories.items() if c is Category.PRIMARY} == {"Imax", "PLmax", "TST"}
    assert {n for n, c in categories.items() if c is Category.SECONDARY} == {"TTmax", "TDL", "TAC"}
    assert categories["LT"] is Category.CONTROL
    assert rule("TDL").unit is Unit.SECONDS and rule("TDL").is_duration
    assert rule("PLmax").unit is Unit.PAGE_LOADS and rule("PLmax").key == "PLMAX"
    assert all(r.description for r in RULES)
    assert {"Imax", "PLmax", "TTmax", "TDL", "TAC"} == JOB_RULES
    assert [r.name for r in SURVEY_TABLE_3.enabled()] == ["Imax", "PLmax", "TST", "TTmax", "TDL", "TAC"]


# -- each rule ----------------------------------------------------------------------------


def test_lt_is_granted_per_iteration_and_zero_means_no_cap() -> None:
    assert DomainLimits(Limits(lt=4)).take(0.0) == 4
    assert DomainLimits(Limits(lt=0)).take(0.0) == UNLIMITED


def test_imax_stops_a_domain_that_wants_an_iteration_past_the_limit() -> None:
    domain = DomainLimits(Limits(imax=3), "a.example")
    assert [domain.take(t) for t in range(3)] == [1, 1, 1]
    assert not domain.stopped
    assert domain.take(3.0) == 0
    trigger = domain.trigger
    assert trigger is not None
    assert (trigger.rule, trigger.limit, trigger.observed, trigger.key) == ("Imax", 3, 3, "a.example")
    assert trigger.category is Category.PRIMARY and trigger.unit is Unit.ITERATIONS
    assert domain.new_trigger() is trigger and domain.new_trigger() is None  # handed out once
    assert domain.iterations == 3


def test_plmax_fires_on_the_response_that_reaches_it_and_late_responses_still_count() -> None:
    domain = DomainLimits(Limits(lt=10, plmax=3), "a.example")
    domain.take(0.0)
    assert domain.response(1.0, "https://a.example/1") is None
    assert domain.response(1.1) is None
    trigger = domain.response(1.2, "https://a.example/3")
    assert trigger is not None and (trigger.rule, trigger.limit, trigger.observed, trigger.at) == ("PLmax", 3, 3, 1.2)
    assert domain.new_trigger() is None  # already handed out by response()
    assert domain.response(1.3) is None  # in flight: counts, fires nothing new
    assert domain.page_loads == 4 and domain.trigger is trigger
    assert domain.take(2.0) == 0
    assert list(domain.recent_urls) == ["https://a.example/1", "https://a.example/3"]


def test_ttmax_fires_when_the_domain_knows_that_many_distinct_targets() -> None:
    domain = DomainLimits(Limits(ttmax=10))
    domain.take(0.0)
    assert domain.new_targets(0.5, count=6) is None
    trigger = domain.new_targets(0.6, count=5)
    assert trigger is not None and (trigger.rule, trigger.limit, trigger.observed) == ("TTmax", 10, 11)
    assert trigger.category is Category.SECONDARY
    assert "11 distinct targets known, TTmax is 10" in trigger.message


def test_tdl_runs_from_the_first_request() -> None:
    domain = DomainLimits(Limits(tdl=900.0), "a.example")
    assert domain.check(5000.0) is None  # no request yet: the clock has not started
    domain.take(100.0)
    domain.take(500.0)
    assert domain.check(999.9) is None
    trigger = domain.check(1000.0)
    assert trigger is not None and (trigger.rule, trigger.limit, trigger.observed) == ("TDL", 900.0, 900.0)
    assert trigger.message == "domain a.example stopped by TDL (secondary): 900 s since the first request, TDL is 900 s"
    assert domain.check(2000.0) is None and domain.trigger is trigger


def test_tdl_also_stops_a_take() -> None:
    domain = DomainLimits(Limits(tdl=10.0))
    assert domain.take(0.0) == 1
    assert domain.take(10.0) == 0
    assert domain.iterations == 1
    trigger = domain.new_trigger()
    assert trigger is not None and trigger.rule == "TDL"


def test_tac_fires_when_the_gap_between_iteration_starts_exceeds_it() -> None:
    domain = DomainLimits(Limits(tac=60.0))
    assert domain.take(0.0) == 1
    assert domain.take(60.0) == 1  # exactly TAC: not exceeded
    assert domain.check(120.0) is None
    trigger = domain.check(120.5)  # a stuck domain is caught without another start
    assert trigger is not None and (trigger.rule, trigger.observed) == ("TAC", 60.5)


def test_tst_counts_iterations_without_a_new_found_target() -> None:
    domain = DomainLimits(Limits(tst=2))
    domain.take(0.0)
    domain.found()
    domain.take(1.0)  # iteration 1 found one: stable 0
    domain.take(2.0)  # iteration 2 found none: stable 1
    domain.found(2)
    domain.take(3.0)  # iteration 3 found two: stable 0
    assert domain.stable == 0
    assert domain.take(4.0) == 1  # iteration 4: stable 1
    assert domain.take(5.0) == 0  # iteration 5: stable 2 = TST
    trigger = domain.new_trigger()
    assert trigger is not None and (trigger.rule, trigger.limit, trigger.observed) == ("TST", 2, 2)
    assert domain.iterations == 5


def test_a_finished_domain_fires_nothing() -> None:
    domain = DomainLimits(Limits(tac=1.0, tdl=1.0))
    domain.take(0.0)
    domain.finish()
    assert domain.check(100.0) is None and domain.take(100.0) == 0 and not domain.stopped


def test_counters_are_plain_data() -> None:
    domain = DomainLimits(Limits(lt=2))
    domain.take(3.0)
    domain.new_targets(3.0, 2)
    domain.response(4.0)
    domain.found()
    assert domain.counters() == {
        "iterations": 1, "page_loads": 1, "targets": 2, "found": 1, "stable_iterations": 0,
        "first_request_at": 3.0, "last_iteration_at": 3.0,
    }  # fmt: skip


def test_the_job_tracker_sums_the_domains_and_names_the_job() -> None:
    job = JobLimits(Limits(lt=0, plmax=3))
    domains = {key: DomainLimits(Limits(), key) for key in ("a", "b")}
    fired = []
    for t, key in enumerate("aba"):
        assert job.take(t) == UNLIMITED and domains[key].take(t) == 1
        domains[key].response(t + 0.5)
        fired.append(job.response(t + 0.5))
    trigger = fired[2]
    assert fired == [None, None, trigger] and trigger is not None
    assert trigger.level == "job" and trigger.message.startswith("job stopped by PLmax (primary): 3 responses")
    assert job.take(10.0) == 0 and job.response(10.5) is None and job.page_loads == 4
    assert not any(d.stopped for d in domains.values())  # the extension closes them: the job's trigger says why


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.lists(st.booleans(), max_size=40))
def test_tst_fires_after_exactly_tst_iterations_without_change(tst: int, finds: list[bool]) -> None:
    """Iteration i finds a target when ``finds[i]``; afterwards nothing is ever found."""
    domain = DomainLimits(Limits(tst=tst))
    streak, t = 0, 0.0
    for find in finds:
        assert domain.take(t) == 1
        if find:
            domain.found()
        streak = 0 if find else streak + 1
        t += 1.0
        if streak == tst:
            break
    else:
        # nothing more is found: exactly tst - streak more iterations run
        for _ in range(tst - streak):
            assert domain.take(t) == 1
            t += 1.0
    assert domain.take(t) == 0
    trigger = domain.new_trigger()
    assert trigger is not None and (trigger.rule, trigger.observed) == ("TST", tst)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 50), st.integers(0, 30))
def test_imax_allows_exactly_imax_iterations_of_lt_requests(imax: int, lt: int) -> None:
    domain = DomainLimits(Limits(lt=lt, imax=imax))
    grants = []
    while (granted := domain.take(float(len(grants)))) > 0:
        grants.append(granted)
        assert len(grants) <= imax
    assert grants == [lt or UNLIMITED] * imax
    assert domain.trigger is not None and domain.trigger.rule == "Imax"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100), st.lists(st.integers(0, 200), min_size=1, max_size=30))
def test_tac_is_measured_between_iteration_starts(tac: int, gaps: list[int]) -> None:
    """Responses and other events between starts never reset the inactivity clock.

    Whole seconds keep the float sums exact, so the boundary (a gap of exactly TAC) is tested.
    """
    domain = DomainLimits(Limits(lt=3, tac=tac))
    t = 0.0
    assert domain.take(t) == 3
    for gap in gaps:
        domain.response(t + gap / 2)  # activity that is not an iteration start
        domain.new_targets(t + gap / 2)
        t += gap
        granted = domain.take(t)
        if gap > tac:
            assert granted == 0
            trigger = domain.new_trigger()
            assert trigger is not None and trigger.rule == "TAC" and trigger.observed == pytest.approx(gap)
            return
        assert granted == 3
    assert not domain.stopped


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.lists(st.integers(0, 20), max_size=50))
def test_ttmax_fires_once_at_the_first_count_that_reaches_it(ttmax: int, batches: list[int]) -> None:
    domain = DomainLimits(Limits(ttmax=ttmax))
    domain.take(0.0)
    total, fired = 0, []
    for batch in batches:
        total += batch
        trigger = domain.new_targets(1.0, batch)
        if trigger is not None:
            fired.append((trigger.observed, total))
    expected = [(t, t) for t in [next((s for s in _running(batches) if s >= ttmax), None)] if t is not None]
    assert fired == expected


def _running(batches: list[int]) -> list[int]:
    out, total = [], 0
    for batch in batches:
        total += batch
        out.append(total)
    return out
