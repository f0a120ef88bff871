"""Lanes: one direction of one target, with its cursor, window and margin.

The margin rule is applied to outcomes **in lane order**, never in the order
responses arrive, which is what makes a crawl's result independent of
concurrency. A found id whose position is not yet safe (a cut could still
happen before it) is held until it is; ids decided past a cut are overshoot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Generic, TypeVar, cast

__all__ = ["BEHIND_WINDOWS", "Lane", "LaneCounts", "Outcome", "Recorded"]

P = TypeVar("P")


class Outcome(StrEnum):
    """Final outcome of one id. ``pending`` is implied by absence."""

    FOUND = "found"
    MISSING = "missing"
    FAILED = "failed"
    DISALLOWED = "disallowed"  # robots.txt: never fetched


#: Why a lane stopped dispensing. Further reasons (limits) are free-form strings.
MARGIN = "margin"
BOUND = "bound"

#: The largest id the state can hold (roaring ``BitMap64``: 0..2**64-1): an ascending lane
#: without a stop ends there (reason ``bound``); idcrawl.core.targets refuses larger ids.
MAX_ID = 2**64 - 1

#: How far an adaptive lane may run on past ids still waiting for an outcome that can no longer
#: change where it is cut (a retry cooling down): this many windows from its first undecided id.
#: It bounds the outcomes the lane keeps in memory until that id is decided.
BEHIND_WINDOWS = 64

#: what a lane holds before its first outcome: one read-only empty mapping shared by every lane (a dict
#: of its own is made at the first write), so a job of many targets keeps no two dicts per lane it never walked
_NOTHING: dict[Any, Any] = cast("dict[Any, Any]", MappingProxyType({}))


@dataclass(slots=True)
class LaneCounts:
    dispensed: int = 0
    found: int = 0
    missing: int = 0
    failed: int = 0
    disallowed: int = 0
    emitted: int = 0
    overshoot: int = 0
    past_cut: int = 0  # every id decided past the cut, found or not

    @property
    def decided(self) -> int:
        return self.found + self.missing + self.failed + self.disallowed


@dataclass(slots=True)
class Recorded(Generic[P]):
    """What recording one outcome changed."""

    released: list[P] = field(default_factory=list)
    released_ids: list[int] = field(default_factory=list)  # the ids of ``released``, in the same order
    overshoot: bool = False
    became_ready: bool = False
    stopped: bool = False


class Lane(Generic[P]):
    """Walks ids from ``start`` by ``step`` (+1 or -1) until ``stop`` or a cut.

    ``stop`` is the inclusive last id (None: unbounded). ``window`` bounds how
    far dispensing may run ahead of the first undecided id, which bounds both
    the requests wasted past a cut and the memory the lane holds.

    An ``adaptive`` lane changes only how far ahead it dispenses, never what it
    decides (the margin rule is the same):

    - *Speculation follows the evidence.* Its *earliest possible cut* is where
      the margin would cut it if every id without an outcome (in flight, or
      not dispensed yet) were a miss. The real cut can only come at or after
      it, so the lane dispenses at most ``speculation`` ids past it (``margin``
      unless given): while found ids keep arriving it moves on and the lane runs
      at full concurrency; as misses gather, dispensing stops, and a found id
      moves it again. The requests wasted past the real cut are then at most
      ``speculation``, at any concurrency; with ``speculation = 0`` none (the
      earliest possible cut only moves on, so every id dispensed is within the
      real cut).
    - *A reach walks to a known id.* With ``reach`` (an id on the walk: the highest id a sitemap listed
      for a tail, :mod:`idcrawl.core.resume`), misses at or before it do not count toward the margin:
      the cut is counted from the later of the last found id and the reach, whatever the misses on
      the way. The earliest possible cut and the window base follow the same rule.
    - *An undecided id that cannot change the cut does not hold the window.*
      The window is counted from just after the last found id before the
      earliest possible cut (the *window base*), not from the first undecided
      id: an id waiting out a retry cool-down with a found id close behind it
      no longer stalls the lane. Found ids before the earliest possible cut are
      released, as always. The lane still runs at most :data:`BEHIND_WINDOWS`
      windows past its first undecided id (its memory).
    """

    __slots__ = (
        "_base",
        "_decided",
        "_held",
        "_pcut",
        "adaptive",
        "counts",
        "cut_at",
        "first_undecided",
        "key",
        "last_found",
        "margin",
        "miss_run",
        "neutral",
        "next_id",
        "reach",
        "reason",
        "speculation",
        "start",
        "step",
        "stop",
        "window",
    )

    def __init__(
        self,
        key: str,
        *,
        start: int,
        step: int,
        stop: int | None,
        margin: int,
        window: int,
        neutral: frozenset[Outcome] = frozenset(),
        adaptive: bool = False,
        speculation: int | None = None,
        reach: int | None = None,
    ) -> None:
        if step not in (1, -1):
            raise ValueError(f"step must be 1 or -1, not {step!r}")
        if window < 1:
            raise ValueError(f"window must be >= 1, not {window!r}")
        if margin < 0:
            raise ValueError(f"margin must be >= 0, not {margin!r}")
        self.key = key
        self.start = start
        self.step = step
        self.stop = stop
        self.margin = margin
        self.window = window
        #: non-found outcomes that neither extend nor reset the run of misses
        self.neutral = neutral
        #: misses at or before this id (in lane order) do not count toward the margin (None: none do not)
        self.reach = reach
        self.next_id = start
        self.first_undecided = start
        self.miss_run = 0
        self.last_found: int | None = None
        self.cut_at: int | None = None
        self.reason: str | None = None
        self.counts = LaneCounts()
        self._decided: dict[int, Outcome] = _NOTHING  # made at the first write (see _NOTHING)
        self._held: dict[int, P] = _NOTHING
        self.adaptive = adaptive
        #: an adaptive lane dispenses at most this many ids past its earliest possible cut (None: ``margin``;
        #: 0 on a download slot of concurrency 1, where an id past it could only be sent while the
        #: response that decides the cut is parsed: see :class:`idcrawl.core.frontier.Frontier`)
        self.speculation = margin if speculation is None else max(0, speculation)
        #: the earliest possible cut (adaptive lanes with a margin; None: no cut can come)
        self._pcut: int | None = self._after_reach(start) + (margin - 1) * step if adaptive and margin else None
        #: the window base of an adaptive lane (see the class docs); at least the first undecided id
        self._base = start
        if self._past_stop(start):
            self.reason = BOUND

    # -- queries ---------------------------------------------------------------

    def _past_stop(self, id_: int) -> bool:
        if id_ < 0 or id_ > MAX_ID:  # an unbounded desc lane ends at 0, an unbounded asc lane at MAX_ID
            return True
        if self.stop is None:
            return False
        return id_ > self.stop if self.step > 0 else id_ < self.stop

    def _reached(self, id_: int) -> bool:
        """``id_`` is at or before the reach: a miss there does not count toward the margin."""
        return self.reach is not None and (self.reach - id_) * self.step >= 0

    def _after_reach(self, id_: int) -> int:
        """The first id from ``id_`` on whose miss counts toward the margin."""
        reach = self.reach
        return reach + self.step if reach is not None and (reach - id_) * self.step >= 0 else id_

    def in_range(self, id_: int) -> bool:
        """Whether ``id_`` is on the lane's walk: from its start to its stop."""
        return (id_ - self.start) * self.step >= 0 and not self._past_stop(id_)

    @property
    def ahead(self) -> int:
        """Ids dispensed and not yet decided, counted from the first undecided."""
        return (self.next_id - self.first_undecided) * self.step

    @property
    def ready(self) -> bool:
        """Can dispense an id now."""
        if self.reason is not None:
            return False
        if not self.adaptive:
            return self.ahead < self.window
        step, next_id = self.step, self.next_id
        if self._pcut is not None and (next_id - self._pcut) * step > self.speculation:
            return False  # ``speculation`` (``margin``) ids past the earliest possible cut are out already
        base = self._base if (self._base - self.first_undecided) * step > 0 else self.first_undecided
        return (next_id - base) * step < self.window and self.ahead < self.window * BEHIND_WINDOWS

    @property
    def earliest_cut(self) -> int | None:
        """An adaptive lane's earliest possible cut (None: no margin, or not adaptive)."""
        return self._pcut

    @property
    def window_base(self) -> int:
        """Where the window is counted from: the first undecided id, or (adaptive) later."""
        if self.adaptive and (self._base - self.first_undecided) * self.step > 0:
            return self._base
        return self.first_undecided

    @property
    def stopped(self) -> bool:
        """Will dispense nothing more."""
        return self.reason is not None

    @property
    def settled(self) -> bool:
        """Stopped, and every id that matters has an outcome."""
        return self.reason is not None and (self.cut_at is not None or self.ahead == 0)

    @property
    def untouched(self) -> bool:
        """Nothing dispensed, decided or closed yet: the lane is as it was made."""
        return self.next_id == self.start and self.reason == (BOUND if self._past_stop(self.start) else None)

    @property
    def held(self) -> int:
        return len(self._held)

    def outstanding(self) -> list[int]:
        """Dispensed ids without an outcome, in lane order."""
        return [
            i for i in range(self.first_undecided, self.next_id, self.step) if i not in self._decided
        ]

    def share_done(self) -> float | None:
        """Fraction of a bounded lane walked so far (None when unbounded)."""
        if self.stop is None:
            return None
        total = (self.stop - self.start) * self.step + 1
        done = (self.first_undecided - self.start) * self.step
        return 1.0 if self.settled else min(1.0, max(0.0, done / total))

    # -- transitions -------------------------------------------------------------

    def dispense(self) -> int:
        if not self.ready:
            raise RuntimeError(f"lane {self.key} is not ready")
        id_ = self.next_id
        self.next_id += self.step
        self.counts.dispensed += 1
        if self._past_stop(self.next_id):
            self.reason = self.reason or BOUND
        return id_

    def close(self, reason: str) -> None:
        """Stop dispensing (a limit, a shutdown); ids in flight still count."""
        if self.reason is None:
            self.reason = reason

    def record(self, id_: int, outcome: Outcome, payload: P | None = None) -> Recorded[P]:
        """Record an id's final outcome; returns payloads now safe to emit."""
        result: Recorded[P] = Recorded()
        was_ready, was_stopped = self.ready, self.stopped
        offset = (id_ - self.first_undecided) * self.step
        if self.cut_at is not None and (id_ - self.cut_at) * self.step > 0:
            if id_ in self._decided or (id_ - self.next_id) * self.step >= 0:
                return result  # already counted, or never dispensed: ignore
            self._own_decided()[id_] = outcome  # past the cut: at most window ids
            self.counts.past_cut += 1
            if outcome is Outcome.FOUND:
                self.counts.overshoot += 1
                result.overshoot = True
            return result
        if offset < 0 or id_ in self._decided or (id_ - self.next_id) * self.step >= 0:
            return result  # already decided, or never dispensed: ignore
        self._own_decided()[id_] = outcome
        if outcome is Outcome.FOUND and payload is not None:
            if self._held is _NOTHING:
                self._held = {}
            self._held[id_] = payload
        if self._pcut is not None and (outcome is Outcome.FOUND or outcome in self.neutral):
            self._move_earliest_cut(id_)
        self._advance()
        result.released, result.released_ids = self._release_safe()
        if self.cut_at is not None and outcome is Outcome.FOUND and (id_ - self.cut_at) * self.step > 0:
            result.overshoot = True
        result.became_ready = self.ready and not was_ready
        result.stopped = self.stopped and not was_stopped
        return result

    def _own_decided(self) -> dict[int, Outcome]:
        if self._decided is _NOTHING:
            self._decided = {}
        return self._decided

    def _advance(self) -> None:
        decided = self._decided
        while self.first_undecided in decided:
            id_ = self.first_undecided
            outcome = decided.pop(id_)
            self.first_undecided += self.step
            if outcome is Outcome.FOUND:
                self.counts.found += 1
                self.miss_run = 0
                self.last_found = id_
                continue
            setattr(self.counts, outcome.value, getattr(self.counts, outcome.value) + 1)
            if outcome in self.neutral or self._reached(id_):
                continue
            self.miss_run += 1
            if self.margin and self.miss_run >= self.margin:
                self._cut(id_)
                return

    def _cut(self, at: int) -> None:
        self.cut_at = at
        self.reason = MARGIN
        for outcome in self._decided.values():
            self.counts.past_cut += 1
            if outcome is Outcome.FOUND:
                self.counts.overshoot += 1
        # found ids the prefix passed before the cut stay held for release
        self._held = {i: p for i, p in self._held.items() if (at - i) * self.step > 0}
        # ``_decided`` now only holds ids past the cut (fewer than window): kept so that
        # a duplicate outcome for one of them is not counted twice

    def _move_earliest_cut(self, at: int) -> None:
        """``at`` (not yet passed by the prefix) became found or neutral: the earliest possible
        cut may move on, and the window base with it. Costs the run of possible misses around
        ``at`` plus how far the earliest cut moves."""
        step, margin, pcut = self.step, self.margin, self._pcut
        assert pcut is not None
        if (at - pcut) * step > 0:
            return  # past the earliest cut: it cannot move it
        decided, neutral = self._decided, self.neutral
        run = 0  # possible misses in a row just before ``at``
        i = at - step
        while (i - self.first_undecided) * step >= 0:
            outcome = decided.get(i)
            if outcome is Outcome.FOUND:
                break
            if (outcome is None or outcome not in neutral) and not self._reached(i):
                run += 1
            i -= step
        else:
            run += self.miss_run
        last_found: int | None = None
        i = at
        while (i - self.next_id) * step < 0:
            outcome = decided.get(i)
            if outcome is Outcome.FOUND:
                run = 0
                last_found = i
            elif (outcome is None or outcome not in neutral) and not self._reached(i):
                run += 1
                if run >= margin:
                    self._pcut = i
                    break
            i += step
        else:  # ids not dispensed yet count as misses (those after the reach)
            self._pcut = self._after_reach(self.next_id) + (margin - run - 1) * step
        if last_found is not None and (last_found + step - self._base) * step > 0:
            self._base = last_found + step

    def _release_safe(self) -> tuple[list[P], list[int]]:
        """Emit held found ids that no cut can precede, in lane order (payloads, ids)."""
        if not self._held:
            return [], []
        if self.adaptive:  # safe: before the earliest possible cut
            pcut = self._pcut
            ids = sorted((i for i in self._held if pcut is None or (pcut - i) * self.step > 0), key=self._rank)
            released = [self._held.pop(i) for i in ids]
            self.counts.emitted += len(released)
            return released, ids
        # ids the prefix already passed are safe (a cut may have stopped right after them)
        ids = sorted((i for i in self._held if (i - self.first_undecided) * self.step < 0), key=self._rank)
        released = [self._held.pop(i) for i in ids]
        run = self.miss_run
        id_ = self.first_undecided
        last = max(self._held, key=self._rank, default=None)
        while last is not None and (last - id_) * self.step >= 0:
            outcome = self._decided.get(id_)
            if outcome is Outcome.FOUND:
                if id_ in self._held:
                    released.append(self._held.pop(id_))
                    ids.append(id_)
                run = 0
            elif (outcome is None or outcome not in self.neutral) and not self._reached(id_):
                run += 1
                if self.margin and run >= self.margin:
                    break
            id_ += self.step
        self.counts.emitted += len(released)
        return released, ids

    def _rank(self, id_: int) -> int:
        """Position in lane order (larger = later)."""
        return id_ * self.step
