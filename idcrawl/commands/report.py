"""The resume plan of a job's state: for people (rich tables) and scripts (JSON).

``scrapy idplan`` is a thin shell around :func:`collect`, :func:`render_plan` and :func:`plan_document`
(the JSON: docs/reference/idplan-json.md). More: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from pyroaring import BitMap64
from rich.console import Console
from rich.table import Table
from rich.text import Text

from idcrawl.core.clock import stamp
from idcrawl.core.frontier import lane_specs
from idcrawl.core.lanes import BOUND, MARGIN, Outcome
from idcrawl.core.ranges import LanePlan, LaneRecord, plan_lane, run_bounds, runs
from idcrawl.core.recrawl import MIN_GAP_RUNS, MarginAdvice, Schedule, duration_text, margin_advice
from idcrawl.core.safetext import mask_secrets, safe
from idcrawl.core.targets import Target
from idcrawl.state.base import RunRecord, StateStore, TargetState

__all__ = [
    "HOLE_KINDS",
    "PLAN_FORMAT",
    "IdSummary",
    "LaneView",
    "ReportError",
    "TargetView",
    "advice_text",
    "collect",
    "format_runs",
    "histogram_lines",
    "last_run_of",
    "plan_document",
    "plan_rows",
    "render_plan",
    "run_line",
    "summarize",
    "target_view",
    "watch_text",
    "write_json",
]

#: Version of the JSON document of ``scrapy idplan --json``.
PLAN_FORMAT = 1
#: The kinds of holes, in the order they are shown.
HOLE_KINDS = (Outcome.MISSING, Outcome.FAILED, Outcome.DISALLOWED)


class ReportError(Exception):
    """A request the state cannot answer (unknown target); the message is one line."""


# -- id sets ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdSummary:
    """An id set as a count, its number of runs, and its first and last runs.

    ``head`` holds every run when there are at most ``2 * keep`` of them (then
    ``tail`` is empty); otherwise the first and last ``keep`` runs, and
    ``omitted`` says how many lie between.
    """

    count: int
    runs: int
    head: tuple[tuple[int, int], ...]
    tail: tuple[tuple[int, int], ...]

    @property
    def omitted(self) -> int:
        return self.runs - len(self.head) - len(self.tail)

    def as_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "runs": self.runs,
            "head": [list(run) for run in self.head],
            "tail": [list(run) for run in self.tail],
            "omitted": self.omitted,
        }


def summarize(ids: BitMap64, keep: int = 3) -> IdSummary:
    """Count, runs and the first/last ``keep`` runs of ``ids`` (``keep`` <= 0: every run).

    Costs O(runs shown x log) after two bitmap operations (:func:`run_bounds`), not O(ids): a
    10,000,000-id set is summarized without walking it.
    """
    count = len(ids)
    if not count:
        return IdSummary(0, 0, (), ())
    firsts, lasts = run_bounds(ids)
    n_runs = len(firsts)
    if keep <= 0 or n_runs <= 2 * keep:
        return IdSummary(count, n_runs, tuple(zip(firsts, lasts, strict=True)), ())
    head = tuple((firsts[k], lasts[k]) for k in range(keep))
    tail = tuple((firsts[k], lasts[k]) for k in range(n_runs - keep, n_runs))
    return IdSummary(count, n_runs, head, tail)


def _run_text(run: tuple[int, int]) -> str:
    first, last = run
    return str(first) if first == last else f"{first}-{last}"


def format_runs(summary: IdSummary) -> str:
    """``3-4, 7-8, 10-12`` or ``1-5, 7, 9 ... 90-95, 99 (120 runs)``."""
    if not summary.count:
        return "none"
    text = ", ".join(_run_text(run) for run in summary.head)
    if summary.tail:
        text += f" ... {', '.join(_run_text(run) for run in summary.tail)}"
    return text


def _count_text(summary: IdSummary) -> str:
    if not summary.count:
        return "none"
    ids = "1 id" if summary.count == 1 else f"{summary.count} ids"
    runs = "1 run" if summary.runs == 1 else f"{summary.runs} runs"
    return f"{ids} in {runs}"


# -- views --------------------------------------------------------------------------


@dataclass(slots=True)
class LaneView:
    record: LaneRecord
    plan: LanePlan

    @property
    def direction(self) -> str:
        return "asc" if self.record.step > 0 else "desc"

    @property
    def key(self) -> str:
        return self.record.key

    def holes(self, kind: Outcome) -> BitMap64:
        return self.plan.holes.get(kind, BitMap64())


@dataclass(slots=True)
class TargetView:
    """One target's plan: its lanes and what the store knows about it."""

    name: str
    in_state: bool  # False: named by the job file, never recorded
    params: dict[str, Any]
    lanes: list[LaneView]
    #: The last run that crawled this target (:func:`last_run_of`); its ``targets`` is None
    #: when the state does not record which targets its runs crawled (an older file).
    last_run: RunRecord | None
    minimum: int | None
    maximum: int | None
    #: the tail's recrawl schedule (None: no run walked the tail to its margin yet)
    tail: Schedule | None = None
    #: what the found ids' gap runs say about the margin (None: fewer than two found ids)
    advice: MarginAdvice | None = None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def target_view(
    name: str, state: TargetState | None, target: Target | None = None, last_run: RunRecord | None = None,
    tail: Schedule | None = None,
) -> TargetView:
    """The plan of one target: its stored lanes, plus the job's lanes never recorded; its tail's
    schedule and the margin advice of its found ids."""
    records: dict[str, LaneRecord] = dict(state.lanes) if state is not None else {}
    if target is not None:
        for spec in lane_specs(target):
            if spec.key not in records:  # never started: everything is still to crawl
                records[spec.key] = LaneRecord(spec.key, spec.start, spec.step, spec.stop, spec.start)
    outcomes = dict(state.outcomes) if state is not None else {}
    ordered = sorted(records.values(), key=lambda r: (-r.step, r.key))
    lanes = [LaneView(record, plan_lane(record, outcomes)) for record in ordered]
    params = dict(state.params) if state is not None else {}
    minimum = _int_or_none(params.get("min"))
    maximum = _int_or_none(params.get("max"))
    if target is not None:
        minimum = target.min if minimum is None else minimum
        maximum = target.max if maximum is None else maximum
    for lane in lanes:
        if lane.record.stop is not None and lane.record.step < 0 and minimum is None:
            minimum = lane.record.stop
        if lane.record.stop is not None and lane.record.step > 0 and maximum is None:
            maximum = lane.record.stop
    found = outcomes.get(Outcome.FOUND, BitMap64())
    advice = margin_advice(found, target.margin if target is not None else margin_in_use(lanes)) \
        if len(found) >= 2 else None
    return TargetView(name, state is not None, params, lanes, last_run, minimum, maximum, tail, advice)


