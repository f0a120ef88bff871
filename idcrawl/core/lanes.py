"""Lanes: one direction of one target, with its cursor, window and margin.

The margin rule is applied to outcomes **in lane order**, never in the order
responses arrive, which is what makes a crawl's result independent of
concurrency. A found id whose position is not yet safe (a cut could still
happen before it) is held until it is; ids decided past a cut are overshoot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

__all__ = ["Lane", "LaneCounts", "Outcome", "Recorded"]

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
    """

    __slots__ = (
        "_decided",
        "_held",
        "counts",
        "cut_at",
        "first_undecided",
        "key",
        "last_found",
        "margin",
        "miss_run",
        "neutral",
        "next_id",
        "reason",
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
        self.next_id = start
        self.first_undecided = start
        self.miss_run = 0
        self.last_found: int | None = None
        self.cut_at: int | None = None
        self.reason: str | None = None
        self.counts = LaneCounts()
        self._decided: dict[int, Outcome] = {}
        self._held: dict[int, P] = {}
        if self._past_stop(start):
            self.reason = BOUND

    # -- queries ---------------------------------------------------------------

    def _past_stop(self, id_: int) -> bool:
        if id_ < 0 or id_ > MAX_ID:  # an unbounded desc lane ends at 0, an unbounded asc lane at MAX_ID
            return True
        if self.stop is None:
            return False
        return id_ > self.stop if self.step > 0 else id_ < self.stop

    @property
    def ahead(self) -> int:
        """Ids dispensed and not yet decided, counted from the first undecided."""
        return (self.next_id - self.first_undecided) * self.step

    @property
    def ready(self) -> bool:
        """Can dispense an id now."""
        return self.reason is None and self.ahead < self.window

    @property
    def stopped(self) -> bool:
        """Will dispense nothing more."""
        return self.reason is not None

    @property
    def settled(self) -> bool:
        """Stopped, and every id that matters has an outcome."""
        return self.reason is not None and (self.cut_at is not None or self.ahead == 0)

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
            self._decided[id_] = outcome  # past the cut: at most window ids
            self.counts.past_cut += 1
            if outcome is Outcome.FOUND:
                self.counts.overshoot += 1
                result.overshoot = True
            return result
        if offset < 0 or id_ in self._decided or (id_ - self.next_id) * self.step >= 0:
            return result  # already decided, or never dispensed: ignore
        self._decided[id_] = outcome
        if outcome is Outcome.FOUND and payload is not None:
            self._held[id_] = payload
        self._advance()
        result.released, result.released_ids = self._release_safe()
        if self.cut_at is not None and outcome is Outcome.FOUND and (id_ - self.cut_at) * self.step > 0:
            result.overshoot = True
        result.became_ready = self.ready and not was_ready
        result.stopped = self.stopped and not was_stopped
        return result

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
            if outcome in self.neutral:
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

    def _release_safe(self) -> tuple[list[P], list[int]]:
        """Emit held found ids that no cut can precede, in lane order (payloads, ids)."""
        if not self._held:
            return [], []
        # ids the prefix already passed are safe (a cut may have stopped right after them)
        ids = sorted((i for i in self._held if (i - self.first_undecided) * self.step < 0), key=self._rank)
        released: list[P] = [self._held.pop(i) for i in ids]
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
            elif outcome is None or outcome not in self.neutral:
                run += 1
                if self.margin and run >= self.margin:
                    break
            id_ += self.step
        self.counts.emitted += len(released)
        return released, ids

    def _rank(self, id_: int) -> int:
        """Position in lane order (larger = later)."""
        return id_ * self.step
