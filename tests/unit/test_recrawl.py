"""Adaptive recrawl, core (issue 17): the rule, clamping, due order, pages and tails, the clock, convergence."""

from __future__ import annotations

import hashlib
import json
import math
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.clock import Clock, ClockError, format_time, parse_time, stamp
from idcrawl.core.fingerprints import html_text
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import parse_job
from idcrawl.core.recrawl import (
    DEFAULT_POLICY,
    Fetch,
    Kind,
    Outcome,
    Policy,
    Schedule,
    Visit,
    advised_margin,
    body_due,
    due,
    due_order,
    early_cut_chance,
    gap_runs,
    http_time,
    next_duration,
    page_schedule,
    parse_policy,
    record_of,
    schedule_of,
    signature_of,
    tail_after_run,
    tail_schedule,
    visit_page,
    visit_tail,
)
from idcrawl.core.setting_specs import SettingError, check_setting
from idcrawl.core.targets import parse_run_options, parse_target
from tests.support.recrawl_sim import within_factor_2
from tests.support.reference import due_order_truth, recrawl_durations_truth

DAY = 86_400.0
NUTCH = Policy(inc_rate=0.4, dec_rate=0.2)  # Nutch's AdaptiveFetchSchedule numbers
T0 = parse_time("2026-01-12T07:00:00Z")


# -- the rule ----------------------------------------------------------------------------------


def test_the_defaults_are_nutchs_but_a_faster_penalty() -> None:
    assert (DEFAULT_POLICY.inc_rate, DEFAULT_POLICY.dec_rate) == (0.8, 0.2)
    assert (DEFAULT_POLICY.min_duration, DEFAULT_POLICY.max_duration) == (60.0, 365 * DAY)
    assert DEFAULT_POLICY.initial_duration == DAY


def test_motivate_and_penalise_move_by_the_documented_factors() -> None:
    assert next_duration(1000.0, True) == 1000.0 * 0.8
    assert next_duration(1000.0, False) == 1000.0 * 1.8


def test_durations_reach_min_and_max_exactly() -> None:
    d = DAY
    for _ in range(100):
        d = next_duration(d, True)
    assert d == 60.0
    for _ in range(100):
        d = next_duration(d, False)
    assert d == 365 * DAY


