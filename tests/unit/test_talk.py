"""The lines a crawl logs at INFO (idcrawl/core/talk.py), from plain numbers, and the snapshot that feeds them."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import Outcome
from idcrawl.core.talk import (
    LaneInfo,
    Tally,
    TargetInfo,
    done_by_target,
    forgotten_text,
    format_duration,
    format_rate,
    lane_plan_text,
    lane_position_text,
    lane_stop_text,
    plan_lines,
    progress_gaps,
    progress_lines,
    resume_text,
    summary_lines,
)
from idcrawl.core.targets import parse_targets
from idcrawl.extensions.progress import shown_lanes, snapshot

URL = "https://gazette.example/notice/{id}"


def asc(**kw: object) -> LaneInfo:
    base: dict[str, object] = {"key": "g:asc", "direction": "asc", "start": 1150, "step": 1, "stop": None,
                               "margin": 4, "cursor": 1150}
    return LaneInfo(**{**base, **kw})  # type: ignore[arg-type]


def desc(**kw: object) -> LaneInfo:
    base: dict[str, object] = {"key": "g:desc", "direction": "desc", "start": 1149, "step": -1, "stop": None,
                               "margin": 4, "cursor": 1149}
    return LaneInfo(**{**base, **kw})  # type: ignore[arg-type]


# -- cadence ---------------------------------------------------------------------------------------


def test_progress_lines_come_early_then_the_gaps_double_up_to_the_interval() -> None:
    gaps = progress_gaps(3.0, 60.0)
    assert [next(gaps) for _ in range(8)] == [3, 6, 12, 24, 48, 60, 60, 60]
    short = progress_gaps(3.0, 0.2)  # an interval shorter than the first gap: every interval
    assert [next(short) for _ in range(3)] == [0.2, 0.2, 0.2]
    assert list(progress_gaps(3.0, 0)) == []  # 0: no progress lines
    unset = progress_gaps(0, 60.0)
    assert next(unset) == 60.0


# -- numbers -------------------------------------------------------------------------------------


def test_a_rate_without_elapsed_time_is_a_dash_never_zero() -> None:
    assert format_rate(0, 0) == "- ids/s"
    assert format_rate(500, 0.0) == "- ids/s"
    assert format_rate(5, None) == "- ids/s"


def test_rates_are_over_the_seconds_given() -> None:
    assert format_rate(49, 10) == "4.9 ids/s"
    assert format_rate(16_100, 100) == "161 ids/s"
    assert format_rate(0, 60) == "0.0 ids/s"  # a real minute with nothing decided: a stall, worth seeing


def test_durations_read_as_people_say_them() -> None:
    assert format_duration(7.42) == "7.4 s"
    assert format_duration(725) == "12 min 5 s"
    assert format_duration(3 * 3600 + 125) == "3 h 2 min"


# -- lanes ---------------------------------------------------------------------------------------


def test_lane_plan_says_where_each_direction_walks() -> None:
    assert lane_plan_text(asc()) == "asc 1150 -> no max"
    assert lane_plan_text(asc(stop=1299)) == "asc 1150 -> 1299"
    assert lane_plan_text(desc()) == "desc 1149 -> 0"
    assert lane_plan_text(desc(stop=1000)) == "desc 1149 -> 1000"
    holes = LaneInfo("g:holes", "holes", 0, 1, 11, 0, 0)
    assert lane_plan_text(holes) == "holes: 12 ids to refetch"


def test_lane_stop_says_where_and_why() -> None:
    cut = asc(reason="margin", cut_at=1183, last_found=1179, cursor=1184)
    assert lane_stop_text(cut) == "asc cut at 1183 after 4 misses (last found 1179)"
    assert lane_stop_text(asc(reason="margin", cut_at=1153, margin=1)) == "asc cut at 1153 after 1 miss (nothing found)"
    assert lane_stop_text(asc(reason="bound", stop=1299, cursor=1300, found=150)) == "asc reached max 1299"
    assert lane_stop_text(desc(reason="bound", stop=1000, cursor=999, found=150)) == "desc reached min 1000"
    assert lane_stop_text(desc(reason="bound", cursor=-1, found=1150)) == "desc reached 0"
    assert lane_stop_text(asc(reason="limit:TTMAX", cursor=1220)) == "asc stopped by limit TTMAX at 1220"
    assert lane_stop_text(asc(reason="shutdown", cursor=13057)) == "asc closed early (shutdown) at 13057"
    assert lane_stop_text(asc(cursor=1160)) == "asc unfinished at 1160"  # a worker leaving a running job


def test_a_holes_lane_counts_refetched_ids() -> None:
    holes = LaneInfo("g:holes", "holes", 0, 1, 11, 0, 12, reason="bound", failed=12)
    assert lane_stop_text(holes) == "holes: 12 ids refetched"
    partly = LaneInfo("g:holes", "holes", 0, 1, 11, 0, 5, reason="closespider_timeout")
    assert lane_stop_text(partly) == "holes: 5 of 12 ids refetched, closed early (closespider_timeout)"


def test_lane_position_shows_the_share_of_a_bounded_lane() -> None:
    assert lane_position_text(asc(cursor=13057)) == "asc at 13057"
    assert lane_position_text(desc(start=12344, stop=10000, cursor=12250)) == "desc at 12250 4%"
    cut = desc(reason="margin", cut_at=1121, last_found=1125)
    assert lane_position_text(cut) == "desc cut at 1121 after 4 misses (last found 1125)"


# -- lines -----------------------------------------------------------------------------------------


def gazette(**kw: object) -> TargetInfo:
    lanes = (
        asc(cursor=1184, reason="margin", cut_at=1183, last_found=1179, found=24, missing=10, past_cut=3, overshoot=1),
        desc(cursor=1120, reason="margin", cut_at=1121, last_found=1125, found=21, missing=8, past_cut=2),
    )
    return TargetInfo(**{"name": "gazette", "url": URL, "lanes": lanes, **kw})  # type: ignore[arg-type]


def test_plan_names_the_state_and_every_lane() -> None:
    fresh = TargetInfo("gazette", URL, (asc(), desc()))
    lines = plan_lines([fresh], state="state /tmp/x/idseq.sqlite")
    assert lines == [
        "plan: 1 target, 2 lanes; state /tmp/x/idseq.sqlite",
        f"plan gazette: {URL}, margin 4: asc 1150 -> no max; desc 1149 -> 0",
    ]


def test_plan_of_a_resumed_target_says_what_it_takes_from_earlier_runs() -> None:
    note = resume_text("bound", stored=True, known_found=45, finished=["desc"])
    assert note == "resumed (resume=bound): 45 found ids known, not fetched again; desc finished earlier"
    target = TargetInfo("gazette", URL, (asc(start=1180, cursor=1180),), note)
    lines = plan_lines([target], state="state off")
    assert lines[0] == "plan: 1 target, 1 lane, 1 resumed; state off"
    assert lines[1] == f"plan gazette: {URL}, margin 4: asc 1180 -> no max; {note}"


def test_resume_notes_for_fresh_and_reset_targets() -> None:
    assert resume_text("auto", stored=False) is None
    assert resume_text("reset", stored=False) is None
    assert resume_text("none", stored=False) is None
    assert resume_text("bound", stored=False) == "resume=bound: no stored state, starts fresh"
    assert resume_text("reset", stored=True) == "resume=reset: its stored state was reset, starts over"
    assert resume_text("none", stored=True) == "resume=none: its stored state was reset, starts over"
    assert resume_text("auto", stored=True, known_found=3, finished=["asc"]) == (
        "resumed (resume=auto): 3 found ids known, not fetched again; asc finished earlier")


def test_a_reset_says_what_it_forgets() -> None:
    assert forgotten_text(2, 1234, 3) == (
        "resume=reset: forgets the stored state of 2 targets (1,234 found ids, 3 lanes): they start over "
        "(their run history stays)")
    assert forgotten_text(1, 1, 1, {"none", "reset"}).startswith("resume=reset/resume=none: forgets the stored "
                                                                 "state of 1 target (1 found id, 1 lane)")


def test_progress_rate_is_over_the_time_since_the_last_line() -> None:
    target = TargetInfo("gazette", URL, (asc(cursor=1200, found=40, missing=10),))
    [line] = progress_lines([target], seconds=5.0, before={"gazette": 25})
    assert line == "progress gazette: 50 ids done (found 40, missing 10, failed 0), 5.0 ids/s; asc at 1200"
    [first] = progress_lines([target], seconds=0.0, before={})
    assert "- ids/s" in first
    assert done_by_target([target]) == {"gazette": 50}


def test_summary_per_target_has_outcomes_rate_stops_and_waste() -> None:
    lines = summary_lines([gazette()], seconds=7.42, reason="finished", state="state /tmp/x.sqlite")
    assert lines[0] == (
        "summary: finished after 7.4 s: 1 target, 63 ids done (found 45, missing 18, failed 0; 0 emitted), "
        "8.5 ids/s; 5 requests past cuts, 1 of them found, not emitted; state /tmp/x.sqlite"
    )
    assert lines[1] == (
        "summary gazette: found 45, missing 18, failed 0, 0 emitted, 8.5 ids/s; "
        "asc cut at 1183 after 4 misses (last found 1179); desc cut at 1121 after 4 misses (last found 1125); "
        "5 requests past cuts, 1 of them found, not emitted"
    )


def test_overlapping_targets_tell_found_from_emitted() -> None:
    """getting-started's demo job: two targets on one template, each walk finds the shared ids, each id's
    items go to one target; the header's emitted is what the feed holds."""
    middle = TargetInfo("middle", URL, (asc(found=300, emitted=220), asc(key="middle:desc", found=100, emitted=80)))
    newest = TargetInfo("newest", URL, (asc(key="newest:desc", found=400, emitted=100),))
    lines = summary_lines([middle, newest], seconds=1.0, reason="finished", state="state off")
    assert "(found 800, missing 0, failed 0; 400 emitted)" in lines[0]
    assert lines[1].startswith("summary middle: found 400, missing 0, failed 0, 300 emitted, ")
    assert lines[2].startswith("summary newest: found 400, missing 0, failed 0, 100 emitted, ")