def margin_in_use(lanes: Iterable[LaneView]) -> int | None:
    """The margin the stored lanes were cut by (the smallest distance from a last found id to its
    cut); None when no lane was cut after a found id. A failed id does not count toward the margin,
    so a cut past one overstates it: ``--job`` gives the target's own margin."""
    distances = [abs(lane.record.cut_at - lane.record.last_found) for lane in lanes
                 if lane.record.reason == MARGIN and lane.record.cut_at is not None
                 and lane.record.last_found is not None]
    return min(distances) if distances else None


def last_run_of(runs: Sequence[RunRecord], name: str) -> RunRecord | None:
    """The last of ``runs`` that crawled target ``name``.

    One state file may serve many jobs (every ``idseq`` run without ``JOBDIR``
    shares ``.scrapy/idcrawl/idseq.sqlite``), so the store's last run may not
    have crawled this target. A run that did not record its targets (a state
    written by an older idcrawl) may have: then it is the answer, and its
    ``targets`` None says that this is not known.
    """
    for run in reversed(runs):
        if run.took_part(name) is not False:
            return run
    return None


def wanted_targets(store: StateStore, names: Iterable[str], job: Sequence[Target]) -> list[str]:
    """The named targets and the job's, in that order (every stored target if neither); a named target
    the store does not hold is a :class:`ReportError` naming it and what the store has."""
    known = store.targets()
    names = list(names)
    for name in names:
        if name not in known:
            listed = ", ".join(repr(k) for k in known[:10]) + (", ..." if len(known) > 10 else "")
            raise ReportError(f"unknown target {name!r} (the state file has {listed or 'no targets'})")
    return list(dict.fromkeys([*names, *(t.name for t in job)])) if names or job else known


def collect(store: StateStore, names: Iterable[str] = (), job: Sequence[Target] = ()) -> list[TargetView]:
    """Views of the named targets and the job's targets; of every stored target if neither.

    A named target the store does not hold is an error; a job's target that was
    never crawled is shown with all of its range still to crawl.
    """
    wanted = wanted_targets(store, names, job)
    by_name = {t.name: t for t in job}
    runs = store.runs()
    tails = store.tail_schedules()
    views = []
    for name in wanted:
        state = store.load(name)
        last_run = last_run_of(runs, name) if state is not None else None  # never crawled: no run of it
        views.append(target_view(name, state, by_name.get(name), last_run, tails.get(name)))
    return views


