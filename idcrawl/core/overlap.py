"""Overlapping targets: one fetch per URL, every lane still gets its outcome.

Which lane emits a found id (:func:`emitting_rank`) and what is held in memory: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.targets import TARGET_FIELDS, Target

__all__ = ["Claim", "IdSpace", "emitting_rank", "space_fields", "space_key"]

P = TypeVar("P")

#: Target fields that say *which ids* a target walks and how fast, not what an
#: id's URL and outcome are: two targets differing only in these share outcomes.
_WALK_FIELDS = frozenset(
    {"name", "start", "direction", "margin", "window", "rate_asc", "rate_desc", "min", "max", "resume", "holes"}
)
#: The values of :func:`space_key`, in the order of :data:`TARGET_FIELDS` (not ``host``: derived, not compared).
_SPACE_FIELDS = tuple(name for name in TARGET_FIELDS if name not in _WALK_FIELDS)
_space_values = operator.attrgetter(*_SPACE_FIELDS)


def space_key(target: Target) -> tuple[Hashable, ...]:
    """Targets with equal keys render the same URL for an id and judge it the same way.

    Every field not known to be about walking takes part, so a key added later
    (a new outcome option) makes targets share less, never wrongly more. The key holds the values
    only, in the order of :data:`_SPACE_FIELDS` (a frontier keeps one per target: about 150 bytes,
    not 750 with the fields' names); :func:`space_fields` pairs them with their names.
    """
    values: tuple[Hashable, ...] = _space_values(target)
    try:
        hash(values)
    except TypeError:  # a field of a value that does not hash: its repr stands for it
        return tuple(_hashable(value) for value in values)
    return values


def space_fields(target: Target) -> tuple[tuple[str, Hashable], ...]:
    """:func:`space_key` with each value's field name: ``((name, value), ...)``."""
    return tuple(zip(_SPACE_FIELDS, space_key(target), strict=True))


def _hashable(value: Any) -> Hashable:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value  # type: ignore[no-any-return]


def emitting_rank(distance: int, lane: str) -> tuple[int, str]:
    """The order in which lanes that hold a shared found id in their final prefix are
    asked to emit it (smallest first): ``distance`` is how many steps the lane walks
    from its start to the id (its position, for a list lane), ties by lane key."""
    return distance, lane


@dataclass(frozen=True, slots=True)
class Claim(Generic[P]):
    """What a lane reaching an id must do: fetch it, wait, or take a known outcome."""

    fetch: bool
    outcome: Outcome | None = None
    payload: P | None = None  # a found id's payload no lane has emitted yet


_FETCH: Claim[Any] = Claim(fetch=True)
_WAIT: Claim[Any] = Claim(fetch=False)


class IdSpace(Generic[P]):
    """The ids of one URL template, shared by the lanes of overlapping targets."""

    __slots__ = ("_decided", "_emitted", "_in_flight", "_payloads", "blocked", "deduplicated", "held", "held_count",
                 "lanes", "owner")

    def __init__(self) -> None:
        self._decided: dict[Outcome, BitMap64] = {outcome: BitMap64() for outcome in Outcome}
        self._in_flight: dict[int, list[str]] = {}  # id -> lanes waiting for its outcome
        self._payloads: dict[int, P] = {}  # found, not yet emitted by any lane
        self._emitted = BitMap64()
        #: lane ids served without a request (waited for, or already known)
        self.deduplicated = 0
        #: the lanes sharing this space (keys), in the order they were added
        self.lanes: list[str] = []
        #: found id -> lane -> payload that lane released, waiting for the emitting lane to be known
        self.held: dict[int, dict[str, P]] = {}
        #: how many payloads ``held`` holds (all lanes, all ids)
        self.held_count = 0
        #: lane -> (rank in that lane, id) of held ids waiting for that lane's decision (a heap)
        self.blocked: dict[str, list[tuple[int, int]]] = {}
        #: found id -> the lane known to emit it, which has not released it yet
        self.owner: dict[int, str] = {}

    def outcome_of(self, id_: int) -> Outcome | None:
        for outcome, ids in self._decided.items():
            if id_ in ids:
                return outcome
        return None

    def claim(self, lane: str, id_: int) -> Claim[P]:
        """A lane reached ``id_``: the first one fetches, the others share its outcome."""
        waiting = self._in_flight.get(id_)
        if waiting is not None:
            waiting.append(lane)
            self.deduplicated += 1
            return _WAIT
        outcome = self.outcome_of(id_)
        if outcome is None:
            self._in_flight[id_] = []
            return _FETCH
        self.deduplicated += 1
        payload = self._payloads.get(id_) if outcome is Outcome.FOUND else None
        return Claim(fetch=False, outcome=outcome, payload=payload)

    def settle(self, id_: int, outcome: Outcome, payload: P | None) -> list[str]:
        """The fetch of ``id_`` ended with ``outcome``; returns the lanes that were waiting for it."""
        self._decided[outcome].add(id_)  # ids are >= 0 (lanes end at 0)
        if outcome is Outcome.FOUND and payload is not None and id_ not in self._emitted:
            self._payloads[id_] = payload
        return self._in_flight.pop(id_, None) or []

    def in_flight(self, id_: int) -> bool:
        return id_ in self._in_flight

    def emitted(self, id_: int) -> bool:
        """Whether ``id_``'s items were emitted already."""
        return id_ in self._emitted

    def mark_emitted(self, id_: int) -> None:
        """``id_``'s items are emitted: its payload is no longer kept."""
        self._emitted.add(id_)
        self._payloads.pop(id_, None)
        self.owner.pop(id_, None)

    def first_emit(self, id_: int) -> bool:
        """Whether this is the first release of ``id_``'s items (then they are emitted)."""
        if id_ in self._emitted:
            return False
        self.mark_emitted(id_)
        return True
