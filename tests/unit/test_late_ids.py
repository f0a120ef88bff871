"""Late ids (issue 31, finding 5): ids missing below a tail's last found id, re-probed by ``resume=due``
every ``late_every``, at most ``late_max`` per re-probe, in a rotation; checked against the reference model."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from idcrawl.core.inputs import TargetError
from idcrawl.core.lanes import Outcome
from idcrawl.core.recrawl import DAY, Kind, Schedule, record_of, tail_schedule
from idcrawl.core.resume import late_due, late_ids, late_pass, resume_specs
from idcrawl.core.targets import parse_target
from idcrawl.state import decode
from tests.support.reference import late_passes_truth

T0 = 1_800_000_000.0


def target(**keys: object):
    return parse_target({"url": "http://h/{id}", "start": 0, "name": "t", "resume": "due", **keys})


def test_off_by_default_and_parsed_as_a_duration_and_a_cap() -> None:
    assert target().policy.late_every == 0 and target().policy.late_max == 1000
    policy = target(late_every="12h", late_max="5").policy
    assert (policy.late_every, policy.late_max) == (12 * 3600, 5)
    assert target(late_every="0").policy.late_every == 0
    with pytest.raises(TargetError, match="late_every"):
        target(late_every="soon")
    with pytest.raises(TargetError, match="late_max"):
        target(late_max=0)


def test_due_strictly_after_the_interval_and_only_for_a_tail_walked_once() -> None:
    t = target(late_every=3600)
    walked = tail_schedule("t", T0, 10)
    assert late_due(t, walked, T0) and not late_due(target(), walked, T0)
    assert not late_due(t, None, T0) and not late_due(t, tail_schedule("t", T0, None), T0)
    done = Schedule(Kind.TAIL, "t", T0, DAY, last_found=10, late_at=T0)
    assert not late_due(t, done, T0 + 3600) and late_due(t, done, T0 + 3600.5)
    assert not late_due(target(late_every=3600, resume="holes"), walked, T0)


def test_a_re_probe_takes_the_newest_late_ids_and_becomes_a_late_list_lane_after_the_due_pages() -> None:
    t = target(late_every=60, late_max=2)
    outcomes = {Outcome.FOUND: BitMap64([0, 1, 3, 6, 9]), Outcome.MISSING: BitMap64([2, 4, 5, 7, 8, 10, 11, 12])}
    passed = late_pass(t, tail_schedule("t", T0, 9), outcomes, T0 + 1)
    assert passed is not None and passed.ids == (8, 7)
    assert (passed.schedule.late_at, passed.schedule.late_below) == (T0 + 1, 7)
    specs = resume_specs(t, {}, outcomes, "due", walk_tail=False, due_pages=(3, 6), late=passed.ids)
    assert [(s.key, s.ids, s.refetch_found) for s in specs] == [("t:due", (3, 6), True), ("t:late", (8, 7), False)]
    assert late_ids(BitMap64([5]), BitMap64([5, 9]), None, 3) == ([], None), "found since: not late"


def test_the_tail_schedule_keeps_the_re_probe_and_refuses_a_bad_one() -> None:
    schedule = Schedule(Kind.TAIL, "t", T0, DAY, last_found=9, late_at=T0 + 5, late_below=7)
    text = json.dumps(record_of(schedule))
    assert decode.tail_record(text, "table tails", "t") == schedule
    with pytest.raises(decode.DamagedState, match="late_below"):
        decode.tail_record(text.replace('"late_below": 7', '"late_below": -1'), "table tails", "t")


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    outcomes=st.dictionaries(st.integers(0, 60), st.sampled_from(["found", "missing", "late"]), min_size=1),
    cap=st.integers(1, 8),
    passes=st.integers(1, 12),
)
def test_the_re_probes_equal_the_reference_rotation(outcomes: dict[int, str], cap: int, passes: int) -> None:
    """Passes in a row, ids published late found by the pass that takes them: the ids each pass takes
    (core.resume.late_pass on bitmaps and the schedule) equal the reference model's."""
    found = {i for i, kind in outcomes.items() if kind == "found"}
    missing = sorted(i for i, kind in outcomes.items() if kind != "found")
    late_now = {i for i, kind in outcomes.items() if kind == "late"}
    if not found:
        return
    truth = late_passes_truth(missing, found, cap, late_now.__contains__, passes)
    t = target(late_every=60, late_max=cap)
    state = {Outcome.FOUND: BitMap64(found), Outcome.MISSING: BitMap64(missing)}
    schedule = tail_schedule("t", T0, max(found))
    now, taken = T0, []
    for _ in range(passes):
        now += 61
        passed = late_pass(t, schedule, state, now)
        ids = list(passed.ids) if passed is not None else []
        taken.append(ids)
        if passed is not None:
            schedule = passed.schedule
        state[Outcome.FOUND] |= BitMap64(i for i in ids if i in late_now)
        state[Outcome.MISSING] -= BitMap64(i for i in ids if i in late_now)
    assert taken == truth
