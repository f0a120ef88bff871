"""Id sets and the resume plan (seed 000, "Resume strategy").

Outcomes are compressed bitmaps (pyroaring), never one row per id; a lane's plan is its content, holes
and bound (docs/resume.md). More: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice

from pyroaring import BitMap64

from idcrawl.core.lanes import BOUND, MARGIN, Outcome

__all__ = [
    "IdSet", "LanePlan", "LaneRecord", "gap_buckets", "gap_histogram", "gap_stats", "merge_outcomes", "plan_lane",
    "run_bounds", "runs",
]

IdSet = BitMap64


def run_bounds(ids: BitMap64) -> tuple[BitMap64, BitMap64]:
    """The first ids and the last ids of the maximal runs of consecutive ids of ``ids``: run ``k`` is
    ``(firsts[k], lasts[k])``. Two bitmaps of O(runs), made without walking the ids."""
    return ids - ids.shift(1), ids - ids.shift(-1)


def runs(ids: BitMap64) -> Iterator[tuple[int, int]]:
    """Maximal runs of consecutive ids, as inclusive (first, last) pairs, in order: O(runs) steps."""
    firsts, lasts = run_bounds(ids)
    return zip(firsts, lasts, strict=True)


def gap_stats(found: BitMap64, at_least: int) -> tuple[int, int, int]:
    """The gap runs between consecutive ids of ``found`` (lengths of the runs of absent ids, 0 for
    neighbours) as (how many, their total length, how many are ``>= at_least``), without listing them."""
    if len(found) < 2:
        return 0, 0, 0
    count, total = len(found) - 1, found.max() - found.min() + 1 - len(found)
    if at_least <= 0:
        return count, total, count
    firsts, lasts = run_bounds(found)
    between = zip(lasts, islice(firsts, 1, None), strict=False)  # a run's last id, the next run's first
    reached = sum(1 for last, first in between if first - last - 1 >= at_least)
    return count, total, reached


#: Gap lengths counted one by one up to this; longer ones by doubling buckets (9-16, 17-32, ...).
EXACT_GAPS = 8


def gap_buckets(largest: int) -> list[tuple[int, int]]:
    """The (first, last) gap lengths of the buckets of a gap-length histogram reaching ``largest``:
    0, 1, ..., 8, then 9-16, 17-32, ... (doubling), so 2**64 ids take at most 65 rows."""
    buckets = [(length, length) for length in range(min(largest, EXACT_GAPS) + 1)]
    low = EXACT_GAPS + 1
    while low <= largest:
        buckets.append((low, 2 * low - 2))
        low = 2 * low - 1
    return buckets


def gap_histogram(found: BitMap64) -> list[tuple[int, int, int]]:
    """The gap runs between consecutive ids of ``found`` (0 for neighbours) as a histogram: rows of
    (first length, last length, how many), every bucket (:func:`gap_buckets`) up to the largest gap,
    empty ones too. O(maximal runs of ``found``) steps, not O(ids)."""
    if len(found) < 2:
        return []
    firsts, lasts = run_bounds(found)
    lengths: dict[int, int] = {}
    for last, first in zip(lasts, islice(firsts, 1, None), strict=False):
        length = first - last - 1
        lengths[length] = lengths.get(length, 0) + 1
    neighbours = len(found) - len(firsts)  # consecutive found ids: gap runs of length 0
    if neighbours:
        lengths[0] = neighbours
    rows = [(low, high, 0) for low, high in gap_buckets(max(lengths))]
    for length, count in lengths.items():
        index = length if length <= EXACT_GAPS else EXACT_GAPS + (length - 1).bit_length() - 3
        low, high, total = rows[index]
        rows[index] = (low, high, total + count)
    return rows


def span_ids(first: int, last: int) -> BitMap64:
    """The inclusive interval [min(first, last), max(first, last)] as a set."""
    lo, hi = min(first, last), max(first, last)
    ids = BitMap64()
    ids.add_range(lo, hi + 1)
    return ids


@dataclass(slots=True)
class LaneRecord:
    """What a run leaves behind for one lane (the durable part of a Lane)."""

    key: str
    start: int
    step: int
    stop: int | None
    cursor: int  # first undecided id, in lane order
    last_found: int | None = None
    cut_at: int | None = None
    reason: str | None = None  # margin, bound, or why the run stopped it (shutdown, a limit)


@dataclass(slots=True)
class LanePlan:
    key: str
    step: int
    span: tuple[int, int] | None  # crawled span, inclusive, in lane order (first, last); None: nothing yet
    content: BitMap64 = field(default_factory=BitMap64)
    holes: dict[Outcome, BitMap64] = field(default_factory=dict)
    bound: tuple[int, int | None] | None = None  # (from, to) in lane order; to None = unbounded

    @property
    def finished(self) -> bool:
        return self.bound is None


def plan_lane(record: LaneRecord, outcomes: dict[Outcome, BitMap64]) -> LanePlan:
    """Split a lane's past into content, holes and bound."""
    step = record.step
    last = record.cursor - step  # last decided id in lane order
    crawled = (last - record.start) * step >= 0
    plan = LanePlan(record.key, step, (record.start, last) if crawled else None)
    if crawled:
        span = span_ids(record.start, last)
        plan.content = outcomes.get(Outcome.FOUND, BitMap64()) & span
        for outcome in (Outcome.MISSING, Outcome.FAILED, Outcome.DISALLOWED):
            plan.holes[outcome] = (outcomes.get(outcome, BitMap64()) & span) - plan.content
    if record.reason == BOUND and record.cut_at is None:
        plan.bound = None
    elif record.reason == MARGIN and record.cut_at is not None:
        restart = record.last_found + step if record.last_found is not None else record.start
        plan.bound = (restart, record.stop)
    else:
        plan.bound = (record.cursor, record.stop)
    if plan.bound is not None and record.stop is not None and (plan.bound[0] - record.stop) * step > 0:
        plan.bound = None
    if plan.bound is not None and plan.bound[0] < 0:
        plan.bound = None
    return plan


def merge_outcomes(
    existing: dict[Outcome, BitMap64], new: dict[Outcome, BitMap64]
) -> dict[Outcome, BitMap64]:
    """Each id keeps one outcome: found is sticky (its item was written once),
    otherwise the newer outcome replaces the older one."""
    merged = {outcome: BitMap64(ids) for outcome, ids in existing.items()}
    found = merged.setdefault(Outcome.FOUND, BitMap64())
    found |= new.get(Outcome.FOUND, BitMap64())
    for outcome, ids in new.items():
        if outcome is Outcome.FOUND or not ids:
            continue
        fresh = ids - found
        for other, other_ids in merged.items():
            if other is not outcome:
                other_ids -= fresh
        merged.setdefault(outcome, BitMap64()).__ior__(fresh)
    for outcome, ids in merged.items():
        if outcome is not Outcome.FOUND:
            ids -= found
        ids.run_optimize()
    return {outcome: ids for outcome, ids in merged.items() if ids}