policies = st.builds(
    Policy,
    inc_rate=st.floats(0.01, 3.0),
    dec_rate=st.floats(0.01, 0.99),
    min_duration=st.floats(1.0, 1e4),
    max_duration=st.floats(1e4, 1e8),
    initial_duration=st.floats(1.0, 1e8),
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(policies, st.lists(st.booleans(), max_size=60))
def test_the_rule_equals_the_reference_model(policy: Policy, news: list[bool]) -> None:
    schedule = tail_schedule("t", 0.0, 0, policy)
    got = []
    for i, found in enumerate(news):
        visit = visit_tail(schedule, [i + 1] if found else [], float(i + 1), policy)
        assert visit.schedule is not None and visit.news is found
        schedule = visit.schedule
        got.append(schedule.update_duration)
    assert got == recrawl_durations_truth(policy.initial_duration, news, policy.inc_rate, policy.dec_rate,
                                          policy.min_duration, policy.max_duration)
    assert all(policy.min_duration <= d <= policy.max_duration for d in got)


# -- due and its order -------------------------------------------------------------------------


def test_due_is_strictly_later_than_last_crawled_plus_duration() -> None:
    s = tail_schedule("t", T0, 5)
    assert not due(s, T0 + DAY)
    assert due(s, T0 + DAY + 0.001)


things = st.lists(
    st.tuples(st.sampled_from(["tail", "page"]), st.integers(0, 30), st.integers(0, 1000), st.integers(1, 500)),
    max_size=25,
    unique_by=lambda t: t[1],
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(things, st.integers(0, 2000))
def test_due_order_equals_the_reference_model(raw: list[tuple[str, int, int, int]], now: int) -> None:
    schedules = [Schedule(Kind(k), f"k{key:02d}", float(last), float(d)) for k, key, last, d in raw]
    got = [s.key for s in due_order(schedules, float(now))]
    want = due_order_truth([(k, f"k{key:02d}", float(last), float(d)) for k, key, last, d in raw], float(now))
    assert got == want


def test_tails_come_before_pages_and_the_most_overdue_first() -> None:
    page_far = Schedule(Kind.PAGE, "p1", 0.0, 10.0)  # 9 durations overdue at 100
    page_near = Schedule(Kind.PAGE, "p2", 0.0, 50.0)  # 1 duration overdue
    tail = Schedule(Kind.TAIL, "t", 0.0, 90.0)  # 0.11 overdue
    fresh = Schedule(Kind.PAGE, "p3", 99.0, 10.0)  # not due
    assert [s.key for s in due_order([page_near, fresh, page_far, tail], 100.0)] == ["t", "p1", "p2"]


# -- tails -------------------------------------------------------------------------------------


def test_a_tail_has_news_only_above_its_last_found() -> None:
    s = tail_schedule("t", T0, 100)
    same = visit_tail(s, [98, 100], T0 + DAY + 1)
    assert not same.news and same.schedule is not None and same.schedule.last_found == 100
    assert same.schedule.update_duration == DAY * 1.8
    new = visit_tail(s, [101, 105], T0 + DAY + 1)
    assert new.news and new.schedule is not None and new.schedule.last_found == 105
    assert new.schedule.update_duration == DAY * 0.8 and new.schedule.last_crawled == T0 + DAY + 1


# -- pages -------------------------------------------------------------------------------------


def _page() -> Schedule:
    return page_schedule("t/7", T0, "a", etag='"e1"', last_modified="Mon, 12 Jan 2026 07:00:00 GMT")


def test_a_page_with_a_different_checksum_is_news_with_the_previous_checksum() -> None:
    visit = visit_page(_page(), Fetch(Outcome.OK, "b", etag='"e2"'), T0 + DAY + 1)
    assert visit.news and visit.previous_checksum == "a"
    assert visit.schedule is not None and visit.schedule.checksum == "b" and visit.schedule.etag == '"e2"'
    assert visit.schedule.revision == 1 and visit.schedule.update_duration == DAY * 0.8


def test_the_same_checksum_and_a_304_are_unchanged() -> None:
    for fetch in (Fetch(Outcome.OK, "a"), Fetch(Outcome.NOT_MODIFIED)):
        visit = visit_page(_page(), fetch, T0 + DAY + 1)
        assert not visit.news and visit.schedule is not None
        assert visit.schedule.update_duration == DAY * 1.8 and visit.schedule.checksum == "a"
        # a 304 keeps the validators to send next time; a 200 brings its own (here none)
        assert visit.schedule.etag == ('"e1"' if fetch.outcome is Outcome.NOT_MODIFIED else None)


def test_a_200_after_a_304_is_news_only_with_a_new_signature() -> None:
    """News = a signature other than the stored one, whatever the last status (issue 31, finding 1)."""
    after_304 = visit_page(_page(), Fetch(Outcome.NOT_MODIFIED), T0 + DAY + 1).schedule
    assert after_304 is not None and after_304.last_status == 304
    same = visit_page(after_304, Fetch(Outcome.OK, "a"), T0 + 3 * DAY)
    assert not same.news and same.schedule is not None and same.schedule.last_status == 200
    assert same.schedule.update_duration == DAY * 1.8 * 1.8 and same.schedule.revision == 0
    other = visit_page(after_304, Fetch(Outcome.OK, "b"), T0 + 3 * DAY)
    assert other.news and other.schedule is not None and other.schedule.update_duration == DAY * 1.8 * 0.8


def test_gone_is_counted_and_leaves_the_schedule_after_n_gone_revisits() -> None:
    policy = Policy(gone_limit=3)
    s: Schedule | None = _page()
    for n in (1, 2):
        assert s is not None
        visit = visit_page(s, Fetch(Outcome.MISSING), T0 + n * 10 * DAY, policy)
        assert visit.gone and not visit.news and visit.schedule is not None and visit.schedule.gone == n
        s = visit.schedule
    assert s is not None
    back = visit_page(s, Fetch(Outcome.OK, "a"), T0 + 25 * DAY, policy).schedule
    assert back is not None and back.gone == 0  # gone counts revisits in a row
    last = visit_page(s, Fetch(Outcome.MISSING), T0 + 30 * DAY, policy)
    assert last.gone and last.schedule is None


def test_a_failed_fetch_changes_nothing() -> None:
    s = _page()
    assert visit_page(s, Fetch(Outcome.FAILED), T0 + 2 * DAY).schedule == s


def test_a_replayed_visit_changes_nothing() -> None:
    """A rerun after a kill may replay a fetch: no duration moves twice for one fetch."""
    now = T0 + 2 * DAY
    page = visit_page(_page(), Fetch(Outcome.OK, "b"), now).schedule
    tail = visit_tail(tail_schedule("t", T0, 5), [9], now).schedule
    assert page is not None and tail is not None
    assert visit_page(page, Fetch(Outcome.OK, "c"), now) == Visit(page, False)
    assert visit_tail(tail, [12], now) == Visit(tail, False)


# -- per-target keys ---------------------------------------------------------------------------


def test_per_target_keys_parse_strings_and_toml_values() -> None:
    policy = parse_policy({"recrawl_inc_rate": "0.8", "recrawl_dec_rate": 0.1, "recrawl_min": "5m",
                           "recrawl_max": "30d", "recrawl_initial": 3600, "recrawl_gone": "2", "margin": 5})
    assert policy == Policy(0.8, 0.1, 300.0, 30 * DAY, 3600.0, 2)


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ({"recrawl_dec_rate": "1"}, "recrawl_dec_rate='1': must be a number > 0 and < 1"),
        ({"recrawl_inc_rate": "fast"}, "recrawl_inc_rate='fast': must be a finite number > 0"),
        ({"recrawl_min": "-5m"}, "recrawl_min='-5m': must be a duration > 0 such as 60s, 15m, 6h, 1d or 3600"),
        ({"recrawl_gone": 0}, "recrawl_gone=0: must be an integer >= 1"),
        ({"recrawl_min": "2d", "recrawl_max": "1d"}, "recrawl_min='2d': makes recrawl_min (172800s) above"),
    ],
)
def test_a_bad_per_target_key_is_one_line(raw: dict[str, object], line: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_policy(raw)
    assert str(info.value).startswith(line) and "\n" not in str(info.value)


def test_a_target_takes_its_recrawl_keys_from_arguments_and_job_files(tmp_path: Path) -> None:
    url = "https://reg.example/n/{id}"
    target = parse_target({"url": url, "start": "1", "recrawl_min": "5m", "recrawl_inc_rate": "0.8",
                           "resume": "due"})
    assert target.policy == Policy(inc_rate=0.8, min_duration=300.0) and target.resume == "due"
    assert parse_target({"url": url, "start": "1"}).policy == DEFAULT_POLICY
    assert parse_target({"url": url, "start": "1", "recrawl_min": ""}).policy == DEFAULT_POLICY  # empty: default
    job = tmp_path / "job.toml"
    job.write_text('[defaults]\nrecrawl_max = "30d"\nrecrawl_gone = 2\n'
                   f'[[targets]]\nurl = "{url}"\nstart = 1\nrecrawl_dec_rate = 0.1\n'
                   f'[[targets]]\nname = "b"\nurl = "{url}"\nstart = 1\nrecrawl_max = "2d"\n')
    a, b = parse_job(job)
    assert a.policy == Policy(dec_rate=0.1, max_duration=30 * DAY, gone_limit=2)
    assert b.policy == Policy(max_duration=2 * DAY, gone_limit=2)
    assert parse_run_options({"resume": "due"}) == {"resume": "due"}


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ({"recrawl_dec_rate": "1.5"}, "recrawl_dec_rate='1.5': must be a number > 0 and < 1"),
        ({"recrawl_initial": "soon"}, "recrawl_initial='soon': must be a duration > 0"),
        ({"recrawl_min": "1d", "recrawl_max": "1h"}, "recrawl_min='1d': makes recrawl_min (86400s) above"),
        ({"recrawl_rate": "1"}, "recrawl_rate='1': unknown key (known: "),
        ({"resume": "due-ish"}, "resume='due-ish': must be one of auto, reset, bound, holes, all, due"),
    ],
)
def test_a_bad_recrawl_key_of_a_target_is_one_line(raw: dict[str, object], line: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": "https://reg.example/n/{id}", "start": "1", **raw})
    assert str(info.value).startswith(line) and "\n" not in str(info.value)


# -- the clock ---------------------------------------------------------------------------------


def test_idcrawl_now_fixes_the_clock_and_unset_is_real() -> None:
    clock = Clock.from_setting("2026-01-12T07:00:00Z")
    assert clock.fixed and clock.now() == T0 and format_time(clock.now()) == "2026-01-12T07:00:00Z"
    assert clock.advance(DAY) == T0 + DAY and clock.now() == T0 + DAY
    assert Clock.from_setting("2026-01-12T08:00:00+01:00").now() == T0
    assert Clock.from_setting("2026-01-12T07:00:00").now() == T0  # no offset = UTC
    assert not Clock.from_setting(None).fixed and not Clock.from_setting("").fixed
    assert Clock(real=lambda: 42.0).now() == 42.0


@pytest.mark.parametrize("value", ["tomorrow", "2026-13-01", 5, True])
def test_a_bad_idcrawl_now_is_one_line(value: object) -> None:
    with pytest.raises(SettingError) as info:
        check_setting("IDCRAWL_NOW", value)
    assert str(info.value) == (f"IDCRAWL_NOW={value!r}: must be an ISO 8601 time such as 2026-01-12T07:00:00Z"
                               " (or unset for the real clock)")
    with pytest.raises(ClockError):
        Clock.from_setting(value)


# -- convergence, core level (seeded: the figures are the same on every run) -----------------


def test_convergence_with_the_defaults_meets_the_acceptance() -> None:
    """200 pages per (process, T), 30 visits: >= 80% within a factor 2 of T in every class (docs/recrawl.md)."""
    assert Policy(inc_rate=0.8, dec_rate=0.2) == DEFAULT_POLICY
    shares = within_factor_2()
    assert min(shares.values()) >= 0.80, shares
    assert sum(shares.values()) / len(shares) >= 0.90


def test_convergence_with_nutchs_defaults_falls_short_as_documented() -> None:
    """Nutch's numbers settle at about 0.6 T on periodic pages and learn 1 h too slowly from a 1-day start."""
    shares = within_factor_2(NUTCH)
    assert shares[("periodic", "1 h")] == 0.0 and shares[("periodic", "7 d")] < 0.5
    assert 0.65 <= sum(shares.values()) / len(shares) < 0.80


def test_the_convergence_figures_in_the_docs_are_the_simulations() -> None:
    """docs/recrawl.md states the share per class for both rules: the table is what the seeded simulation gives
    (1 h, 6 h, 1 d, 7 d; periodic and Poisson; 30 visits; within a factor 2), to the third decimal."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "recrawl.md").read_text()
    for label, policy in (("Nutch's numbers (inc 0.4, dec 0.2)", NUTCH), ("the defaults (inc 0.8, dec 0.2)",
                                                                       DEFAULT_POLICY)):
        [row] = [line for line in page.splitlines() if line.startswith(f"| {label} |")]
        stated = [cell.strip().strip("*") for cell in row.strip("|").split("|")[1:]]
        shares = within_factor_2(policy)
        assert list(shares) == [(p, t) for p in ("periodic", "poisson") for t in ("1 h", "6 h", "1 d", "7 d")]
        figures = [*shares.values(), sum(shares.values()) / len(shares)]
        assert stated == [f"{share:.3f}" for share in figures], label


# -- margin advice -----------------------------------------------------------------------------


def _geometric_site(r: float, gaps: int, seed: int) -> list[int]:
    """Found ids of a synthetic site whose gap runs are geometric: P(run >= m) = r**m (seeded)."""
    rng = random.Random(seed)
    ids, current = [0], 0
    for _ in range(gaps):
        current += 1 + int(math.log(1.0 - rng.random()) / math.log(r))
        ids.append(current)
    return ids


def test_gap_runs_are_the_missing_ids_between_found_ones() -> None:
    assert gap_runs([10, 3, 4, 9, 4]) == [0, 4, 0]
    assert gap_runs([]) == [] and advised_margin([]) == 1 and advised_margin([0, 0]) == 1


@pytest.mark.parametrize(("r", "gaps", "sample"), [(0.5, 1000, 100_000), (0.8, 1000, 1_000_000)])
def test_the_advised_margin_is_the_true_one_on_a_synthetic_site(r: float, gaps: int, sample: int) -> None:
    """The true margin: the smallest m with 1 - (1 - r**m)**gaps < 1% (17 for r=0.5, 52 for r=0.8). The
    estimate from ``sample`` seeded gap runs has a standard deviation of ~0.05 in m, and the real-valued
    bound (16.60, 51.57) is > 0.39 from the next integer: a wrong advice needs a > 7-sigma sample
    (rarer than one in 10**11 over seeds)."""
    true = next(m for m in range(1, 1000) if 1 - (1 - r**m) ** gaps < 0.01)
    runs = gap_runs(_geometric_site(r, sample, seed=17))
    assert len(runs) == sample
    assert advised_margin(runs, gaps=gaps) == true
    assert early_cut_chance(r, true, gaps) < 0.01 <= early_cut_chance(r, true - 1, gaps)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.floats(0.01, 0.99), st.integers(1, 10_000), st.integers(1, 200))
def test_the_early_cut_chance_falls_as_the_margin_grows(r: float, gaps: int, margin: int) -> None:
    assert 0.0 <= early_cut_chance(r, margin + 1, gaps) <= early_cut_chance(r, margin, gaps) <= 1.0


def test_a_tail_after_a_run_starts_at_the_initial_duration_then_follows_the_rule() -> None:
    policy = Policy(initial_duration=2.5 * DAY, max_duration=3 * DAY)
    first = tail_after_run(None, "reg", 1019, T0, policy)
    assert first == Schedule(Kind.TAIL, "reg", T0, 2.5 * DAY, last_found=1019)
    quiet = tail_after_run(first, "reg", 1019, T0 + 3 * DAY, policy)
    assert (quiet.update_duration, quiet.last_found, quiet.revision) == (3 * DAY, 1019, 0)  # x 1.8, clamped
    news = tail_after_run(quiet, "reg", 1025, T0 + 7 * DAY, policy)
    assert (news.update_duration, news.last_found, news.revision) == (3 * DAY * 0.8, 1025, 1)
    assert tail_after_run(news, "reg", 1030, T0 + 7 * DAY, policy) == news  # a replay: applied once already


def test_schedule_records_round_trip_exactly() -> None:
    page = page_schedule("reg/5", T0 + 0.125, "abc", etag='"x"', last_modified="Mon, 12 Jan 2026 07:00:00 GMT")
    for schedule in (tail_schedule("reg", T0, 2**64 - 1), tail_schedule("reg", T0, None), page):
        assert schedule_of(json.loads(json.dumps(record_of(schedule)))) == schedule


def test_the_clock_stamps_times_as_items_and_runs_show_them() -> None:
    assert stamp(T0 + 0.1234) == "2026-01-12T07:00:00.123Z"
    assert Clock(T0).stamp() == "2026-01-12T07:00:00.000Z"


def _datetime_stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@settings(max_examples=3000, derandomize=True, deadline=None)
@given(st.one_of(
    st.floats(min_value=-1e10, max_value=2.5e11, allow_nan=False),
    # near a whole second or a millisecond: where rounding to microseconds carries
    st.builds(lambda s, d: s + d, st.integers(0, 2**33), st.sampled_from(
        [0.0, 0.9995, 0.9999994, 0.9999995, 0.9999996, 0.0004995, 0.0005, 0.1234565, 0.9999999999, 1e-7, 5e-7])),
))
def test_stamp_writes_what_datetime_writes(seconds: float) -> None:
    assert stamp(seconds) == _datetime_stamp(seconds)


def test_idplan_advises_the_true_margin_from_the_gap_runs_in_a_state(tmp_path: Path) -> None:
    """A state whose 100,000 gap runs are geometric with r = 0.5: the true margin for a lane crossing
    that many is the smallest m with 1 - (1 - 0.5**m)**100000 < 1%, 24 (real-valued bound 23.25). The
    estimate's standard deviation in m is ~0.08, so a wrong advice needs a > 9-sigma sample."""
    from pyroaring import BitMap64

    from idcrawl.commands.report import advice_text, collect, plan_document
    from idcrawl.core.lanes import Outcome
    from idcrawl.core.ranges import LaneRecord
    from idcrawl.state import SqliteStateStore

    found = _geometric_site(0.5, 100_000, seed=5)
    runs = gap_runs(found)
    true = next(m for m in range(1, 1000) if 1 - (1 - 0.5**m) ** len(runs) < 0.01)
    assert true == 24
    store = SqliteStateStore(tmp_path / "state.sqlite")
    last = found[-1]
    lane = LaneRecord("reg:asc", 0, 1, None, last + 13, last, last + 12, "margin")  # cut by a margin of 12
    store.commit({"reg": {"url": "http://h/{id}"}}, {"reg": {Outcome.FOUND: BitMap64(found)}}, {"reg": {"reg:asc": lane}},
                 tails={"reg": tail_schedule("reg", T0, last)})
    [view] = collect(store)
    advice = view.advice
    assert advice is not None and (advice.advised, advice.margin, advice.runs) == (true, 12, 100_000)
    assert advice.early_cut == early_cut_chance(advice.r, 12, 100_000) and advice.early_cut > 0.5
    assert advice.censored == sum(1 for run in runs if run >= 11) > 0
    assert "margin 24 keeps the chance of an early cut under 1% (from 100,000 gap runs" in advice_text(advice)
    assert "censored by the margin" in advice_text(advice)
    [target] = plan_document([view])["targets"]
    assert target["margin_advice"]["advised_margin"] == 24
    assert target["tail"] == {"last_crawled": "2026-01-12T07:00:00.000Z", "update_duration": DAY,
                              "due_at": "2026-01-13T07:00:00.000Z", "last_found": last, "revision": 0}


def test_a_due_run_adds_the_most_overdue_tails_first() -> None:
    from types import SimpleNamespace

    from idcrawl.local.worker import LocalWorker

    url = "https://reg.example/n/{id}"
    targets = [parse_target({"url": url, "start": 1, "name": name, "resume": "due"}) for name in "abcd"]
    worker = LocalWorker.__new__(LocalWorker)
    worker.runtime = SimpleNamespace(clock=Clock(T0 + 10 * DAY))  # type: ignore[assignment]
    worker._tails = {"a": tail_schedule("a", T0 + 9 * DAY, 5),  # 0 durations overdue
                     "b": tail_schedule("b", T0, 5),  # 9
                     "d": tail_schedule("d", T0 + 9.9 * DAY, 5)}  # not due: -0.9
    assert [t.name for t in worker._in_due_order(targets)] == ["b", "a", "c", "d"]


# -- signatures, Last-Modified sync, forced refetch (issue 31, findings 3 and 4) --------------------

CLOCK_PAGE = ("<html><head><style>p {{color: red}}</style><script>var t = {t};</script></head>"
              "<body><h1>Notice  7</h1>\n<p>Served at {clock}</p><p>token={token}</p></body></html>")


def _clock_page(clock: str, token: str = "x1", t: int = 1) -> bytes:
    return CLOCK_PAGE.format(clock=clock, token=token, t=t).encode()


def _text(body: bytes) -> str:
    return html_text(body)


def test_body_signature_is_the_sha1_of_the_bytes() -> None:
    body = _clock_page("07:00:00")
    assert signature_of(body) == hashlib.sha1(body).hexdigest()


def test_text_signature_ignores_markup_scripts_styles_and_whitespace() -> None:
    text = parse_policy({"signature": "text"})
    a = _clock_page("07:00:00", t=1)
    b = a.replace(b"<h1>Notice  7</h1>\n", b"<h1 class='x'>Notice 7</h1>").replace(b"var t = 1", b"var t = 2")
    assert signature_of(a) != signature_of(b)
    assert signature_of(a, text, text=lambda: _text(a)) == signature_of(b, text, text=lambda: _text(b))
    assert signature_of(a, text, text=lambda: _text(a)) != signature_of(
        a.replace(b"Notice", b"Avis"), text, text=lambda: _text(a.replace(b"Notice", b"Avis")))


def test_drop_patterns_remove_a_clock_and_a_token_before_hashing() -> None:
    drop = [r"Served at \d\d:\d\d:\d\d", r"token=\w+"]
    for mode in ("body", "text"):
        policy = parse_policy({"signature": mode, "signature_drop": drop})
        a, b = _clock_page("07:00:00", "x1"), _clock_page("19:41:07", "q9")
        sig = [signature_of(p, policy, text=lambda p=p: _text(p), decoded=lambda p=p: p.decode()) for p in (a, b)]
        assert sig[0] == sig[1], mode
        c = a.replace(b"Notice", b"Avis")
        assert signature_of(c, policy, text=lambda c=c: _text(c), decoded=lambda c=c: c.decode()) != sig[0], mode
    one = parse_policy({"signature_drop": r"\d\d:\d\d:\d\d"})  # -a: one pattern
    assert one.signature_drop == (r"\d\d:\d\d:\d\d",)


@pytest.mark.parametrize(("key", "value", "line"), [
    ("signature", "html", "signature='html': must be one of body, text"),
    ("signature_drop", "(", "signature_drop='(': is not a regular expression"),
    ("signature_drop", [1], "signature_drop=[1]: must be a regular expression or a list of them"),
    ("last_modified", "yes", "last_modified='yes': must be one of validator, sync"),
])
def test_bad_signature_keys_are_one_line(key: str, value: object, line: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_policy({key: value})
    assert str(caught.value).startswith(line)


def test_sync_raises_the_duration_to_the_pages_age_like_nutch() -> None:
    """Nutch's sync_delta: an unchanged visit's interval is at least ``fetch time - modified time``."""
    sync = parse_policy({"last_modified": "sync"})
    old = "Mon, 01 Dec 2025 07:00:00 GMT"  # 42 days before T0
    age = T0 - http_time(old, T0)  # type: ignore[operator]
    page = page_schedule("t/1", T0, "a", last_modified=old, policy=sync)
    assert page.modified == T0 - age
    synced = visit_page(page, Fetch(Outcome.NOT_MODIFIED), T0 + DAY + 1, sync).schedule
    plain = visit_page(page, Fetch(Outcome.NOT_MODIFIED), T0 + DAY + 1).schedule
    assert synced is not None and plain is not None
    assert plain.update_duration == DAY * 1.8 and synced.update_duration == age + DAY + 1
    # a change found by the signature: no sync on it (Nutch: modified = fetch time), and the age restarts
    changed = visit_page(synced, Fetch(Outcome.OK, "b", last_modified=old), T0 + 60 * DAY, sync).schedule
    assert changed is not None and changed.update_duration == synced.update_duration * 0.8
    assert changed.modified == T0 + 60 * DAY
    # the server's newer Last-Modified (a 304's too) is evidence; a date in the future counts as now
    later = visit_page(changed, Fetch(Outcome.NOT_MODIFIED, last_modified="Fri, 01 Jan 2100 00:00:00 GMT"),
                       T0 + 200 * DAY, sync).schedule
    assert later is not None and later.modified == T0 + 200 * DAY
    assert later.update_duration == changed.update_duration * 1.8


def test_a_page_that_never_changes_reaches_nutchs_interval_with_sync() -> None:
    """Issue 31 finding 4: Last-Modified 24 h before hour 0, 304s from then on, visits when due:
    by hour 800 the duration with sync is the page's age at its last visit (Nutch's), without it well below."""
    lm = "Sun, 11 Jan 2026 07:00:00 GMT"
    got = {}
    for policy in (Policy(inc_rate=0.4), Policy(inc_rate=0.4, sync=True)):
        page = page_schedule("t/1", T0, "a", last_modified=lm, policy=policy)
        while page.due_at() < T0 + 800 * 3600:
            visit = visit_page(page, Fetch(Outcome.NOT_MODIFIED), page.due_at() + 1, policy).schedule
            assert visit is not None
            page = visit
        got[policy.sync] = page
    assert got[False].update_duration < 500 * 3600
    synced = got[True]
    assert synced.update_duration == synced.last_crawled - (T0 - DAY) > 700 * 3600


def test_body_due_counts_from_the_last_body() -> None:
    page = page_schedule("t/1", T0, "a")
    assert page.body_at == T0
    assert not body_due(page, T0 + 90 * DAY, 90 * DAY) and body_due(page, T0 + 90 * DAY + 1, 90 * DAY)
    assert not body_due(page, T0 + 900 * DAY, 0.0)
    after_304 = visit_page(page, Fetch(Outcome.NOT_MODIFIED), T0 + 50 * DAY).schedule
    assert after_304 is not None and after_304.body_at == T0
    after_200 = visit_page(after_304, Fetch(Outcome.OK, "a"), T0 + 95 * DAY).schedule
    assert after_200 is not None and after_200.body_at == T0 + 95 * DAY


def test_http_time_reads_http_dates_and_refuses_others() -> None:
    assert http_time("Mon, 12 Jan 2026 07:00:00 GMT", T0 + 1) == T0
    assert http_time("Mon, 12 Jan 2026 07:00:00 GMT", T0 - 5) == T0 - 5  # not after now
    assert http_time("yesterday", T0) is None and http_time(None, T0) is None and http_time("", T0) is None
