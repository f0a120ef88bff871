"""Weighted interleaving of lanes grouped by download slot (stride scheduling).

A pick costs O(log lanes) amortised; a lane that is not ready is parked, never waited on.
A lane never at its group's head yet is a row of numbers in the group's queue (a big job's lanes).
How: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Interleaver"]

K = TypeVar("K", bound=Hashable)
G = TypeVar("G", bound=Hashable)


@dataclass(slots=True)
class _Lane(Generic[K, G]):
    key: K
    group: G
    weight: int
    order: int
    pass_: int = 0
    parked: bool = False
    version: int = 0


@dataclass(slots=True)
class _Group(Generic[K, G]):
    key: G
    order: int
    heap: list[tuple[int, int, int, K]] = field(default_factory=list)  # (pass, order, version, key)
    version: int = 0
    #: (pass, order) of the head lane its valid top-heap entry names (None: it has none)
    top: tuple[int, int] | None = None
    #: untouched lanes (never the group's head yet), in (pass, order) order: their keys, and
    #: (pass, order, weight) per lane in ``rows``; those before ``first`` are gone
    queued: list[K] = field(default_factory=list)
    rows: array[int] = field(default_factory=lambda: array("q"))
    first: int = 0
    #: key -> how many of its queued rows are void (removed or parked before they were reached)
    void: dict[K, int] = field(default_factory=dict)


class Interleaver(Generic[K, G]):
    """Stride scheduler over lanes ``K`` grouped in slots ``G``."""

    def __init__(self) -> None:
        self._lanes: dict[K, _Lane[K, G]] = {}
        #: untouched lanes, still rows of their group's queue: key -> group
        self._queued: dict[K, G] = {}
        self._groups: dict[G, _Group[K, G]] = {}
        self._top: list[tuple[int, int, int, G]] = []  # (head pass, head order, version, group)
        self._lcm = 1
        self._order = 0
        self._vtime = 0  # pass of the last pick: where a waking lane rejoins

    def __len__(self) -> int:
        return len(self._lanes) + len(self._queued)

    def __contains__(self, key: object) -> bool:
        return key in self._lanes or key in self._queued

    @property
    def untouched(self) -> int:
        """Lanes kept as rows of numbers: never at the head of their group yet."""
        return len(self._queued)

    def _stride(self, lane: _Lane[K, G]) -> int:
        return self._lcm // lane.weight

    def add(self, key: K, group: G, weight: int = 1) -> None:
        if key in self:
            raise KeyError(f"lane {key!r} already added")
        if weight < 1:
            raise ValueError(f"weight must be >= 1, not {weight!r}")
        new_lcm = math.lcm(self._lcm, weight)
        if new_lcm != self._lcm:
            self._rescale(new_lcm // self._lcm)
            self._lcm = new_lcm
        order, pass_ = self._order, self._vtime
        self._order += 1
        grp = self._groups.get(group)
        if grp is None:
            grp = self._groups[group] = _Group(group, self._order)
        rows = grp.rows
        if grp.top is not None and (pass_, order) > grp.top and (len(rows) == 3 * grp.first or pass_ >= rows[-3]):
            # behind the head and the queue's last row (orders only grow): queued, no lane object yet
            grp.queued.append(key)
            rows.extend((pass_, order, weight))
            self._queued[key] = group
            return
        lane = _Lane(key, group, weight, order, pass_=pass_)
        self._lanes[key] = lane
        self._push_lane(grp, lane)

    def remove(self, key: K) -> None:
        if key in self._queued:  # never the group's head: its top entry stands
            grp = self._groups[self._queued.pop(key)]
            grp.void[key] = grp.void.get(key, 0) + 1
            return
        lane = self._lanes.pop(key)
        lane.version += 1  # invalidates its heap entries
        grp = self._groups[lane.group]
        self._requeue(grp)

    def park(self, key: K) -> None:
        lane = self._lanes[key] if key not in self._queued else self._take_queued(key)
        if lane.parked:
            return
        lane.parked = True
        lane.version += 1
        self._requeue(self._groups[lane.group])

    def unpark(self, key: K) -> None:
        lane = self._lanes.get(key)
        if lane is None or not lane.parked:
            return
        lane.parked = False
        lane.pass_ = max(lane.pass_, self._vtime)
        self._push_lane(self._groups[lane.group], lane)

    def pick(
        self,
        group_ready: Callable[[G], bool] | None = None,
        lane_ready: Callable[[K], bool] | None = None,
    ) -> K | None:
        """The next lane, charged one pick; None when no ready lane remains.

        Groups for which ``group_ready`` is false are skipped for this pick
        only (a busy download slot frees itself without telling us, so there
        is no wake-up to wait for; the number of busy slots is bounded by the
        downloader's total concurrency, so skipping them stays cheap). Lanes
        for which ``lane_ready`` is false are parked until :meth:`unpark`.
        """
        top = self._top
        skipped: list[tuple[int, int, int, G]] = []
        try:
            return self._pick(group_ready, lane_ready, skipped)
        finally:
            for entry in skipped:
                heapq.heappush(top, entry)

    def _pick(
        self,
        group_ready: Callable[[G], bool] | None,
        lane_ready: Callable[[K], bool] | None,
        skipped: list[tuple[int, int, int, G]],
    ) -> K | None:
        top = self._top
        while top:
            head_pass, head_order, version, gkey = top[0]
            grp = self._groups.get(gkey)
            if grp is None or grp.version != version:
                heapq.heappop(top)
                continue
            if group_ready is not None and not group_ready(gkey):
                skipped.append(heapq.heappop(top))
                continue
            lane = self._head(grp)
            if lane is None:
                heapq.heappop(top)
                grp.top = None
                continue
            if (lane.pass_, lane.order) != (head_pass, head_order):
                heapq.heappop(top)
                self._requeue(grp)
                continue
            if lane_ready is not None and not lane_ready(lane.key):
                self.park(lane.key)
                continue
            # charge the lane and put it back
            heapq.heappop(grp.heap)
            self._vtime = lane.pass_
            lane.pass_ += self._stride(lane)
            lane.version += 1
            heapq.heappush(grp.heap, (lane.pass_, lane.order, lane.version, lane.key))
            heapq.heappop(top)
            self._requeue(grp)
            return lane.key
        return None

    # -- internals ---------------------------------------------------------------

    def _head(self, grp: _Group[K, G]) -> _Lane[K, G] | None:
        heap = grp.heap
        head = None
        while heap:
            _, _, version, key = heap[0]
            lane = self._lanes.get(key)
            if lane is not None and lane.version == version and not lane.parked:
                head = lane
                break
            heapq.heappop(heap)
        at = self._front(grp)
        if at >= 0 and (head is None or (grp.rows[3 * at], grp.rows[3 * at + 1]) < (head.pass_, head.order)):
            head = self._unqueue(grp, at)  # a queued lane becomes the head: now a lane in the heap
            heapq.heappush(heap, (head.pass_, head.order, head.version, head.key))
        return head

    def _front(self, grp: _Group[K, G]) -> int:
        """The position of the first row of the group's queue that is not void (-1: none)."""
        queued, void = grp.queued, grp.void
        while grp.first < len(queued):
            key = queued[grp.first]
            count = void.get(key)
            if not count:
                return grp.first
            if count == 1:
                del void[key]
            else:
                void[key] = count - 1
            grp.first += 1
        return -1

    def _unqueue(self, grp: _Group[K, G], at: int) -> _Lane[K, G]:
        """The lane of queued row ``at`` (the front, or the row ``void`` marks gone)."""
        rows, key = grp.rows, grp.queued[at]
        lane = _Lane(key, self._queued.pop(key), rows[3 * at + 2], rows[3 * at + 1], pass_=rows[3 * at], version=1)
        self._lanes[key] = lane
        if at == grp.first:
            grp.first += 1
            if grp.first >= 1024 and 2 * grp.first >= len(grp.queued):  # let go of the rows behind
                del grp.queued[: grp.first], grp.rows[: 3 * grp.first]
                grp.first = 0
        return lane

    def _take_queued(self, key: K) -> _Lane[K, G]:
        """A queued lane parked before it was reached: its row becomes void, the lane an object."""
        grp = self._groups[self._queued[key]]
        skip = grp.void.get(key, 0)  # void rows of the key come before its live one
        for at in range(grp.first, len(grp.queued)):
            if grp.queued[at] == key:
                if not skip:
                    break
                skip -= 1
        if at != grp.first:  # the front row is let go of by _unqueue itself
            grp.void[key] = grp.void.get(key, 0) + 1
        return self._unqueue(grp, at)

    def _push_lane(self, grp: _Group[K, G], lane: _Lane[K, G]) -> None:
        lane.version += 1
        heapq.heappush(grp.heap, (lane.pass_, lane.order, lane.version, lane.key))
        if grp.top is not None and (lane.pass_, lane.order) > grp.top:
            return  # the group's head and its top-heap entry stand (no stale entry per lane added)
        self._requeue(grp)

    def _requeue(self, grp: _Group[K, G]) -> None:
        """Give the group a top-heap entry keyed by its current head lane."""
        grp.version += 1
        lane = self._head(grp)
        if lane is None:
            grp.top = None
            return
        grp.top = (lane.pass_, lane.order)
        top = self._top
        heapq.heappush(top, (lane.pass_, lane.order, grp.version, grp.key))
        # stale entries of requeued groups: let go (in place: a pick holds the list)
        if len(top) > 2 * len(self._groups) + 64:
            groups = self._groups
            top[:] = [entry for entry in top if (g := groups.get(entry[3])) is not None and g.version == entry[2]]
            heapq.heapify(top)

    def _rescale(self, factor: int) -> None:
        """New weight changed the LCM: scale every pass so strides stay exact."""
        self._vtime *= factor
        for lane in self._lanes.values():
            lane.pass_ *= factor
        for grp in self._groups.values():
            rows = grp.rows
            for at in range(3 * grp.first, len(rows), 3):
                rows[at] *= factor
            grp.heap = [(p * factor, o, v, k) for p, o, v, k in grp.heap]
            heapq.heapify(grp.heap)
            if grp.top is not None:
                grp.top = (grp.top[0] * factor, grp.top[1])
        self._top = [(p * factor, o, v, g) for p, o, v, g in self._top]
        heapq.heapify(self._top)