def test_the_found_ids_known_from_earlier_runs_are_found_and_not_emitted() -> None:
    """A resumed run's lanes count the found ids of earlier runs they passed (as the ``idcrawl/found`` stat
    does: tests/crawl/test_resume_crawl.py); they are not emitted again."""
    target = TargetInfo("g", URL, (asc(found=162, emitted=161),))
    [header, line] = summary_lines([target], seconds=1.0, reason="finished", state="state off", known=1)
    assert "(found 162, missing 0, failed 0; 161 emitted)" in header
    assert "1 found id known from earlier runs" in header
    assert line.startswith("summary g: found 162, missing 0, failed 0, 161 emitted, ")


def test_disallowed_ids_show_only_when_there_are_some() -> None:
    target = TargetInfo("g", URL, (asc(reason="bound", stop=1159, cursor=1160, found=8, disallowed=2),))
    line = summary_lines([target], seconds=1.0, reason="finished", state="state off")[1]
    assert "found 8, missing 0, failed 0, disallowed 2" in line
    assert "past cuts" not in line


def test_a_worker_says_its_counts_are_its_own_share() -> None:
    lines = summary_lines([gazette()], seconds=1.0, reason="finished", state="state in Redis job 'j'",
                          scope=" by this worker")
    assert "found 45, missing 18, failed 0 by this worker," in lines[1]
    [progress] = progress_lines([gazette()], seconds=1.0, before={}, scope=" by this worker")
    assert "63 ids done by this worker (" in progress


