"""The id frontier: every lane of every target, interleaved by weight.

This is the whole linear-crawl decision logic with no I/O: ask it for the
next (target, lane, id), tell it each id's outcome, and it says which held
payloads (items) are now safe to emit. The Scrapy scheduler and spider are
thin adapters around it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from idcrawl.core.interleave import Interleaver
from idcrawl.core.lanes import Lane, LaneCounts, Outcome, Recorded
from idcrawl.core.overlap import IdSpace, space_key
from idcrawl.core.targets import Direction, Target

__all__ = ["Dispatch", "Frontier", "IdFrontier", "LaneSpec", "Touched", "lane_specs"]

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class LaneSpec:
    """How to build one lane. A *list lane* (``ids`` given) walks those ids in
    order, by position (start 0, step 1), with no margin: resumed holes."""

    key: str
    direction: str
    start: int
    step: int
    stop: int | None
    weight: int
    ids: tuple[int, ...] | None = None
    #: fetch ids an earlier run found (due pages revisited), which other lanes skip
    refetch_found: bool = False


def lane_specs(target: Target) -> list[LaneSpec]:
    """The lanes a target walks: asc from start, desc from start (or start-1 for both)."""
    specs: list[LaneSpec] = []
    if target.direction in (Direction.ASC, Direction.BOTH):
        specs.append(LaneSpec(f"{target.name}:asc", "asc", target.start, 1, target.max, target.rate_asc))
    if target.direction in (Direction.DESC, Direction.BOTH):
        start = target.start - 1 if target.direction is Direction.BOTH else target.start
        specs.append(LaneSpec(f"{target.name}:desc", "desc", start, -1, target.min, target.rate_desc))
    return specs


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One id handed out: build the request from ``target.url_for(id)``."""

    target: Target
    lane: str
    id: int


@dataclass(slots=True)
class Touched(Generic[P]):
    """A lane that an outcome of *another* lane decided an id of (overlapping targets)."""

    lane: str
    id: int
    outcome: Outcome
    before: LaneCounts  # its counters before and after the change
    after: LaneCounts
    recorded: Recorded[P]


class IdFrontier(Protocol[P]):
    """What the runtime, the scheduler, the spider, the limits and the progress lines use of a frontier.

    Two implementations: :class:`Frontier` (lanes in this process) and
    :class:`idcrawl.distributed.frontier.RedisFrontier` (lanes of a job shared
    through Redis, whose ``lanes`` are mirrors: cursor and cut are the job's,
    counts this worker's share).
    """

    #: target name -> target
    targets: dict[str, Target]
    #: lane key -> lane (its counters, cursor, cut, reason)
    lanes: dict[str, Lane[P]]
    #: lane key -> its target
    lane_target: dict[str, Target]
    #: lane key -> ``asc``, ``desc`` or ``holes``
    lane_direction: dict[str, str]
    #: lanes that an outcome of another lane decided an id of, not yet taken
    touched: list[Touched[P]]
    #: payloads released while dispensing, not yet taken
    released: list[P]
    #: ids not fetched because an earlier run already found them
    skipped_found: int
    #: lane ids served without a request because an overlapping lane fetched them
    deduplicated: int

    def add_target(
        self, target: Target, specs: Sequence[LaneSpec] | None = None, known_found: Container[int] | None = None
    ) -> None:
        """Add a target's lanes."""

    def lanes_of(self, target_name: str) -> Iterator[Lane[P]]:
        """The lanes of one target."""

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispatch | None:
        """The next id to fetch, or None."""

    def record(self, lane_key: str, id_: int, outcome: Outcome, payload: P | None = None) -> Recorded[P]:
        """Record an id's final outcome; says what it released."""

    def close_lane(self, lane_key: str, reason: str) -> None:
        """Stop dispensing a lane."""

    @property
    def finished(self) -> bool:
        """Nothing more to dispense or to wait for."""

    def can_dispense(self) -> bool:
        """Work is left (the engine must not go idle)."""

    def outstanding(self) -> int:
        """Ids handed out and not decided."""

    def lost(self) -> list[tuple[str, list[int]]]:
        """Per lane, the ids handed out that never got an outcome, when the engine has gone idle."""


