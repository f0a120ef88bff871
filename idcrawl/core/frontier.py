"""The id frontier: every lane of every target, interleaved by weight.

This is the whole linear-crawl decision logic with no I/O: ask it for the
next (target, lane, id), tell it each id's outcome, and it says which held
payloads (items) are now safe to emit. The Scrapy scheduler and spider are
thin adapters around it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from idcrawl.core.interleave import Interleaver
from idcrawl.core.lanes import Lane, LaneCounts, Outcome, Recorded
from idcrawl.core.overlap import IdSpace, emitting_rank, space_key
from idcrawl.core.targets import Direction, Target

__all__ = ["Decided", "Dispatch", "Dispensed", "Frontier", "IdFrontier", "LaneMap", "LaneSpec", "Touched", "lane_specs"]

P = TypeVar("P")
V = TypeVar("V")


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
    #: an id the lane walks to whatever the misses: misses at or before it do not count toward the
    #: margin (a tail told of newer ids by a sitemap: :func:`idcrawl.core.resume.tail_specs`); None: none
    reach: int | None = None


def lane_specs(target: Target) -> list[LaneSpec]:
    """The lanes a target walks: asc from start, desc from start (or start-1 for both)."""
    specs: list[LaneSpec] = []
    if target.direction in (Direction.ASC, Direction.BOTH):
        specs.append(LaneSpec(f"{target.name}:asc", "asc", *_walk(target, "asc"), target.rate_asc))
    if target.direction in (Direction.DESC, Direction.BOTH):
        specs.append(LaneSpec(f"{target.name}:desc", "desc", *_walk(target, "desc"), target.rate_desc))
    return specs


def _walk(target: Target, direction: str) -> tuple[int, int, int | None]:
    """The start, step and stop of ``target``'s lane walking ``direction`` (``asc`` or ``desc``)."""
    if direction == "asc":
        return target.start, 1, target.max
    return target.start - 1 if target.direction is Direction.BOTH else target.start, -1, target.min


def _direction_of(lane: Lane[Any], listed: bool) -> str:
    """The direction a lane's spec has unless it says otherwise: a list lane's ``holes``, else its step's."""
    if listed:
        return "holes"
    return "asc" if lane.step == 1 else "desc"


class _LaneView(Mapping[str, V]):
    """A per-lane map of the frontier (:attr:`Frontier.lane_target`, :attr:`Frontier.lane_direction`):
    read through ``value_of(key)``, nothing kept per lane."""

    __slots__ = ("_lanes", "_value_of")

    def __init__(self, lanes: Mapping[str, object], value_of: Callable[[str], V]) -> None:
        self._lanes = lanes
        self._value_of = value_of

    def __getitem__(self, key: str) -> V:
        return self._value_of(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._lanes)

    def __len__(self) -> int:
        return len(self._lanes)