# -- text ---------------------------------------------------------------------------


def _span_text(plan: LanePlan) -> str:
    if plan.span is None:
        return "nothing yet"
    first, last = plan.span
    return f"{first} -> {last} ({abs(last - first) + 1} ids)"


def _bound_text(plan: LanePlan) -> str:
    if plan.bound is None:
        return "finished"
    first, last = plan.bound
    return f"{first} -> {'unbounded' if last is None else last}"


def _walk_text(lane: LaneView) -> str:
    record = lane.record
    if record.stop is None:
        return f"{lane.direction} from {record.start}, unbounded"
    return f"{lane.direction} from {record.start} to {'max' if record.step > 0 else 'min'} {record.stop}"


def _cut_text(lane: LaneView) -> str:
    record = lane.record
    if record.reason is None:
        return "not stopped (running, or killed)" if lane.plan.span is not None else "not started"
    if record.reason == MARGIN and record.cut_at is not None:
        found = "nothing found" if record.last_found is None else f"last found {record.last_found}"
        return f"margin, at {record.cut_at} ({found})"
    if record.reason == BOUND:
        return f"bound, reached {record.stop}" if record.stop is not None else "bound"
    return f"{record.reason} (stopped before {record.cursor})"


#: Said of a run that did not record its targets (a state file written before idcrawl recorded them).
UNKNOWN_TARGETS = "the state's last run; this older state file does not record which targets a run crawled"


def run_line(run: RunRecord | None) -> str:
    if run is None:
        return "none recorded for this target"
    if run.ended_at is None:
        line = f"#{run.id} started {run.started_at}, no end recorded (running, or killed)"
    else:
        line = f"#{run.id} {run.started_at} -> {run.ended_at}, {run.finish_reason}"
    if run.watch is not None:
        line += f"; {watch_text(run.watch)}"
    return line if run.targets is not None else f"{line} ({UNKNOWN_TARGETS})"


def watch_text(watch: dict[str, int]) -> str:
    """A watch session's counters (its run row): ``watch session: 3 waves, 120 fetches, 7 with news``."""
    return (f"watch session: {watch.get('waves', 0)} waves, {watch.get('fetches', 0)} fetches, "
            f"{watch.get('news', 0)} with news")


def tail_text(tail: Schedule | None) -> str:
    """The tail's learned duration and when it is due again."""
    if tail is None:
        return "no schedule yet (no run walked it to its margin)"
    found = "nothing found" if tail.last_found is None else f"last found {tail.last_found}"
    return (f"learned duration {duration_text(tail.update_duration)}; last crawled {stamp(tail.last_crawled)}, "
            f"due after {stamp(tail.due_at())}; {found}; {tail.revision} with news")


def advice_text(advice: MarginAdvice | None) -> str:
    """The margin advice: the chance the margin in use cut a lane early, the margin that keeps it under 1%
    (never below the largest gap seen plus one), the sample size and the largest gap; or why there is none."""
    if advice is None:
        return "fewer than two found ids: no gap runs to learn from"
    sample = f"{advice.runs:,} gap runs, largest {advice.largest:,}"
    if advice.advised is None:
        return (f"too few gap runs to advise ({sample}; {MIN_GAP_RUNS} or more needed): "
                f"keep a margin above {advice.largest:,}")
    text = f"margin {advice.advised} keeps the chance of an early cut under {advice.risk:.0%}"
    if advice.margin is not None and advice.early_cut is not None:
        text = (f"margin {advice.margin} cuts a lane before its real end with chance {advice.early_cut:.2%}; "
                + text)
    text += f" (from {sample}"
    if advice.basis == "largest":
        text += "; the gaps are shorter than a geometric fit says: the largest plus one"
    if advice.censored:
        text += (f"; censored by the margin: {advice.censored} reached {advice.margin - 1 if advice.margin else 0}"
                 " or more, a longer one cut the lane, so this is a lower bound")
    return text + ")"


#: The width of the longest bar of :func:`histogram_lines`.
BAR_WIDTH = 40