def test_targets_past_the_shown_ones_are_one_line_of_sums() -> None:
    rest = Tally(targets=4980)
    for _ in range(4980):
        rest.add_lane(2, 1, 0, 0, 1, 0, "margin")
    rest.add_lane(0, 0, 0, 0, 0, 0, None)
    plan = plan_lines([gazette()], state="state off", rest=rest)
    assert plan[0] == "plan: 4,981 targets, 4,983 lanes; state off"
    assert plan[-1] == "plan and 4,980 more targets (4,981 lanes): fresh"
    progress = progress_lines([gazette()], seconds=10.0, before={"": 0}, rest=rest)
    assert len(progress) == 2
    assert progress[1] == (
        "progress and 4,980 more targets (4,981 lanes): 14,940 ids done (found 9,960, missing 4,980, failed 0), "
        "1,494 ids/s; lanes: 4,980 cut, 1 running"
    )
    summary = summary_lines([gazette()], seconds=10.0, reason="finished", state="state off", rest=rest)
    assert len(summary) == 3
    assert summary[0].startswith("summary: finished after 10.0 s: 4,981 targets, 15,003 ids done")
    assert summary[2] == (
        "summary and 4,980 more targets (4,981 lanes): found 9,960, missing 4,980, failed 0, 0 emitted; "
        "lanes: 4,980 cut, 1 running; 4,980 requests past cuts"
    )


# -- snapshot (the extension's copy of the frontier) ---------------------------------------------------