class Frontier(Generic[P]):
    """Lanes of many targets behind one interleaver.

    ``group_of`` maps a target to its download slot (its host by default);
    lanes of one slot are set aside together when that slot is busy.
    ``neutral`` outcomes neither extend nor reset a lane's run of misses.

    Targets that walk the same URLs (see :mod:`idcrawl.core.overlap`) share
    an id space: each id is fetched once and every lane gets its outcome.
    ``rebind(payload, lane, id)`` makes a lane's payload from the fetching
    lane's (``None`` when that one's items were already emitted); without it,
    the payload is shared as is and a lane that comes second releases nothing.
    Lanes decided this way outside :meth:`record`'s own lane are listed in
    :attr:`touched` until the caller takes them.
    """

    def __init__(
        self,
        targets: Sequence[Target],
        group_of: Callable[[Target], Hashable] | None = None,
        neutral: frozenset[Outcome] = frozenset(),
        rebind: Callable[[P | None, str, int], P] | None = None,
    ) -> None:
        self._group_of = group_of or (lambda t: t.host)
        self._neutral = neutral
        self._rebind = rebind
        self._space_by_key: dict[Hashable, IdSpace[P]] = {}
        self._first_by_key: dict[Hashable, str] = {}  # the one target of a key so far
        self._space: dict[str, IdSpace[P]] = {}  # target name -> its shared id space
        #: lanes changed by another lane's outcome (or a shared outcome at dispatch), not yet taken
        self.touched: list[Touched[P]] = []
        #: payloads released outside :meth:`record` (at dispatch), not yet taken
        self.released: list[P] = []
        #: lane ids served without a request because an overlapping lane fetched them
        self.deduplicated = 0
        self._iv: Interleaver[str, Hashable] = Interleaver()
        self.targets: dict[str, Target] = {}
        self.lanes: dict[str, Lane[P]] = {}
        self.lane_target: dict[str, Target] = {}
        self.lane_direction: dict[str, str] = {}
        self._unsettled: set[str] = set()
        self._ids: dict[str, tuple[int, ...]] = {}  # list lanes: position -> id
        self._positions: dict[str, dict[int, int]] = {}  # list lanes: id -> position
        self._known_found: dict[str, Container[int]] = {}
        self._refetch_found: set[str] = set()  # lanes that fetch known found ids (LaneSpec.refetch_found)
        #: ids not fetched because an earlier run already found them
        self.skipped_found = 0
        for target in targets:
            self.add_target(target)

    def add_target(
        self,
        target: Target,
        specs: Sequence[LaneSpec] | None = None,
        known_found: Container[int] | None = None,
    ) -> None:
        """Add a target's lanes (``specs``: resumed lanes; default: fresh ones).

        Ids in ``known_found`` are recorded found without being dispensed.
        """
        if target.name in self.targets:
            raise ValueError(f"target {target.name!r} already in the frontier")
        self.targets[target.name] = target
        if known_found is not None:
            self._known_found[target.name] = known_found
        self._join_space(target)
        group = self._group_of(target)
        for spec in lane_specs(target) if specs is None else specs:
            lane: Lane[P] = Lane(
                spec.key, start=spec.start, step=spec.step, stop=spec.stop,
                margin=0 if spec.ids is not None else target.margin,
                window=target.window, neutral=self._neutral,
            )
            if spec.ids is not None:
                self._ids[spec.key] = spec.ids
                self._positions[spec.key] = {id_: pos for pos, id_ in enumerate(spec.ids)}
            if spec.refetch_found:
                self._refetch_found.add(spec.key)
            self.lanes[spec.key] = lane
            self.lane_target[spec.key] = target
            self.lane_direction[spec.key] = spec.direction
            if not lane.settled:
                self._unsettled.add(spec.key)
            if not lane.stopped:
                self._iv.add(spec.key, group, spec.weight)

    def _join_space(self, target: Target) -> None:
        """Share an id space with earlier targets that walk the same URLs."""
        key = space_key(target)
        first = self._first_by_key.setdefault(key, target.name)
        if first == target.name:
            return
        space = self._space_by_key.get(key)
        if space is None:
            space = self._space_by_key[key] = IdSpace()
            self._space[first] = space
        self._space[target.name] = space

    def lanes_of(self, target_name: str) -> Iterator[Lane[P]]:
        for key, target in self.lane_target.items():
            if target.name == target_name:
                yield self.lanes[key]

    # -- dispensing ------------------------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispatch | None:
        """The next id by weight among ready lanes of ready groups, or None."""
        while True:
            key = self._iv.pick(group_ready, self._lane_ready)
            if key is None:
                return None
            lane = self.lanes[key]
            position = lane.dispense()
            if lane.stopped:
                self._iv.remove(key)
            elif not lane.ready:
                self._iv.park(key)
            ids = self._ids.get(key)
            id_ = ids[position] if ids is not None else position
            target = self.lane_target[key]
            known = self._known_found.get(target.name)
            if known is not None and id_ in known and key not in self._refetch_found:
                self.skipped_found += 1
                self.record(key, id_, Outcome.FOUND)
                continue
            space = self._space.get(target.name)
            if space is not None:
                claim = space.claim(key, id_)
                if not claim.fetch:
                    self.deduplicated += 1
                    if claim.outcome is not None:  # known: decide it now; else wait for the fetch in flight
                        rec = self._record_shared(space, key, id_, claim.outcome, claim.payload)
                        self.released.extend(rec.released)
                    continue
            return Dispatch(target, key, id_)

    def _lane_ready(self, key: str) -> bool:
        return self.lanes[key].ready

    # -- outcomes ----------------------------------------------------------------

    def record(self, lane_key: str, id_: int, outcome: Outcome, payload: P | None = None) -> Recorded[P]:
        lane = self.lanes[lane_key]
        positions = self._positions.get(lane_key)
        if positions is not None and id_ not in positions:
            return Recorded()
        space = self._space.get(self.lane_target[lane_key].name)
        if space is not None and space.in_flight(id_):  # the space knows ids, not a list lane's positions
            waiting = space.settle(id_, outcome, payload)
            rec = self._record_shared(space, lane_key, id_, outcome, payload, own=True)
            for other in waiting:
                rec.released += self._record_shared(space, other, id_, outcome, payload).released
            return rec
        rec = lane.record(id_ if positions is None else positions[id_], outcome, payload)
        self._after_change(lane_key, lane, rec)
        return rec

    def _at(self, lane_key: str, id_: int) -> int:
        """Where ``id_`` is in the lane's own order: itself, or its position in a list lane."""
        positions = self._positions.get(lane_key)
        return positions[id_] if positions is not None else id_

    def _id_at(self, lane_key: str, at: int) -> int:
        """The id at ``at`` in the lane's own order (the inverse of :meth:`_at`)."""
        ids = self._ids.get(lane_key)
        return ids[at] if ids is not None else at

    def _record_shared(
        self, space: IdSpace[P], lane_key: str, id_: int, outcome: Outcome, payload: P | None, *, own: bool = False
    ) -> Recorded[P]:
        """Record in a lane of a shared space (another lane's fetch unless ``own``).

        The items of an id are released once, by the first lane whose margin
        allows it; later releases carry an empty payload (``rebind(None, ...)``).
        """
        lane = self.lanes[lane_key]
        before = None if own else replace(lane.counts)
        if not own and self._rebind is not None and (payload is not None or outcome is Outcome.FOUND):
            payload = self._rebind(payload, lane_key, id_)
        rec = lane.record(self._at(lane_key, id_), outcome, payload)
        kept: list[P] = []
        for released, released_at in zip(rec.released, rec.released_ids, strict=True):
            released_id = self._id_at(lane_key, released_at)
            if space.first_emit(released_id):
                kept.append(released)
                continue
            lane.counts.emitted -= 1
            if self._rebind is not None:
                kept.append(self._rebind(None, lane_key, released_id))
        rec.released = kept
        self._after_change(lane_key, lane, rec)
        if before is not None:
            self.touched.append(Touched(lane_key, id_, outcome, before, replace(lane.counts), rec))
        return rec

    def close_lane(self, lane_key: str, reason: str) -> None:
        lane = self.lanes[lane_key]
        lane.close(reason)
        if lane_key in self._iv:
            self._iv.remove(lane_key)
        if lane.settled:
            self._unsettled.discard(lane_key)

    def _after_change(self, key: str, lane: Lane[P], rec: Recorded[P]) -> None:
        if lane.settled:
            self._unsettled.discard(key)
        if lane.stopped:
            if key in self._iv:
                self._iv.remove(key)
        elif rec.became_ready:
            self._iv.unpark(key)

    # -- queries -----------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Every lane settled: nothing more to dispense or to wait for."""
        return not self._unsettled

    def can_dispense(self) -> bool:
        return any(self.lanes[k].ready for k in self._unsettled)

    def outstanding(self) -> int:
        return sum(self.lanes[k].ahead for k in self._unsettled if self.lanes[k].cut_at is None)

    def lost(self) -> list[tuple[str, list[int]]]:
        """Dispensed ids without an outcome of lanes not cut (meaningful once the engine is idle)."""
        lost = []
        for key, lane in self.lanes.items():
            ids = lane.outstanding() if lane.cut_at is None else []
            if ids:
                lost.append((key, ids))
        return lost
