"""``RedisFrontier``: the frontier of one worker of a job whose lanes live in Redis.

An :class:`idcrawl.core.frontier.IdFrontier` whose decisions are made in Redis by the job's scripts
(:class:`idcrawl.distributed.job.RedisJob`); its :class:`~idcrawl.core.lanes.Lane` objects are mirrors
of the job's lanes, counting this worker's share. The why: docs/architecture.md, "The fleet's frontier".
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Container, Hashable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from idcrawl.core.frontier import Decided, Dispatch, Dispensed, LaneSpec, Touched, lane_specs
from idcrawl.core.inputs import TargetError
from idcrawl.core.interleave import Interleaver
from idcrawl.core.lanes import BEHIND_WINDOWS, Lane, Outcome
from idcrawl.core.resume import resume_specs
from idcrawl.core.targets import Target
from idcrawl.distributed.codec import space_id, spec_conflict, spec_json, target_spec
from idcrawl.distributed.connection import reply_text
from idcrawl.distributed.job import CODES, OUTCOMES, RedisJob
from idcrawl.distributed.pagerecords import FleetPageRecords, is_due_lane
from idcrawl.distributed.replies import Deltas, LaneState, Released, TouchedRow
from idcrawl.distributed.runs import Run, join_run
from idcrawl.state import decode

if TYPE_CHECKING:
    pass

__all__ = ["MAX_DISTRIBUTED_ID", "JobStatus", "RedisFrontier", "StateLost", "TargetConflict", "check_distributed"]

P = TypeVar("P")



class TargetConflict(ValueError):
    """A target name the job already has, with other parameters."""


class StateLost(TargetConflict):
    """Keys of the job are gone from Redis (evicted, deleted): a target cannot be joined."""


class JobStatus:
    """The job as the last poll saw it."""

    __slots__ = ("delayed", "feed", "lost", "next_due", "orphans", "quiet", "seen", "tver", "unsettled")

    def __init__(self) -> None:
        self.unsettled = self.delayed = self.orphans = self.feed = self.tver = 0
        self.next_due = -1.0  # seconds until the earliest shared retry falls due; -1: none
        self.quiet = 0.0  # seconds since the job last made progress or a worker was busy (STATUS)
        self.lost = ""  # a key of the job found missing, or ''
        self.seen = False

    @property
    def finished(self) -> bool:
        return self.seen and not (self.unsettled or self.delayed or self.orphans or self.feed)


#: Lanes whose keys a poll checks (in turn over the worker's unsettled lanes: a lost key is found within
#: lanes / CHECKED_PER_POLL polls), and changed lanes a poll reads at most (more: the next poll goes on).
CHECKED_PER_POLL = 4
CHANGES_PER_POLL = 1000

#: The largest id a distributed job holds: the job's Lua scripts keep ids as Lua numbers (doubles),
#: exact up to 2**53. A single-process crawl goes to 2**64-1 (idcrawl.core.lanes.MAX_ID).
MAX_DISTRIBUTED_ID = 2**53 - 1


def check_distributed(target: Target) -> None:
    """Refuse a target whose ids a distributed job cannot hold exactly (TargetError naming the key)."""
    for key in ("start", "min", "max"):
        value = getattr(target, key)
        if value is not None and value > MAX_DISTRIBUTED_ID:
            raise TargetError(key, value, f"is above the largest id a distributed job can hold "
                                          f"(2**53-1 = {MAX_DISTRIBUTED_ID}: Redis's Lua numbers are doubles)")


class RedisFrontier(Generic[P]):
    """Lanes of a Redis job, dispensed and decided through Lua scripts."""

    def __init__(
        self,
        job: RedisJob,
        worker: str,
        *,
        block: int = 8,
        lease_ms: int = 8_000,
        group_of: Callable[[Target], Hashable] | None = None,
        neutral: frozenset[Outcome] = frozenset(),
        encode: Callable[[P], bytes] | None = None,
        decode: Callable[[str, int, bytes], P] | None = None,
        concurrency: int = 0,
        adaptive: bool = True,
        sequential: Callable[[Target], bool] | None = None,
        max_held: int = 0,
    ) -> None:
        """``concurrency``: requests this worker runs at once (0: unknown); with many lanes a claim
        takes no more ids than the worker's share per lane (:meth:`claim_size`).
        ``adaptive``: the lanes this worker registers follow adaptive speculation (CLAIM hands out at
        most margin ids past a lane's earliest possible cut, the window counted from its window base).
        ``sequential(target)``: this worker's slot of the target's host takes one request at a time; its
        claims then take no id past the lane's earliest possible cut (see ``Frontier``): with every
        worker's slot sequential the fleet sends no request past a cut.
        ``max_held`` (``IDCRAWL_MAX_HELD_PAYLOADS``, 0: no cap): the cap on the payloads of shared ids an id
        space holds for the whole fleet (see ``Frontier``): a claim for a lane of a space at the cap that
        no held id waits for hands out no new ids, and the lane parks until a poll shows room or an
        outcome recorded here may have freed some."""
        self.adaptive = adaptive
        self.max_held = max(0, max_held)
        self._capped: set[str] = set()  # lanes parked because the cap kept their last claim from new ids
        self._space_ids: dict[str, str] = {}  # target name -> its id space (codec.space_id)
        #: claims the cap kept from handing out new ids (stat idcrawl/redis/held_cap_waits)
        self.held_cap_waits = 0
        self._sequential = sequential
        self._unspeculative: set[str] = set()  # lanes this worker claims without speculation
        self.job = job
        self.worker = worker
        self.block = max(1, block)
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self._group_of = group_of or (lambda t: t.host)
        self._neutral = neutral
        self._encode = encode
        self._decode = decode
        self._iv: Interleaver[str, Hashable] = Interleaver()
        self.targets: dict[str, Target] = {}
        self.lanes: dict[str, Lane[P]] = {}
        self.lane_target: dict[str, Target] = {}
        self.lane_direction: dict[str, str] = {}
        self.skipped_found = 0  # a Redis job resumes by itself: no ids known from an earlier run
        #: lane ids served without a request because an overlapping lane fetched them (this worker's claims;
        #: a total)
        self.deduplicated = 0
        #: what a call of :meth:`next` that an error cut short did (released, touched, deduplicated): the
        #: next call returns it with its own
        self._cut_short: tuple[list[P], list[Touched], int] = ([], [], 0)
        self.status = JobStatus()
        self._buffers: dict[str, deque[int]] = {}
        self._misses: dict[str, int] = {}  # lane -> misses in a row among its latest outcomes recorded here
        #: claimed ids not fetched because this worker learnt of the lane's cut first
        self.dropped_past_cut = 0
        #: the worker's page records (resume=due): a visited page's record goes with its outcome (record)
        self.page_records: FleetPageRecords | None = None
        self._parked: set[str] = set()
        self._unsettled: set[str] = set()
        self._closed_here: set[str] = set()  # lanes a limit stopped in this worker (the job's lane goes on)
        #: ids handed to this worker's downloader and not decided yet: (lane, id)
        self.inflight: set[tuple[str, int]] = set()
        #: monotonic time of the last id this worker dispensed or decided
        self.last_activity = time.monotonic()
        #: lanes this worker knows that Redis no longer has (the last poll)
        self.vanished: set[str] = set()
        #: a worker started without targets waits for pushed ones even when the job is finished
        self.wait_for_feed = False
        #: list lanes (resumed holes): their ids by position, and each id's position
        self._ids: dict[str, tuple[int, ...]] = {}
        self._positions: dict[str, dict[int, int]] = {}
        self._not_listed: set[str] = set()  # lanes of targets not joined here, known not to be list lanes
        #: the fleet's run this worker belongs to (:meth:`join_run`; None: not asked yet)
        self.run: Run | None = None
        #: the lane change serial this worker's mirrors are up to (STATUS; None: no lane read yet)
        self._since: int | None = None
        self._checked = 0  # where the next poll's lost-key checks start among the unsettled lanes

    # -- targets ---------------------------------------------------------------

    def add_target(
        self,
        target: Target,
        specs: Sequence[LaneSpec] | None = None,
        known_found: Container[int] | None = None,
    ) -> None:
        """Join the target in Redis (creating its lanes if the job does not have it yet).

        A target the job has under this name with other parameters raises
        :class:`TargetConflict`. ``specs`` and ``known_found`` (resumed lanes of a
        single-process state) are not supported: a Redis job resumes by itself, and
        ``resume=bound|holes|all`` goes through :meth:`resume` once the target is added.
        """
        if specs is not None or known_found is not None:
            raise ValueError("a Redis job resumes from its own state: no resumed lanes")
        if target.name in self.targets:
            raise ValueError(f"target {target.name!r} already in the frontier")
        mine = target_spec(target)
        lanes = lane_specs(target)
        neutral = "1" if Outcome.FAILED in self._neutral else "0"
        rows = [(spec.key, spec.start, spec.step, "" if spec.stop is None else str(spec.stop), target.margin,
                 target.window, neutral, spec.weight) for spec in lanes]
        reply = self.job.register(target.name, spec_json(mine), rows, space_id(target), self.adaptive)
        if reply.lost:
            raise StateLost(f"the job's key {reply.lost} is gone from Redis, its target {target.name!r}'s "
                            "lanes are there (evicted or deleted): clean the job (scrapy idjob clean) to start over")
        if reply.stored is not None:
            where = f"key {self.job.keys.specs!r}"
            with decode.reading(f"Redis job {self.job.prefix!r}"):
                conflict = spec_conflict(mine, decode.json_object(reply.stored, where, target.name,
                                                                  "the target's spec"))
            if conflict is not None:
                raise TargetConflict(f"target {target.name!r}: {conflict} in Redis job {self.job.prefix!r}")
        self._add_lanes(target, lanes)

    def _add_lanes(self, target: Target, lanes: Sequence[LaneSpec]) -> None:
        self.targets[target.name] = target
        group = self._group_of(target)
        pipe = self.job.client.pipeline(transaction=False)
        first = self._since is None
        if first:  # the change serial before the lanes are read: every later change comes in a poll
            pipe.hget(self.job.keys.progress, "chg")
        for spec in lanes:
            pipe.hmget(self.job.keys.lane(spec.key), *LaneState.FIELDS)
        pipe.sismember(self.job.keys.resumed, target.name)  # has a resume added lanes to it?
        *states, resumed = pipe.execute()
        if first:
            serial, *states = states
            self._since = int(serial or 0)
        for spec, state in zip(lanes, states, strict=True):
            lane: Lane[P] = Lane(
                spec.key, start=spec.start, step=spec.step, stop=spec.stop,
                margin=target.margin, window=target.window, neutral=self._neutral,
            )
            self.lanes[spec.key] = lane
            self.lane_target[spec.key] = target
            self.lane_direction[spec.key] = spec.direction
            self._buffers[spec.key] = deque()
            if self._sequential is not None and self._sequential(target):
                self._unspeculative.add(spec.key)
            known = LaneState.read(state)
            if known is not None:
                self._sync(spec.key, known)
            if not lane.settled:
                self._unsettled.add(spec.key)
                self._iv.add(spec.key, group, spec.weight)
        if resumed:
            self._add_list_lanes(target, exclude={spec.key for spec in lanes})

    def _add_list_lanes(self, target: Target, exclude: Container[str] = (), only: Container[str] | None = None) -> None:
        """Join the target's unsettled list lanes (resumed holes) that Redis has (``only``: those)."""
        client = self.job.client
        keys = [key for key in (reply_text(k) for k in client.lrange(self.job.keys.target_lanes(target.name), 0, -1))
                if key not in exclude and key not in self.lanes and (only is None or key in only)]
        if not keys:
            return
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(self.job.keys.lane(key), "ids", *LaneState.FIELDS)
        states = pipe.execute()
        lists = [(key, LaneState.parse(fields)) for key, (ids, *fields) in zip(keys, states, strict=True)
                 if ids is not None]  # a list lane has ids
        listed = [(key, state) for key, state in lists if not (state.reason and state.first_undecided == state.next_id)]
        if not listed:
            return
        pipe = client.pipeline(transaction=False)
        for key, _ in listed:
            pipe.lrange(self.job.keys.lane(key, "ids"), 0, -1)
        for (key, state), raw_ids in zip(listed, pipe.execute(), strict=True):
            ids = tuple(int(i) for i in raw_ids)
            lane: Lane[P] = Lane(key, start=0, step=1, stop=len(ids) - 1, margin=0, window=target.window,
                                 neutral=self._neutral)
            self._ids[key] = ids
            self._positions[key] = {id_: pos for pos, id_ in enumerate(ids)}
            self.lanes[key] = lane
            self.lane_target[key] = target
            self.lane_direction[key] = "holes"
            self._buffers[key] = deque()
            self._sync(key, state)
            if not lane.settled:
                self._unsettled.add(key)
                self._iv.add(key, self._group_of(target), target.rate_asc)

    def join_list_lanes(self) -> None:
        """Join the unsettled list lanes of resumes registered since this worker started
        (targets listed in ``P resumed``): a worker started without ``resume`` helps too."""
        for name in sorted(reply_text(n) for n in self.job.client.smembers(self.job.keys.resumed)):
            target = self.targets.get(name)
            if target is not None:
                self._add_list_lanes(target, exclude={spec.key for spec in lane_specs(target)})
                for key, lane in list(self.lanes.items()):  # cut lanes a resume may have reopened
                    if (self.lane_target[key].name == name and key not in self._ids and lane.settled
                            and key not in self._closed_here):
                        self._refresh(key)

    def join_run(self, wave: int | None = None) -> Run:
        """The fleet's run this worker belongs to (:func:`idcrawl.distributed.runs.join_run`), asked once:
        its resume plans and the URL queue (``RedisUrlQueue.start``) follow it."""
        if self.run is None:
            self.run = join_run(self.job.client, self.job.prefix, self.worker, lease_ms=self.lease_ms, wave=wave)
        return self.run

    def resume(self, target: Target, *, walk_tail: bool = True, due_pages: Sequence[int] = (),
               wave: int | None = None, late: Sequence[int] = (), reach: int | None = None,
               max_reach: int | None = None) -> str | None:
        """Resume ``target`` for the whole job as one process resumes the same state
        (:func:`idcrawl.core.resume.resume_specs`): the first worker registers the plan, the others join it
        (:class:`TargetConflict`: other resume arguments). ``walk_tail``: the planner found the tail due;
        ``due_pages``: the found ids due for a revisit; ``wave``: a watching fleet's later wave (ms);
        ``late``: the late ids to re-probe (a ``<target>:late`` list lane); ``reach``: the tail's reach
        (:func:`idcrawl.core.resume.tail_reach`, read by the planner from the tail's schedule), at most
        ``max_reach`` ids (``IDCRAWL_SITEMAP_MAX_REACH``).
        Returns ``created``, ``joined``, or None (nothing crawled yet). docs/architecture.md, "Resumes in a fleet"."""
        from idcrawl.distributed.state import JobStateStore

        state = JobStateStore(self.job.client, self.job.prefix, read_only=True).load(target.name)
        reopen: list[tuple[str, int, int | None]] = []
        holes = None
        more: list[tuple[str, Sequence[int]]] = []
        fresh = state is None or all(record.cursor == record.start for record in state.lanes.values())
        if state is not None and not fresh:  # else nothing crawled yet: the lanes start fresh (the fleet's plan)
            specs = resume_specs(target, state.lanes, state.outcomes, target.resume, target.holes,
                                 walk_tail=walk_tail, due_pages=due_pages, late=late, reach=reach,
                                 max_reach=max_reach)
            own = {spec.key for spec in lane_specs(target)}
            reopen = [(spec.key, spec.start, spec.reach) for spec in specs if spec.ids is None and spec.key in own]
            lists = [spec for spec in specs if spec.ids is not None]
            late_key = f"{target.name}:late"
            holes = next((spec for spec in lists if spec.key != late_key), None)
            more = [(spec.key, spec.ids or ()) for spec in lists if spec.key == late_key]
        args = f"resume={target.resume}" + (f", holes={target.holes}" if target.resume in ("holes", "all") else "")
        if wave is not None:
            args += f", wave={wave}"
        neutral = "1" if Outcome.FAILED in self._neutral else "0"
        reply = self.job.resume(
            self.worker, target.name, args, holes.key if holes is not None else f"{target.name}:holes",
            (target.window, neutral, target.rate_asc, self.join_run(wave).number),
            reopen, holes.ids if holes is not None and holes.ids else (), more,
        )
        verdict = reply.verdict
        if verdict == "conflict" and target.resume == "auto":
            return None  # the default joins the job as it is, the lanes of the resume in progress included
        if verdict == "conflict":
            raise TargetConflict(
                f"target {target.name!r}: {args} differs from the resume the job's workers are running "
                f"({reply.conflict}) in Redis job {self.job.prefix!r}: start this worker with the same "
                "arguments, or once that resume has finished"
            )
        if fresh:
            # registered all the same: a worker of this fleet that starts once the fresh lanes have been walked
            # (a lane cut by its margin) joins this plan instead of planning a resume of its own, which would
            # reopen the cut lanes and walk them a second time in the same run
            return None
        lanes = reply.lanes
        listed = [key for key in lanes if key not in self.lanes]
        for key in lanes:
            if key in self.lanes:
                self._refresh(key)
        if listed:
            self._add_list_lanes(target, only=set(listed))
        return verdict

    def _refresh(self, key: str) -> None:
        """Read a lane the job changed (a cut lane a resume reopened) into its mirror, its reach too
        (:attr:`idcrawl.core.frontier.LaneSpec.reach`: the claim size does not shrink on the way to it)."""
        *fields, reach = self.job.client.hmget(self.job.keys.lane(key), *LaneState.FIELDS, "reach")
        state = LaneState.read(fields)
        if state is None:
            return
        self.lanes[key].reach = int(reply_text(reach)) if reach else None
        self._sync(key, state)
        self._misses[key] = 0
        lane = self.lanes[key]
        if not lane.settled and key not in self._unsettled:
            self._unsettled.add(key)
            if key not in self._iv:
                target = self.lane_target[key]
                weight = next((spec.weight for spec in lane_specs(target) if spec.key == key), target.rate_asc)
                self._iv.add(key, self._group_of(target), weight)

    def list_lanes(self) -> dict[str, tuple[int, ...]]:
        """The list lanes (resumed holes) this worker walks: lane key -> its ids."""
        return {key: ids for key, ids in self._ids.items() if key in self.lanes}

    def redis_id(self, lane_key: str, id_: int) -> int:
        """What Redis calls an id of a lane: its position in a list lane, else the id itself."""
        positions = self._positions.get(lane_key)
        return positions.get(id_, -1) if positions is not None else id_

    def id_of(self, lane_key: str, redis_id: int) -> int:
        """The id of what Redis calls ``redis_id`` in a lane (:meth:`redis_id` reversed)."""
        ids = self._ids.get(lane_key)
        if ids is None and lane_key not in self.lanes and lane_key not in self._not_listed:
            if not self.job.client.hexists(self.job.keys.lane(lane_key), "ids"):
                self._not_listed.add(lane_key)
                return redis_id
            ids = self._ids[lane_key] = tuple(
                int(i) for i in self.job.client.lrange(self.job.keys.lane(lane_key, "ids"), 0, -1))
            self._positions[lane_key] = {id_: pos for pos, id_ in enumerate(ids)}
        return ids[redis_id] if ids is not None else redis_id

    def _back(self, lane_key: str, id_: int) -> tuple[str, int] | None:
        """For a list lane: the target's lane ``id_`` belongs to and its position there."""
        if lane_key not in self._ids:
            return None
        target = self.lane_target[lane_key]
        if is_due_lane(lane_key, target.name):  # revisited found pages: found stays found (gone is counted)
            return None
        for spec in lane_specs(target):
            if (id_ - spec.start) * spec.step >= 0:
                return spec.key, (id_ - spec.start) * spec.step
        return None

    def known_specs(self) -> dict[str, dict[str, Any]]:
        """Every target of the job (name -> spec), for workers that learn of pushed targets."""
        return self.job.specs()

    def join(self, target: Target) -> None:
        """Add a target the job already has (pushed by someone else): no registration."""
        if target.name not in self.targets:
            self._add_lanes(target, lane_specs(target))

    def read_lanes(self) -> Iterator[tuple[str, Lane[P]]]:
        return iter(self.lanes.items())

    def lane_states(self) -> Iterator[tuple[str, Lane[P] | str | None]]:
        return iter(self.lanes.items())

    def lanes_of(self, target_name: str) -> Iterator[Lane[P]]:
        for key, target in self.lane_target.items():
            if target.name == target_name:
                yield self.lanes[key]

    # -- mirrors -----------------------------------------------------------------

    def _sync(self, key: str, state: LaneState) -> tuple[bool, bool]:
        """Copy the job's view of a lane into its mirror; returns (stopped now, settled now)."""
        lane = self.lanes[key]
        was_stopped, was_settled = lane.stopped, lane.settled
        lane.first_undecided = state.first_undecided
        lane.next_id = state.next_id
        lane.reason = state.reason
        lane.cut_at = state.cut_at
        lane.last_found = state.last_found
        if lane.settled and key in self._unsettled:
            self._unsettled.discard(key)
            if key in self._iv and not self._buffers[key]:
                self._iv.remove(key)
        return lane.stopped and not was_stopped, lane.settled and not was_settled

    # -- dispensing ------------------------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispensed[P]:
        """The next id by weight among this worker's ready lanes (None: none now); claims a block when a
        lane's buffer is empty. A claim may release payloads and decide ids of overlapping lanes."""
        released, touched, deduplicated = self._cut_short
        self._cut_short = ([], [], 0)
        before = self.deduplicated
        try:
            dispatch = self._next(group_ready, released, touched)
        except BaseException:
            self._cut_short = (released, touched, deduplicated + self.deduplicated - before)
            raise
        return Dispensed(dispatch, released, touched, 0, deduplicated + self.deduplicated - before)

    def _next(self, group_ready: Callable[[Hashable], bool] | None, released: list[P],
              touched: list[Touched]) -> Dispatch | None:
        while True:
            key = self._iv.pick(group_ready, self._lane_ready)
            if key is None:
                return None
            buffer = self._buffers[key]
            if not buffer:
                deduplicated = self.deduplicated
                buffer.extend(self._claim(key, released, touched))
                if not buffer and self.deduplicated != deduplicated and self._room(self.lanes[key]):
                    continue  # every id claimed was an overlapping lane's: claim again
                if not buffer:
                    if key in self._iv:
                        if key in self._unsettled:
                            self._iv.park(key)
                            self._parked.add(key)
                        else:
                            self._iv.remove(key)
                    continue
            id_ = buffer.popleft()
            lane = self.lanes[key]
            if lane.cut_at is not None and (id_ - lane.cut_at) * lane.step > 0:
                self._drop_past_cut(key, lane, id_)
                continue
            lane.counts.dispensed += 1
            ids = self._ids.get(key)
            if ids is not None:  # a list lane: Redis hands out positions
                id_ = ids[id_]
            self.inflight.add((key, id_))
            self.last_activity = time.monotonic()
            return Dispatch(self.lane_target[key], key, id_)

    def _drop_past_cut(self, key: str, lane: Lane[P], id_: int) -> None:
        """Claimed ids past a cut this worker knows of are not fetched: Redis forgets their claims
        (an overlapping lane waiting for one of them fetches it instead)."""
        buffer = self._buffers[key]
        assert lane.cut_at is not None
        past = [i for i in (id_, *buffer) if (i - lane.cut_at) * lane.step > 0]
        kept = [i for i in buffer if (i - lane.cut_at) * lane.step <= 0]
        buffer.clear()
        buffer.extend(kept)
        self.job.give_back(self.worker, key, past)
        self.dropped_past_cut += len(past)

    def _room(self, lane: Lane[P], was: bool = False) -> bool:
        """May the job's lane have room for new ids (so a parked lane is worth a claim)? The mirror
        knows the fixed window; an adaptive lane's room also depends on its earliest possible cut and
        window base, kept in Redis only: any change may have made room, up to the lane's memory bound
        (``BEHIND_WINDOWS``), at the price of a claim that may come back empty and park it again
        (a poll reads the job's own answer, STATUS's room).
        ``was``: the value before the change (a fixed-window lane is unparked when it turns True)."""
        if not self.adaptive:
            return lane.ready and not was
        return lane.reason is None and lane.ahead < lane.window * BEHIND_WINDOWS

    def _lane_ready(self, key: str) -> bool:
        return bool(self._buffers[key]) or key in self._unsettled

    def claim_size(self, key: str) -> int:
        """Ids to claim for a lane: the block, halved for each miss in a row (a cut may be near: ids
        claimed past it would be fetched for nothing). The misses: those at the end of the lane's
        decided prefix (the job's, as last seen) or among its latest outcomes this worker recorded.
        A list lane (resumed holes) has no margin: always the block."""
        lane = self.lanes[key]
        reach, step = lane.reach, lane.step
        after = lane.last_found  # misses are counted after it, or after the reach when that is later
        if reach is not None and (after is None or (reach - after) * step > 0):
            after = reach
        if key in self._ids:  # a list lane has no margin: no cut to come
            misses = 0
        elif reach is not None and (reach - lane.first_undecided) * step >= 0:
            misses = 0  # on the way to its reach: no cut can come before it
        elif after is not None:
            misses = max((lane.first_undecided - after) * step - 1, self._misses.get(key, 0))
        else:
            misses = max((lane.first_undecided - lane.start) * lane.step, self._misses.get(key, 0))
        size = self.block >> min(misses, 16)
        if self.concurrency:  # no more than this worker's share of its lanes: held ids wait, a cut may come first
            size = min(size, -(-self.concurrency // max(1, len(self._unsettled))))
        return max(1, size)

    def _claim(self, key: str, released: list[P], touched: list[Touched]) -> list[int]:
        """Claim ids of a lane; what the claim released and decided in overlapping lanes goes to
        ``released`` and ``touched``."""
        speculation = 0 if key in self._unspeculative else None
        reply = self.job.claim(self.worker, key, self.claim_size(key), self.lease_ms, speculation, self.max_held)
        if reply is None:
            return []
        if reply.capped:
            self.held_cap_waits += 1
            self._capped.add(key)  # parked by next() if nothing came: woken by a poll or an outcome here
        touched += self._take_touched(reply.touched)
        released += self._released(reply.released)
        self._sync(key, reply.state)
        self.deduplicated += reply.deduplicated
        return list(reply.ids)

    def _released(self, released: Sequence[Released]) -> list[P]:
        """The payloads of a reply's released outputs."""
        if self._decode is None:
            return []
        return [self._decode(item.lane, self.id_of(item.lane, item.id), item.blob) for item in released]

    def _take_touched(self, rows: Sequence[TouchedRow]) -> list[Touched]:
        """Lanes of a shared id space that a reply decided an id of: their mirrors and counts updated."""
        touched: list[Touched] = []
        for row in rows:
            key = row.lane
            lane = self.lanes.get(key)
            if lane is None:  # a lane of a target this worker has not joined yet: its counts are the job's
                continue
            before = replace(lane.counts)
            was_ready = lane.ready
            stopped, _settled = self._sync(key, row.state)
            self._add_counts(lane, row.deltas)
            became_ready = key in self._parked and self._room(lane, was_ready) and self.unpark(key)
            touched.append(Touched(key, row.id, OUTCOMES[row.code], before, replace(lane.counts), stopped,
                                   became_ready))
        return touched

    @staticmethod
    def _add_counts(lane: Lane[P], deltas: Deltas) -> None:
        for name, delta in deltas.items():
            if delta:
                setattr(lane.counts, name, getattr(lane.counts, name) + delta)

    def unpark(self, key: str) -> bool:
        """Let a parked lane be picked again (the job showed room); True if it was parked."""
        self._capped.discard(key)
        if key not in self._parked:
            return False
        self._parked.discard(key)
        if key in self._iv:
            self._iv.unpark(key)
        return True

    def reopen_settled(self) -> int:
        """After a failover that may have lost writes: the lanes this worker saw settled are read again,
        and those the job holds unsettled (their last outcomes lost with the old primary) are walked
        again; returns how many. One read per settled lane, once per failover. The unsettled lanes are
        read again too, with the change serial first (the promoted server's may be behind this worker's)."""
        self._resync()
        reopened = 0
        for key, lane in list(self.lanes.items()):
            if lane.settled and key not in self._closed_here:
                self._refresh(key)
                reopened += key in self._unsettled
        return reopened

    def _resync(self) -> None:
        """The change serial, then every unsettled lane, read again: the polls go on from there."""
        keys = sorted(self._unsettled)
        pipe = self.job.client.pipeline(transaction=False)
        pipe.hget(self.job.keys.progress, "chg")
        for key in keys:
            pipe.hmget(self.job.keys.lane(key), *LaneState.FIELDS)
        serial, *states = pipe.execute()
        self._since = int(serial or 0)
        for key, raw in zip(keys, states, strict=True):
            state = LaneState.read(raw)
            if state is not None:
                self._sync(key, state)
                self.unpark(key)  # a claim finds out whether it has room

    def give_back_unknown(self) -> int:
        """Give back the ids Redis says this worker holds but the worker does not know.

        A claim (or a taken retry) whose reply was cut by an outage leaves ids
        owned by this worker in Redis that it will never fetch; its heartbeat
        keeps them from being taken back, so the lane's prefix would wait on
        them for ever. Called once Redis answers again; returns how many went back.
        """
        keys = sorted(self._unsettled)
        if not keys:
            return 0
        pipe = self.job.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(self.job.keys.lane(key, "own"))
        owners = pipe.execute()
        given = 0
        for key, own in zip(keys, owners, strict=True):
            known = set(self._buffers[key]) | {self.redis_id(key, id_) for lane, id_ in self.inflight if lane == key}
            unknown = [reply_text(id_) for id_, who in own.items() if reply_text(who) == self.worker
                       and int(reply_text(id_)) not in known]
            if unknown:
                given += self.job.give_back(self.worker, key, unknown)
        return given

    # -- outcomes ----------------------------------------------------------------

    def record(self, lane_key: str, id_: int, outcome: Outcome, payload: P | None = None) -> Decided[P]:
        """Record an outcome in Redis; returns the outputs of found ids the prefix passed."""
        lane = self.lanes.get(lane_key)
        if lane is None:
            return Decided([])
        redis_id = self.redis_id(lane_key, id_)
        if redis_id < 0:  # not an id of this list lane
            return Decided([])
        blob = self._encode(payload) if payload is not None and self._encode is not None else b""
        self.inflight.discard((lane_key, id_))
        self.last_activity = time.monotonic()
        records = self.page_records
        page = records.outgoing(self.lane_target[lane_key].name, id_) if records is not None else None
        reply = self.job.record(self.worker, lane_key, redis_id, CODES[outcome], blob, self._back(lane_key, id_), page)
        if outcome is Outcome.FOUND:
            self._misses[lane_key] = 0
        elif outcome not in self._neutral and not (lane.reach is not None and (lane.reach - id_) * lane.step >= 0):
            self._misses[lane_key] = self._misses.get(lane_key, 0) + 1
        if reply is None:
            return Decided([])
        was_ready = lane.ready
        stopped, _settled = self._sync(lane_key, reply.state)
        self._add_counts(lane, reply.deltas)
        overshoot = reply.deltas.overshoot > 0 and outcome is Outcome.FOUND
        released = self._released(reply.released)
        if page is not None and records is not None:  # written unless a duplicate or dropped past the cut
            records.sent(page, not reply.duplicate and not (page.emits and overshoot))
        became_ready = lane_key in self._parked and self._room(lane, was_ready) and self.unpark(lane_key)
        touched = self._take_touched(reply.touched)
        if self._capped:
            self._wake_capped(lane_key)
        return Decided(released, touched, stopped, became_ready, overshoot)

    def _wake_capped(self, lane_key: str) -> None:
        """An outcome in a lane's id space may have freed held payloads (or made a held id wait for a
        lane): the lanes of that space the cap parked here claim again (a claim that may come back
        empty and park them again; a poll wakes them too, from the job's own answer)."""
        space = self._space_of(lane_key)
        for key in [k for k in self._capped if self._space_of(k) == space]:
            self.unpark(key)

    def _space_of(self, lane_key: str) -> str:
        target = self.lane_target[lane_key]
        space = self._space_ids.get(target.name)
        if space is None:
            space = self._space_ids[target.name] = space_id(target)
        return space

    def close_lane(self, lane_key: str, reason: str) -> Decided[P]:
        """Stop dispensing a lane *in this worker* (a limit, a shutdown); the job's lane goes on."""
        lane = self.lanes[lane_key]
        if lane.reason is None:
            lane.reason = reason
        self._unsettled.discard(lane_key)
        self._closed_here.add(lane_key)
        self._buffers[lane_key].clear()  # claimed, never dispensed: taken back when this worker leaves
        if lane_key in self._iv:
            self._iv.remove(lane_key)
        return Decided([], (), True)

    # -- polling -------------------------------------------------------------------

    def poll(self, busy: bool = False) -> list[str]:
        """Heartbeat, take back ids of stopped workers, refresh the lanes changed since the last poll, check
        the job's keys (and those of ``CHECKED_PER_POLL`` lanes in turn); returns lanes that got room.
        ``busy``: this worker has work in flight (the job is active). Its cost does not grow with the lanes."""
        unsettled = sorted(self._unsettled)
        keys = unsettled
        if len(unsettled) > CHECKED_PER_POLL:
            at = self._checked % len(unsettled)
            keys = (unsettled[at:] + unsettled[:at])[:CHECKED_PER_POLL]
            self._checked = at + CHECKED_PER_POLL
        reply = self.job.status(self.worker, self.lease_ms, keys, self.max_held, busy or bool(self.inflight),
                                since=-1 if self._since is None else self._since, limit=CHANGES_PER_POLL)
        woken: list[str] = []
        self.vanished = set()
        rows = list(zip(keys, reply.lanes, strict=True))
        for member, change in reply.changed:
            if change is None:  # a space's held payloads shrank: its lanes the cap parked here claim again
                base = member[1:]
                for key in [k for k in self._capped if base == f"{self.job.prefix}S:{self._space_of(k)}"]:
                    if self.unpark(key):
                        woken.append(key)
            elif member in self._unsettled:
                rows.append((member, change))
        self._since = max(self._since or 0, reply.serial)
        for key, row in rows:
            if row.state is None:
                self.vanished.add(key)  # the job's state is gone (Redis restarted empty, or cleaned)
                continue
            self._sync(key, row.state)
            if (row.free > 0 or row.room) and self.unpark(key):  # room: the job's (adaptive or not)
                woken.append(key)
        job, status = reply.job, self.status
        status.quiet, status.lost = job.quiet_ms / 1000, job.lost
        status.unsettled, status.delayed, status.orphans = job.unsettled, job.delayed, job.orphans
        status.feed, status.tver = job.feed, job.tver
        status.next_due = job.next_due_ms / 1000 if job.next_due_ms >= 0 else -1.0
        status.seen = True
        return woken

    # -- queries -------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Nothing left in the job: every lane settled, no retry waiting, no orphaned items, no pushed target."""
        if self._unsettled or self.inflight or self.wait_for_feed:
            return False
        # every lane settled in the job, or stopped here by a limit: nothing more for this worker
        return self.status.finished or (bool(self._closed_here) and self._closed_here | self._settled_keys()
                                         >= set(self.lanes))

    def unsettled(self) -> list[str]:
        """The lanes this worker walks that are not settled in the job (as the last poll saw them)."""
        return sorted(self._unsettled)

    def _settled_keys(self) -> set[str]:
        return {key for key, lane in self.lanes.items() if lane.settled}

    def buffered(self) -> int:
        """Ids this worker claimed and has not dispensed yet."""
        return sum(len(buffer) for buffer in self._buffers.values())

    def can_dispense(self) -> bool:
        """Work is left in this worker or in the job (the engine must not go idle while others work)."""
        return bool(self.inflight) or any(self._buffers.values()) or not self.finished

    def outstanding(self) -> int:
        return len(self.inflight)

    def lost(self) -> list[tuple[str, list[int]]]:
        """Nothing: the worker's poll finds ids that vanished (it knows when the engine holds nothing)."""
        return []

