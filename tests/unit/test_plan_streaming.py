"""idplan and idcoverage on big lanes: id runs and gap runs come from bitmaps, never from a list of the ids,
and ``idplan --json`` is written as it is encoded, byte for byte what ``json.dumps`` gave (the memory
bound on a 10,000,000-id lane, measured in a subprocess: tests/crawl/test_plan_memory.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from idcrawl.commands import report
from idcrawl.commands.report import collect, plan_document, write_json
from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord, gap_stats, runs
from idcrawl.core.recrawl import gap_runs, margin_advice
from idcrawl.state import SqliteStateStore
from tests.support.states import write_known_state


def walked_runs(ids: BitMap64) -> list[tuple[int, int]]:
    """The runs of ``ids`` found by visiting every id (the reference)."""
    found: list[tuple[int, int]] = []
    for id_ in ids:
        if found and found[-1][1] == id_ - 1:
            found[-1] = (found[-1][0], id_)
        else:
            found.append((id_, id_))
    return found


id_sets = st.lists(st.one_of(st.integers(0, 400), st.integers(2**64 - 40, 2**64 - 1)), max_size=120).map(BitMap64)


@settings(max_examples=400, derandomize=True)
@given(ids=id_sets)
def test_the_runs_of_a_set_are_those_of_walking_it(ids: BitMap64) -> None:
    assert list(runs(ids)) == walked_runs(ids)


@settings(max_examples=400, derandomize=True)
@given(ids=id_sets, margin=st.one_of(st.none(), st.integers(0, 12)))
def test_margin_advice_from_a_bitmap_equals_the_advice_from_its_gap_runs(ids: BitMap64, margin: int | None) -> None:
    lengths = gap_runs(list(ids))
    assert gap_stats(ids, margin - 1 if margin else 0)[:2] == (len(lengths), sum(lengths))
    assert margin_advice(ids, margin) == margin_advice(list(ids), margin)


def alternating_state(path: Path, ids: int) -> Path:
    """One lane of ``ids`` ids, found and missing by turns: as many runs as ids."""
    found = BitMap64(range(0, ids, 2))
    missing = BitMap64(range(1, ids, 2))
    store = SqliteStateStore(path)
    store.commit({"alt": {"url": "http://h/{id}", "start": 0, "min": None, "max": None, "direction": "asc"}},
                 {"alt": {Outcome.FOUND: found, Outcome.MISSING: missing}},
                 {"alt": {"alt:asc": LaneRecord("alt:asc", 0, 1, None, ids, ids - 2, ids - 1, "margin")}})
    store.close()
    return path


def _views(path: Path) -> list[report.TargetView]:
    store = SqliteStateStore(path, read_only=True)
    try:
        return collect(store)
    finally:
        store.close()


def test_every_run_of_a_lane_of_alternating_ids_is_walked_as_the_json_is_written(tmp_path: Path) -> None:
    views = _views(alternating_state(tmp_path / "alt.sqlite", 20_000))
    streamed = plan_document(views, state="s", keep=0, stream=True)
    content = streamed["targets"][0]["lanes"][0]["content"]
    assert isinstance(content["head"], report._StreamedRuns)
    assert list.__len__(content["head"]) == 0  # the runs are not held: walked when written
    assert (content["count"], content["runs"]) == (10_000, 10_000)
    out = io.StringIO()
    write_json(streamed, out)
    assert out.getvalue() == json.dumps(plan_document(views, state="s", keep=0), indent=2) + "\n"
    assert json.loads(out.getvalue())["targets"][0]["lanes"][0]["holes"]["missing"]["head"][:2] == [[1, 1], [3, 3]]


def test_the_streamed_json_is_byte_for_byte_the_document_for_every_keep(tmp_path: Path) -> None:
    views = _views(write_known_state(tmp_path / "known.sqlite"))
    for keep in (0, 1, 3):
        out = io.StringIO()
        write_json(plan_document(views, state="s", keep=keep, stream=True), out)
        assert out.getvalue() == json.dumps(plan_document(views, state="s", keep=keep), indent=2) + "\n"


def test_gap_runs_of_a_ten_million_id_lane_are_counted_not_listed() -> None:
    found = BitMap64()
    found.add_range(0, 10_000_000)
    found -= BitMap64(range(5, 10_000_000, 1000))  # 10,000 gaps of one id
    advice = margin_advice(found, 3)
    assert advice.runs == len(found) - 1 and advice.censored == 0
    assert margin_advice(found, 2).censored == 10_000