class LaneMap(Mapping[str, Lane[P]]):
    """:attr:`Frontier.lanes`: lane key -> lane, in the order the lanes were added.

    A lane of a fresh target (added without specs) that nothing has dispensed, decided or read
    through this map is no object yet (*not reached*): its entry is None, or the reason it was
    closed with (:meth:`Frontier.close_lane`), and the lane is made (as :func:`lane_specs` plans
    it) when it is first read here (``lanes[key]``, ``get``, ``items()``, ``values()``). A job of
    100,000 targets thus keeps no ``Lane`` for the lanes its crawl has not reached, as long as what
    reads every lane reads them through :meth:`states` or :meth:`read`.
    """

    __slots__ = ("_entries", "_make", "_reached")

    def __init__(self, make: Callable[[str, str | None], Lane[P]], reached: Callable[[str, str | None], None]
                 ) -> None:
        #: lane key -> its lane; None: a fresh lane not made yet; a string: such a lane, closed with that reason
        self._entries: dict[str, Lane[P] | str | None] = {}
        self._make = make
        self._reached = reached  # told of each lane made to be kept (with what its entry was)

    def __getitem__(self, key: str) -> Lane[P]:
        entry = self._entries[key]
        if isinstance(entry, Lane):
            return entry
        lane = self._entries[key] = self._make(key, entry)
        self._reached(key, entry)
        return lane

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def states(self) -> Iterator[tuple[str, Lane[P] | str | None]]:
        """Each lane in order: its lane, or for one not reached yet (untouched: nothing dispensed,
        decided or held, counts all 0) the reason it was closed with (None: not closed, ready)."""
        return iter(self._entries.items())

    def peek(self, key: str) -> Lane[P]:
        """The lane ``key``; one not made yet as a copy made for the reading, not kept (read it, do not
        change it or hold on to it)."""
        entry = self._entries[key]
        return entry if isinstance(entry, Lane) else self._make(key, entry)

    def read(self) -> Iterator[tuple[str, Lane[P]]]:
        """Each lane in order; one not made yet as a copy made for the reading, not kept (read it, do
        not change it or hold on to it)."""
        for key, entry in self._entries.items():
            yield key, entry if isinstance(entry, Lane) else self._make(key, entry)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One id handed out: build the request from ``target.url_for(id)``."""

    target: Target
    lane: str
    id: int


@dataclass(frozen=True, slots=True)
class Touched:
    """A lane that an outcome of *another* lane decided an id of (overlapping targets)."""

    lane: str
    id: int
    outcome: Outcome
    before: LaneCounts  # its counters before and after the change
    after: LaneCounts
    stopped: bool = False  # the change stopped the lane
    became_ready: bool = False  # the change let the lane dispense again


class Dispensed(NamedTuple, Generic[P]):
    """What :meth:`IdFrontier.next` did: the id to fetch, and what deciding ids on the way did."""

    #: the id to fetch (None: none now)
    dispatch: Dispatch | None
    #: payloads released on the way (ids decided at dispatch: known found, or an overlapping lane's), in order
    released: Sequence[P] = ()
    #: lanes whose ids were decided on the way
    touched: Sequence[Touched] = ()
    #: ids not fetched because an earlier run already found them
    skipped_found: int = 0
    #: lane ids served without a request because an overlapping lane fetched them (or is fetching them)
    deduplicated: int = 0
    #: the counters of each lane whose skipped ids moved them, before and after (the job's stats follow them)
    counted: Sequence[tuple[str, LaneCounts, LaneCounts]] = ()


class Decided(NamedTuple, Generic[P]):
    """What recording an outcome (:meth:`IdFrontier.record`) or closing a lane did."""

    #: payloads now safe to emit, in order
    released: list[P]
    #: other lanes the outcome decided an id of (overlapping targets)
    touched: Sequence[Touched] = ()
    #: the lane stopped (cut, or at its end)
    stopped: bool = False
    #: the lane can dispense again
    became_ready: bool = False
    #: a found id past the lane's cut (its items are not emitted)
    overshoot: bool = False


class IdFrontier(Protocol[P]):
    """What the runtime, the scheduler, the spider, the limits and the progress lines use of a frontier.

    Two implementations: :class:`Frontier` (lanes in this process) and
    :class:`idcrawl.distributed.frontier.RedisFrontier` (lanes of a job shared
    through Redis, whose ``lanes`` are mirrors: cursor and cut are the job's,
    counts this worker's share).
    """

    #: target name -> target
    targets: dict[str, Target]

    @property
    def lanes(self) -> Mapping[str, Lane[P]]:
        """Lane key -> lane (its counters, cursor, cut, reason)."""

    def read_lanes(self) -> Iterator[tuple[str, Lane[P]]]:
        """Each lane (key, lane) to read, not to change or hold on to: a lane not reached yet may be a copy."""

    def lane_states(self) -> Iterator[tuple[str, Lane[P] | str | None]]:
        """Each lane (key, lane) in order; a lane not reached yet (untouched: nothing dispensed, decided or
        held, counts all 0) may be given as the reason it was closed with (None: not closed, ready)."""

    @property
    def lane_target(self) -> Mapping[str, Target]:
        """Lane key -> its target."""

    @property
    def lane_direction(self) -> Mapping[str, str]:
        """Lane key -> ``asc``, ``desc`` or ``holes``."""

    #: ids not fetched because an earlier run already found them (a total; each call returns its own)
    skipped_found: int

    def add_target(
        self, target: Target, specs: Sequence[LaneSpec] | None = None, known_found: Container[int] | None = None
    ) -> None:
        """Add a target's lanes."""

    def lanes_of(self, target_name: str) -> Iterator[Lane[P]]:
        """The lanes of one target."""

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispensed[P]:
        """The next id to fetch (None: none now), and what deciding ids on the way did."""

    def record(self, lane_key: str, id_: int, outcome: Outcome, payload: P | None = None) -> Decided[P]:
        """Record an id's final outcome; says what it released and which other lanes it decided."""

    def close_lane(self, lane_key: str, reason: str) -> Decided[P]:
        """Stop dispensing a lane; says what that released in other lanes."""

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
    Lanes decided this way outside :meth:`record`'s own lane are listed in the
    ``touched`` of the call's result (:class:`Decided`, :class:`Dispensed`).

    Which lane emits a shared found id is a rule, not a race (see
    :func:`idcrawl.core.overlap.emitting_rank`): of the lanes whose final prefix
    holds the id, the one nearest to it from its start, ties by lane key. A
    lane that releases the id while a lane before it by the rule has not
    decided yet whether its prefix holds the id (its earliest possible cut is
    not past the id, and it is not cut before it) waits: the payload is held in
    the space until that lane decides. Held payloads: at most one per lane of
    the space for each found id that a lane nearer to it has not decided yet;
    a lane's decision on an id comes when its prefix or its earliest possible
    cut passes it, or its cut or stop falls before it.

    ``max_held`` caps the payloads held that way in a space (0: no cap): once
    it holds ``max_held``, a lane of the space that no held id waits for
    dispenses no new id until the count falls below the cap (requests in
    flight still complete and may add theirs); the lanes held ids wait for go
    on, since their outcomes free them. Nothing is dropped or reordered: the
    lanes wait, the items are the same.

    Lanes are ``adaptive`` (see :class:`idcrawl.core.lanes.Lane`): each dispenses
    at most ``margin`` ids past its earliest possible cut, and an id whose outcome
    can no longer change the cut (a retry cooling down) does not hold its window.
    The lanes of a target for which ``sequential(target)`` is true (its download
    slot takes one request at a time) dispense none past it: Scrapy frees a slot
    when the response has arrived, before the spider has parsed it, so an id
    past the earliest possible cut would go out while the outcome that may cut
    the lane is still unknown; without it a walk at per-host concurrency 1 sends
    exactly the ids up to its cut (the next id waits for that parse only).
    """

    def __init__(
        self,
        targets: Sequence[Target],
        group_of: Callable[[Target], Hashable] | None = None,
        neutral: frozenset[Outcome] = frozenset(),
        rebind: Callable[[P | None, str, int], P] | None = None,
        adaptive: bool = True,
        max_held: int = 0,
        sequential: Callable[[Target], bool] | None = None,
    ) -> None:
        self._adaptive = adaptive
        self._max_held = max_held
        self._sequential = sequential
        self._group_of = group_of or (lambda t: t.host)
        self._neutral = neutral
        self._rebind = rebind
        self._space_by_key: dict[Hashable, IdSpace[P]] = {}
        #: a URL template -> the first target of each space key with that template (a name, or names when
        #: keys differ): the key (it holds the template) is made again from the target when another has its
        #: template, not kept per target; the template is the target's own string, not a new object
        self._first_by_url: dict[str, str | list[str]] = {}
        self._space: dict[str, IdSpace[P]] = {}  # target name -> its shared id space
        #: lane ids served without a request because an overlapping lane fetched them (a total)
        self.deduplicated = 0
        self._iv: Interleaver[str, Hashable] = Interleaver()
        self.targets: dict[str, Target] = {}
        #: lane key -> lane (a fresh lane is made when first read: :class:`LaneMap`)
        self.lanes: LaneMap[P] = LaneMap(self._made_lane, self._reached)
        self._entries = self.lanes._entries  # the lanes as kept: None (or a reason) for one not made yet
        #: lanes whose key is not ``<target name>:<anything without a colon>`` -> their target (the others
        #: need no map entry: see :attr:`lane_target`)
        self._odd_target: dict[str, Target] = {}
        #: targets whose lanes are not ``<name>:asc`` and/or ``<name>:desc`` (in that order) -> their lane keys
        #: (the others need no map entry: see :meth:`_lane_keys`)
        self._odd_lanes: dict[str, tuple[str, ...]] = {}
        #: lanes whose direction is not the one :attr:`lane_direction` derives -> their direction
        self._odd_direction: dict[str, str] = {}
        #: lanes not settled, but those not reached yet (:class:`LaneMap`; each is ready), which are counted
        self._unsettled: set[str] = set()
        self._unreached = 0
        self._ids: dict[str, tuple[int, ...]] = {}  # list lanes: position -> id
        self._positions: dict[str, dict[int, int]] = {}  # list lanes: id -> position
        self._known_found: dict[str, Container[int]] = {}
        #: shared ids whose emitting lane became known: (lane, payload, emits its items), not yet handed out
        self._pending: list[tuple[str, int, P | None, bool]] = []
        self._refetch_found: set[str] = set()  # lanes that fetch known found ids (LaneSpec.refetch_found)
        #: ids not fetched because an earlier run already found them (a total)
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
        added: list[str] = []
        for spec in lane_specs(target) if specs is None else specs:
            lane = self._new_lane(target, spec)
            if spec.ids is not None:
                self._ids[spec.key] = spec.ids
                self._positions[spec.key] = {id_: pos for pos, id_ in enumerate(spec.ids)}
            if spec.refetch_found:
                self._refetch_found.add(spec.key)
            # a fresh lane is made again when first read (LaneMap): none is kept for a lane not reached yet
            # (one stopped at its bound from the start is kept: a lane not reached yet is one ready)
            unreached = specs is None and not lane.stopped
            self._entries[spec.key] = None if unreached else lane
            self._unreached += unreached
            added.append(spec.key)
            if self.targets.get(spec.key.rpartition(":")[0]) is not target:
                self._odd_target[spec.key] = target
            if spec.direction != _direction_of(lane, spec.ids is not None):
                self._odd_direction[spec.key] = spec.direction
            if not lane.settled and not unreached:
                self._unsettled.add(spec.key)
            if not lane.stopped:
                self._iv.add(spec.key, group, spec.weight)
        if tuple(added) != self._usual_lane_keys(target):
            self._odd_lanes[target.name] = tuple(added)
        space = self._space.get(target.name)
        if space is not None:
            space.lanes.extend(added)  # not a scan of every lane: many targets may share one space

    def read_lanes(self) -> Iterator[tuple[str, Lane[P]]]:
        return self.lanes.read()

    def lane_states(self) -> Iterator[tuple[str, Lane[P] | str | None]]:
        return self.lanes.states()

    def _new_lane(self, target: Target, spec: LaneSpec) -> Lane[P]:
        return Lane(
            spec.key, start=spec.start, step=spec.step, stop=spec.stop,
            margin=0 if spec.ids is not None else target.margin,
            window=target.window, neutral=self._neutral, adaptive=self._adaptive,
            speculation=self._speculation(target), reach=spec.reach,
        )

    def _made_lane(self, key: str, closed: str | None) -> Lane[P]:
        """Fresh lane ``key`` as :func:`lane_specs` plans it, closed with ``closed`` (None: not closed)."""
        target = self._target_of(key)
        lane = self._new_lane(target, next(spec for spec in lane_specs(target) if spec.key == key))
        if closed is not None:
            lane.close(closed)
        return lane

    def fresh_walk(self, key: str) -> tuple[int, int, int | None]:
        """The start, step and stop of lane ``key`` of a fresh target (one not reached yet, :class:`LaneMap`),
        as :func:`lane_specs` plans it, without making the lane."""
        return _walk(self._target_of(key), key.rpartition(":")[2])

    def _reached(self, key: str, entry: str | None) -> None:
        """Lane ``key``, not reached yet, was made: unsettled, unless it was closed."""
        if entry is None:
            self._unreached -= 1
            self._unsettled.add(key)

    def _speculation(self, target: Target) -> int | None:
        return 0 if self._sequential is not None and self._sequential(target) else None

    @property
    def lane_target(self) -> Mapping[str, Target]:
        """Lane key -> its target (a view: no map entry per lane)."""
        return _LaneView(self.lanes, self._target_of)

    @property
    def lane_direction(self) -> Mapping[str, str]:
        """Lane key -> ``asc``, ``desc`` or ``holes`` (a view: no map entry per lane)."""
        return _LaneView(self.lanes, self._direction)

    def _target_of(self, key: str) -> Target:
        """The target of lane ``key`` (KeyError: no such lane)."""
        odd = self._odd_target.get(key)
        if odd is not None:
            return odd
        if key not in self.lanes:
            raise KeyError(key)
        return self.targets[key.rpartition(":")[0]]

    def _direction(self, key: str) -> str:
        """The direction of lane ``key`` (KeyError: no such lane)."""
        odd = self._odd_direction.get(key)
        if odd is not None:
            return odd
        lane = self._entries[key]
        if not isinstance(lane, Lane):  # a fresh lane not made yet: ``<target name>:asc`` or ``:desc``
            return key.rpartition(":")[2]
        return _direction_of(lane, key in self._ids)

    def _first_of(self, target: Target, key: Hashable) -> str | None:
        """The first target of space ``key`` (None: ``target`` is, from now on)."""
        by_url, name = self._first_by_url, target.name
        names = by_url.get(target.url)
        if names is None:
            by_url[target.url] = name
            return None
        for first in (names,) if isinstance(names, str) else names:
            if space_key(self.targets[first]) == key:
                return first
        by_url[target.url] = [names, name] if isinstance(names, str) else [*names, name]
        return None

    def _join_space(self, target: Target) -> None:
        """Share an id space with earlier targets that walk the same URLs."""
        key = space_key(target)
        first = self._first_of(target, key)
        if first is None:
            return
        space = self._space_by_key.get(key)
        if space is None:
            space = self._space_by_key[key] = IdSpace()
            self._space[first] = space
            space.lanes.extend(self._lane_keys(first))
        self._space[target.name] = space

    def lanes_of(self, target_name: str) -> Iterator[Lane[P]]:
        for key in self._lane_keys(target_name):
            yield self.lanes[key]

    def _lane_keys(self, target_name: str) -> tuple[str, ...]:
        keys = self._odd_lanes.get(target_name)
        if keys is not None:
            return keys
        target = self.targets.get(target_name)
        return () if target is None else self._usual_lane_keys(target)

    def _usual_lane_keys(self, target: Target) -> tuple[str, ...]:
        """Those of ``<name>:asc`` and ``<name>:desc`` that are lanes of ``target``, in that order."""
        lanes, name = self.lanes, target.name
        return tuple(key for key in (f"{name}:asc", f"{name}:desc") if key in lanes and self._target_of(key) is target)

    # -- dispensing ------------------------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispensed[P]:
        """The next id by weight among ready lanes of ready groups (None: none now)."""
        released: list[P] = []
        touched: list[Touched] = []
        skipped = deduplicated = 0
        counted: list[tuple[str, LaneCounts, LaneCounts]] = []
        while True:
            key = self._iv.pick(group_ready, self._lane_ready)
            if key is None:
                dispatch = None
                break
            lane = self.lanes[key]
            position = lane.dispense()
            if lane.stopped:
                self._iv.remove(key)
            elif not lane.ready:
                self._iv.park(key)
            ids = self._ids.get(key)
            id_ = ids[position] if ids is not None else position
            target = self._target_of(key)
            known = self._known_found.get(target.name)
            if known is not None and id_ in known and key not in self._refetch_found:
                skipped += 1
                before = replace(lane.counts)
                decided = self.record(key, id_, Outcome.FOUND)
                if lane.counts != before:
                    counted.append((key, before, replace(lane.counts)))
                released += decided.released
                touched += decided.touched
                continue
            space = self._space.get(target.name)
            if space is not None:
                self._recheck(space, key)  # dispensing may decide whether its prefix holds a shared id
                claim = space.claim(key, id_)
                if not claim.fetch:
                    deduplicated += 1
                    if claim.outcome is not None:  # known: decide it now; else wait for the fetch in flight
                        released += self._record_shared(space, key, id_, claim.outcome, claim.payload, touched).released
                    released += self._take_pending(None, touched)
                    continue
                released += self._take_pending(None, touched)
            dispatch = Dispatch(target, key, id_)
            break
        if skipped or deduplicated:
            self.skipped_found += skipped
            self.deduplicated += deduplicated
        return Dispensed(dispatch, released, touched, skipped, deduplicated, counted)

    def _lane_ready(self, key: str) -> bool:
        lane = self._entries[key]
        if isinstance(lane, Lane):
            if not lane.ready:
                return False
        elif lane is not None:  # a lane not reached yet, closed (else one not closed: ready)
            return False
        return not self._max_held or not self._capped(key)

    def _capped(self, key: str) -> bool:
        """The lane's space holds ``max_held`` payloads and no held id waits for this lane."""
        space = self._space.get(self._target_of(key).name)
        return space is not None and space.held_count >= self._max_held and not space.blocked.get(key)

    # -- outcomes ----------------------------------------------------------------

    def record(self, lane_key: str, id_: int, outcome: Outcome, payload: P | None = None) -> Decided[P]:
        lane = self.lanes[lane_key]
        positions = self._positions.get(lane_key)
        if positions is not None and id_ not in positions:
            return Decided([])
        space = self._space.get(self._target_of(lane_key).name)
        if space is None:
            rec = lane.record(id_ if positions is None else positions[id_], outcome, payload)
            self._after_change(lane_key, lane, rec)
            return Decided(rec.released, (), rec.stopped, rec.became_ready, rec.overshoot)
        touched: list[Touched] = []
        if space.in_flight(id_):  # the space knows ids, not a list lane's positions
            waiting = space.settle(id_, outcome, payload)
            rec = self._record_shared(space, lane_key, id_, outcome, payload, touched, own=True)
            for other in waiting:
                rec.released += self._record_shared(space, other, id_, outcome, payload, touched).released
        else:
            rec = lane.record(id_ if positions is None else positions[id_], outcome, payload)
            rec.released = self._emit_rule(space, lane_key, rec.released, rec.released_ids)
            self._after_change(lane_key, lane, rec)
        rec.released += self._take_pending(lane_key, touched)
        return Decided(rec.released, touched, rec.stopped, rec.became_ready, rec.overshoot)

    def _at(self, lane_key: str, id_: int) -> int:
        """Where ``id_`` is in the lane's own order: itself, or its position in a list lane."""
        positions = self._positions.get(lane_key)
        return positions[id_] if positions is not None else id_

    def _id_at(self, lane_key: str, at: int) -> int:
        """The id at ``at`` in the lane's own order (the inverse of :meth:`_at`)."""
        ids = self._ids.get(lane_key)
        return ids[at] if ids is not None else at

    def _record_shared(
        self, space: IdSpace[P], lane_key: str, id_: int, outcome: Outcome, payload: P | None,
        touched: list[Touched], *, own: bool = False,
    ) -> Recorded[P]:
        """Record in a lane of a shared space: another lane's fetch (the lane goes to ``touched``)
        unless ``own``.

        The items of an id are released once, by the lane the rule names
        (:meth:`_emit_rule`); the other lanes release an empty payload
        (``rebind(None, ...)``).
        """
        lane = self.lanes[lane_key]
        before = None if own else replace(lane.counts)
        if not own and self._rebind is not None and (payload is not None or outcome is Outcome.FOUND):
            payload = self._rebind(payload, lane_key, id_)
        rec = lane.record(self._at(lane_key, id_), outcome, payload)
        rec.released = self._emit_rule(space, lane_key, rec.released, rec.released_ids)
        self._after_change(lane_key, lane, rec)
        if before is not None:
            touched.append(Touched(lane_key, id_, outcome, before, replace(lane.counts), rec.stopped,
                                   rec.became_ready))
        return rec

    # -- the emitting lane of a shared id ---------------------------------------------

    def _emit_rule(self, space: IdSpace[P], lane_key: str, released: list[P], ats: list[int]) -> list[P]:
        """What a lane of a shared space hands out of the payloads it released: the items of an
        id it is known to emit, an empty payload for an id another lane emits; an id whose
        emitting lane is not known yet is held in the space (:meth:`_decide_emitter`)."""
        lane = self.lanes[lane_key]
        kept: list[P] = []
        for payload, at in zip(released, ats, strict=True):
            id_ = self._id_at(lane_key, at)
            owner = space.owner.get(id_)
            if owner == lane_key:
                space.mark_emitted(id_)
                kept.append(payload)
                continue
            lane.counts.emitted -= 1  # counted again if it turns out to emit them
            if owner is not None or space.emitted(id_):
                if self._rebind is not None:
                    kept.append(self._rebind(None, lane_key, id_))
                continue
            space.held.setdefault(id_, {})[lane_key] = payload
            space.held_count += 1
            self._decide_emitter(space, id_)
        return kept

    def _distance(self, lane_key: str, id_: int) -> int | None:
        """Steps from the lane's start to ``id_`` (None: outside the lane's range)."""
        lane = self.lanes[lane_key]
        positions = self._positions.get(lane_key)
        at = id_ if positions is None else positions.get(id_)
        if at is None or not lane.in_range(at):
            return None
        return (at - lane.start) * lane.step

    def _holds(self, lane_key: str, id_: int) -> bool | None:
        """Whether the lane's final prefix holds the found shared id ``id_`` (None: not known yet)."""
        lane = self.lanes[lane_key]
        known = self._known_found.get(self._target_of(lane_key).name)
        if known is not None and id_ in known:
            return False  # found in an earlier run: its items were emitted then
        at, step = self._at(lane_key, id_), lane.step
        if lane.cut_at is not None:
            return (at - lane.cut_at) * step < 0
        if (at - lane.next_id) * step >= 0:  # not dispensed
            return False if lane.stopped else None
        if (at - lane.first_undecided) * step < 0 or not lane.margin:
            return True
        pcut = lane.earliest_cut
        return True if pcut is not None and (at - pcut) * step < 0 else None

    def _decide_emitter(self, space: IdSpace[P], id_: int) -> None:
        """Name the lane that emits held ``id_`` once every lane before it by the rule has decided."""
        holders = space.held.get(id_)
        if not holders:
            return
        ranked = sorted(
            (emitting_rank(d, key), key) for key in space.lanes if (d := self._distance(key, id_)) is not None
        )
        winner = None
        for (distance, _), key in ranked:
            holds = True if key in holders else self._holds(key, id_)
            if holds is None:
                heapq.heappush(space.blocked.setdefault(key, []), (distance, id_))
                if self._max_held:
                    self._iv.unpark(key)  # a held id waits for it: it goes on even at the cap
                return
            if holds:
                winner = key
                break
        del space.held[id_]
        space.held_count -= len(holders)
        if self._max_held and space.held_count < self._max_held <= space.held_count + len(holders):
            for key in space.lanes:  # below the cap again: lanes that waited for it go on
                if self.lanes[key].ready:
                    self._iv.unpark(key)
        for key, payload in holders.items():
            if key == winner:
                space.mark_emitted(id_)
                self._pending.append((key, id_, payload, True))
            elif self._rebind is not None:
                self._pending.append((key, id_, self._rebind(None, key, id_), False))
        if winner is not None and winner not in holders:
            space.owner[id_] = winner

    def _recheck(self, space: IdSpace[P], lane_key: str) -> None:
        """The lane changed: held ids that waited for its decision go on."""
        heap = space.blocked.get(lane_key)
        while heap:
            _, id_ = heap[0]
            held = space.held.get(id_)
            if held is not None and lane_key not in held and self._holds(lane_key, id_) is None:
                break
            heapq.heappop(heap)
            self._decide_emitter(space, id_)
        if heap is not None and not heap:
            del space.blocked[lane_key]

    def _take_pending(self, own: str | None, touched: list[Touched]) -> list[P]:
        """Payloads whose emitting lane became known; a lane other than ``own`` that emits is added to
        ``touched``."""
        if not self._pending:
            return []
        pending, self._pending = self._pending, []
        out: list[P] = []
        for key, id_, payload, emits in pending:
            if emits:
                lane = self.lanes[key]
                before = replace(lane.counts)
                lane.counts.emitted += 1
                if key != own:
                    touched.append(Touched(key, id_, Outcome.FOUND, before, replace(lane.counts)))
            if payload is not None:
                out.append(payload)
        return out

    def close_lane(self, lane_key: str, reason: str) -> Decided[P]:
        space = self._space.get(self._target_of(lane_key).name)
        entry = self._entries[lane_key]
        if space is None and not isinstance(entry, Lane):  # a lane not reached yet: its reason is kept
            if entry is None:  # (else closed already)
                self._entries[lane_key] = reason
                self._iv.remove(lane_key)
                self._unreached -= 1  # nothing dispensed: settled once stopped
            return Decided([], (), True)
        lane = self.lanes[lane_key]
        lane.close(reason)
        if lane_key in self._iv:
            self._iv.remove(lane_key)
        if lane.settled:
            self._unsettled.discard(lane_key)
        if space is None:
            return Decided([], (), True)
        touched: list[Touched] = []
        self._recheck(space, lane_key)
        return Decided(self._take_pending(None, touched), touched, True)

    def _after_change(self, key: str, lane: Lane[P], rec: Recorded[P]) -> None:
        space = self._space.get(self._target_of(key).name)
        if space is not None:
            self._recheck(space, key)
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
        return not self._unsettled and not self._unreached

    def can_dispense(self) -> bool:
        if any(self._lane_ready(k) for k in self._unsettled):
            return True
        if not self._unreached:
            return False
        if not self._max_held:
            return True  # a lane not reached yet is ready
        return any(not self._capped(key) for key, entry in self._entries.items() if entry is None)

    def outstanding(self) -> int:
        entries = self._entries  # a lane not made yet has dispensed nothing
        return sum(lane.ahead for k in self._unsettled if isinstance(lane := entries[k], Lane) and lane.cut_at is None)

    def lost(self) -> list[tuple[str, list[int]]]:
        """Dispensed ids without an outcome of lanes not cut (meaningful once the engine is idle)."""
        lost = []
        for key, lane in self._entries.items():
            if not isinstance(lane, Lane):  # not made yet: nothing dispensed
                continue
            ids = lane.outstanding() if lane.cut_at is None else []
            if ids:
                lost.append((key, ids))
        return lost