def histogram_lines(histogram: Sequence[tuple[int, int, int]], width: int = BAR_WIDTH) -> list[str]:
    """The gap-length histogram as a text picture, one line per bucket: the lengths, a bar of ``#``
    (its length against the largest count, on a log scale so that one gap among thousands shows), the count."""
    if not histogram:
        return []
    top = max(count for _, _, count in histogram)
    scale = math.log1p(top)
    lines = []
    for low, high, count in histogram:
        label = f"{low:,}" if low == high else f"{low:,}-{high:,}"
        bar = "#" * max(1, round(width * math.log1p(count) / scale)) if count else ""
        lines.append(f"{label:>13} | {bar} {count:,}".rstrip() if count else f"{label:>13} |")
    return lines


def lane_rows(lane: LaneView, keep: int = 3) -> list[tuple[str, str]]:
    """(field, value) lines of one lane, as the table shows them."""
    rows = [("walk", _walk_text(lane)), ("crawled", _span_text(lane.plan))]
    content = summarize(lane.plan.content, keep)
    rows.append(("content", _count_text(content) + (f": {format_runs(content)}" if content.count else "")))
    for kind in HOLE_KINDS:
        holes = summarize(lane.holes(kind), keep)
        rows.append((f"{kind.value}", _count_text(holes) + (f": {format_runs(holes)}" if holes.count else "")))
    rows.append(("bound", _bound_text(lane.plan)))
    rows.append(("cut", _cut_text(lane)))
    return rows


def plan_table(view: TargetView, keep: int = 3) -> Table:
    """The lanes of one target: one row per field, one column per lane."""
    table = Table(show_lines=False)
    table.add_column("", style="bold", no_wrap=True)
    for lane in view.lanes:
        table.add_column(Text(safe(lane.key)), overflow="fold")
    per_lane = [lane_rows(lane, keep) for lane in view.lanes]
    for index, (field, _) in enumerate(per_lane[0] if per_lane else []):
        table.add_row(Text(field), *(Text(safe(rows[index][1])) for rows in per_lane))
    return table


def target_heading(view: TargetView) -> Text:
    """``target NAME  URL`` and the last run (or why there is none), two lines."""
    heading = Text(f"target {safe(view.name)}", style="bold")
    url = view.params.get("url")
    if url:
        heading.append(f"  {safe(url)}", style="")
    if view.in_state:
        heading.append(f"\nlast run: {safe(run_line(view.last_run))}", style="")
        if any(lane.direction == "asc" for lane in view.lanes):
            heading.append(f"\ntail: {tail_text(view.tail)}", style="")
        heading.append(f"\nmargin advice: {advice_text(view.advice)}", style="")
        if view.advice is not None and view.advice.histogram:
            heading.append("\ngap lengths (missing ids between found ids):\n", style="")
            heading.append("\n".join(histogram_lines(view.advice.histogram)), style="")
    else:
        heading.append("\nnever crawled: no state recorded for this target", style="")
    return heading


def plan_rows(views: Sequence[TargetView], keep: int = 3) -> list[list[str]]:
    """``idplan --format tsv``: a header, then one row per target field and per lane field."""
    rows = [["target", "lane", "field", "value"]]
    for view in views:
        name = safe(view.name)
        url = view.params.get("url")
        if url:
            rows.append([name, "", "url", safe(url)])
        if not view.in_state:
            rows.append([name, "", "last run", "never crawled: no state recorded for this target"])
            continue
        rows.append([name, "", "last run", safe(run_line(view.last_run))])
        if any(lane.direction == "asc" for lane in view.lanes):
            rows.append([name, "", "tail", tail_text(view.tail)])
        rows.append([name, "", "margin advice", advice_text(view.advice)])
        for lane in view.lanes:
            rows.extend([name, safe(lane.key), field, safe(value)] for field, value in lane_rows(lane, keep))
    return [[" ".join(cell.split()) for cell in row] for row in rows]


def render_plan(views: Sequence[TargetView], console: Console, *, keep: int = 3, state: str | None = None) -> None:
    """Print one table per target (fields as rows, lanes as columns)."""
    if state is not None:
        console.print(Text(f"state file {safe(state)}"))
    if not views:
        console.print(Text("no targets in the state"))
        return
    for view in views:
        console.print()
        console.print(target_heading(view))
        console.print(plan_table(view, keep) if view.lanes else Text("no lanes recorded"))


# -- JSON -----------------------------------------------------------------------------


class _StreamedRuns(list):  # type: ignore[type-arg]
    """Every run of a set as ``[first, last]``, walked when iterated and never held: for
    :func:`write_json` only (``json``'s encoder with an indent iterates a list; ``==`` would see it empty)."""

    def __init__(self, ids: BitMap64) -> None:
        super().__init__()
        self._ids = ids

    def __iter__(self) -> Iterator[list[int]]:
        return ([first, last] for first, last in runs(self._ids))

    def __bool__(self) -> bool:
        return bool(self._ids)