def test_snapshot_shows_the_first_targets_and_sums_the_others() -> None:
    raws = [{"url": f"https://h{i}.example/{{id}}", "start": "10", "margin": "2", "name": f"t{i}"}
            for i in range(15)]
    frontier: Frontier[object] = Frontier(parse_targets(raws))
    for _ in range(3):  # each lane dispenses its ids 10, 11, 12
        for _ in range(15):
            frontier.next()
    for i in range(15):
        frontier.record(f"t{i}:asc", 10, Outcome.FOUND, object())
        frontier.record(f"t{i}:asc", 11, Outcome.MISSING)
        frontier.record(f"t{i}:asc", 12, Outcome.MISSING)
    totals = {"idcrawl/found": 15, "idcrawl/missing": 30}  # what IdRuntime keeps in stats
    runtime = SimpleNamespace(frontier=frontier, resume_notes={"t12": "resumed (resume=bound): 1 found id known"},
                              stats=SimpleNamespace(get_value=totals.get))
    keys = shown_lanes(runtime, 10)  # type: ignore[arg-type]
    assert keys == {f"t{i}": [f"t{i}:asc"] for i in range(10)}
    shown, rest = snapshot(runtime, keys, full=True)  # type: ignore[arg-type]
    assert [t.name for t in shown] == [f"t{i}" for i in range(10)]
    assert shown[0].lanes[0].found == 1 and shown[0].lanes[0].cut_at == 12
    assert (rest.targets, rest.lanes, rest.found, rest.missing, rest.resumed) == (5, 5, 5, 10, 1)
    assert rest.states == {"cut": 5}
    # progress lines: the others from the job's totals, without a pass over their lanes
    shown_again, cheap = snapshot(runtime, keys, full=False)  # type: ignore[arg-type]
    assert shown_again == shown
    assert (cheap.targets, cheap.lanes, cheap.found, cheap.missing) == (5, 5, 5, 10)
    assert not cheap.states


def test_the_summary_says_how_many_found_ids_came_from_earlier_runs() -> None:
    header = summary_lines([gazette()], seconds=1.0, reason="finished", state="state off", known=12)[0]
    assert "; 12 found ids known from earlier runs, not fetched again; state off" in header


# -- any numbers -------------------------------------------------------------------------------------

lane_infos = st.builds(
    LaneInfo,
    key=st.just("t:asc"),
    direction=st.sampled_from(["asc", "desc", "holes"]),
    start=st.integers(0, 10**20),
    step=st.sampled_from([1, -1]),
    stop=st.none() | st.integers(0, 10**20),
    margin=st.integers(0, 50),
    cursor=st.integers(-1, 10**20),
    reason=st.none() | st.sampled_from(["margin", "bound", "limit:TTMAX", "shutdown", "closespider_timeout"]),
    cut_at=st.none() | st.integers(0, 10**20),
    last_found=st.none() | st.integers(0, 10**20),
    found=st.integers(0, 10**6),
    missing=st.integers(0, 10**6),
    failed=st.integers(0, 10**6),
    disallowed=st.integers(0, 10**6),
    past_cut=st.integers(0, 10**3),
    overshoot=st.integers(0, 10**3),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    targets=st.lists(st.lists(lane_infos, max_size=3), max_size=4),
    seconds=st.none() | st.floats(0, 10**6),
    rest_targets=st.integers(0, 3),
)
def test_every_line_set_has_a_header_a_line_per_target_and_one_for_the_rest(
    targets: list[list[LaneInfo]], seconds: float | None, rest_targets: int
) -> None:
    infos = [TargetInfo(f"t{i}", URL, tuple(lanes)) for i, lanes in enumerate(targets)]
    rest = Tally(targets=rest_targets)
    extra = 1 if rest_targets else 0
    plan = plan_lines(infos, state="state off", rest=rest)
    progress = progress_lines(infos, seconds=seconds, before={}, rest=rest)
    summary = summary_lines(infos, seconds=seconds, reason="finished", state="state off", rest=rest)
    assert len(plan) == 1 + len(infos) + extra
    assert len(progress) == len(infos) + extra
    assert len(summary) == 1 + len(infos) + extra
    for line in plan + progress + summary:
        assert "\n" not in line and "None" not in line
        if not seconds:
            assert " 0.0 ids/s" not in line  # no time known: a dash, never a made-up zero


def test_every_line_is_one_printable_line_with_a_template_password_masked() -> None:
    """A name read from an older state file, or a template with credentials: never a forged line."""
    name = "t\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)\x1b[2J"
    target = TargetInfo(name, "https://user:s3cret@gazette.example/notice/{id}", (asc(found=3, cursor=1153),))
    lines = [
        *plan_lines([target], state="state /tmp/x.sqlite"),
        *progress_lines([target], seconds=1.0, before={}),
        *summary_lines([target], seconds=1.0, reason="finished", state="state /tmp/x.sqlite"),
    ]
    assert len(lines) == 5
    for line in lines:
        assert line.isprintable() and "s3cret" not in line, line
    assert "plan t\\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)\\x1b[2J: " \
           "https://user:***@gazette.example/notice/{id}" in lines[1]