def _summary_json(ids: BitMap64, keep: int, stream: bool) -> dict[str, Any]:
    """``summarize(ids, keep).as_json()``; with ``stream`` and every run asked for, its runs are walked
    as the document is written (:func:`write_json`), not listed first."""
    if not stream or keep > 0 or not ids:
        return summarize(ids, keep).as_json()
    return {"count": len(ids), "runs": len(run_bounds(ids)[0]), "head": _StreamedRuns(ids), "tail": [], "omitted": 0}


def write_json(document: Any, out: TextIO) -> None:
    """``json.dumps(document, indent=2)`` and a newline, written as it is encoded (byte for byte the same)."""
    batch: list[str] = []
    for chunk in json.JSONEncoder(indent=2).iterencode(document):
        batch.append(chunk)
        if len(batch) >= 8192:
            out.write("".join(batch))
            batch.clear()
    out.write("".join(batch) + "\n")


def _lane_json(lane: LaneView, keep: int, stream: bool = False) -> dict[str, Any]:
    record, plan = lane.record, lane.plan
    span = None
    if plan.span is not None:
        span = {"first": plan.span[0], "last": plan.span[1], "ids": abs(plan.span[1] - plan.span[0]) + 1}
    return {
        "key": record.key,
        "direction": lane.direction,
        "start": record.start,
        "stop": record.stop,
        "cursor": record.cursor,
        "last_found": record.last_found,
        "cut_at": record.cut_at,
        "cut_reason": record.reason,
        "span": span,
        "content": _summary_json(plan.content, keep, stream),
        "holes": {kind.value: _summary_json(lane.holes(kind), keep, stream) for kind in HOLE_KINDS},
        "bound": None if plan.bound is None else {"from": plan.bound[0], "to": plan.bound[1]},
        "finished": plan.finished,
    }


def _run_json(run: RunRecord | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "id": run.id, "started_at": run.started_at, "ended_at": run.ended_at, "finish_reason": run.finish_reason,
        "targets": run.targets, "watch": run.watch,
    }


def tail_json(tail: Schedule | None) -> dict[str, Any] | None:
    """A tail's schedule in ``idplan --json`` (None: no schedule); ``iddue --json`` has the same fields."""
    return None if tail is None else tail_fields(tail)


def tail_fields(tail: Schedule | None) -> dict[str, Any]:
    """The fields of a tail's schedule in the JSON documents (each None without a schedule)."""
    return {
        "last_crawled": stamp(tail.last_crawled) if tail else None,
        "update_duration": tail.update_duration if tail else None,
        "due_at": stamp(tail.due_at()) if tail else None,
        "last_found": tail.last_found if tail else None,
        "revision": tail.revision if tail else None,
    }


def _advice_json(advice: MarginAdvice | None) -> dict[str, Any] | None:
    if advice is None:
        return None
    return {
        "gap_runs": advice.runs, "r": advice.r, "margin": advice.margin, "early_cut_chance": advice.early_cut,
        "advised_margin": advice.advised, "risk": advice.risk, "censored_runs": advice.censored,
        "largest_gap": advice.largest, "basis": advice.basis,
        "gap_histogram": [{"from": low, "to": high, "count": count} for low, high, count in advice.histogram],
    }


def _params_json(params: dict[str, Any]) -> dict[str, Any]:
    """A target's stored parameters, the password of its URL masked."""
    url = params.get("url")
    return {**params, "url": mask_secrets(url)} if isinstance(url, str) else params


def plan_document(
    views: Sequence[TargetView], *, state: str | None = None, keep: int = 3, stream: bool = False,
) -> dict[str, Any]:
    """The plan as a JSON-ready dict (``json.dumps`` it); docs/reference/idplan-json.md has the shape.
    ``stream``: id runs are walked while :func:`write_json` writes it (only that may write it)."""
    return {
        "format": PLAN_FORMAT,
        "state": None if state is None else mask_secrets(state),
        "targets": [
            {
                "name": view.name,
                "in_state": view.in_state,
                "params": _params_json(view.params),
                "min": view.minimum,
                "max": view.maximum,
                "last_run": _run_json(view.last_run),
                "tail": tail_json(view.tail),
                "margin_advice": _advice_json(view.advice),
                "lanes": [_lane_json(lane, keep, stream) for lane in view.lanes],
            }
            for view in views
        ],
    }
