"""``RedisFrontier``: the frontier of one worker of a job whose lanes live in Redis.

It implements :class:`idcrawl.core.frontier.IdFrontier` (``next``,
``record``, ``close_lane``, ``finished``, ``can_dispense``, ``targets``,
``lanes``, ...), so the runtime, the scheduler, the spider, the progress
lines and the limits use it unchanged. What differs is where decisions are
made: a lane's cursor, window, outcomes, margin and cut are in Redis and
change only inside the Lua scripts of :mod:`idcrawl.distributed.scripts`.
The local :class:`~idcrawl.core.lanes.Lane` objects are *mirrors*: their
cursor, cut and reason are the job's as last seen, their counts are this
worker's share (what its own calls decided), so the stats of all workers add
up to the job's.

Overlapping targets share one id space for the whole job, kept by the scripts
(:mod:`idcrawl.distributed.scripts`): a claim hands out only ids no lane of the
space fetches or decided; the rest are :attr:`deduplicated` (a known outcome
is recorded at once, in :attr:`touched`, its items in :attr:`released`), and an
outcome reaches the lanes waiting for it (also in :attr:`touched`).

Round trips: one ``CLAIM`` per block of ``IDCRAWL_REDIS_CLAIM_BLOCK`` ids,
one ``RECORD`` per outcome (it also returns the items the prefix released),
and one ``STATUS`` per poll (the connection counts them in stats:
:func:`idcrawl.distributed.connection.count_calls`). Lanes interleave by weight within a worker (the
core interleaver); a lane whose window is full in Redis is parked until a
poll or an outcome shows room.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Container, Hashable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from idcrawl.core.frontier import Dispatch, LaneSpec, Touched, lane_specs
from idcrawl.core.inputs import TargetError
from idcrawl.core.interleave import Interleaver
from idcrawl.core.lanes import BEHIND_WINDOWS, Lane, Outcome, Recorded
from idcrawl.core.resume import resume_specs
from idcrawl.core.targets import Target
from idcrawl.distributed import scripts
from idcrawl.distributed.codec import space_id, spec_conflict, spec_json, target_spec
from idcrawl.distributed.connection import reply_text
from idcrawl.distributed.pagerecords import FleetPageBook, PageWrite, is_due_lane
from idcrawl.distributed.runs import Run, join_run
from idcrawl.state import decode

if TYPE_CHECKING:
    import redis

__all__ = [
    "CODES", "MAX_DISTRIBUTED_ID", "JobStatus", "RedisFrontier", "RedisJob", "StateLost", "TargetConflict",
    "check_distributed",
]

P = TypeVar("P")

#: Outcome codes in Redis (2 bits per id in the lane's bitfield).
CODES: dict[Outcome, int] = {Outcome.FOUND: 0, Outcome.MISSING: 1, Outcome.FAILED: 2, Outcome.DISALLOWED: 3}
_OUTCOMES = {code: outcome for outcome, code in CODES.items()}
_COUNTS = ("found", "missing", "failed", "disallowed", "emitted", "overshoot", "past_cut")


class TargetConflict(ValueError):
    """A target name the job already has, with other parameters."""


class StateLost(TargetConflict):
    """Keys of the job are gone from Redis (evicted, deleted): a target cannot be joined."""


class RedisJob:
    """One job's keys and scripts on one Redis client.

    Each script has a method that takes only its non-key arguments and passes
    the keys it touches in ``KEYS`` (:mod:`idcrawl.distributed.scripts`).
    """

    #: KEYS[1..4] of the scripts that take back the work of stopped workers (CLAIM, STATUS, LEAVE)
    _RECLAIM = ("workers", "unsettled", "orphans", "job")

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self._register = client.register_script(scripts.REGISTER)
        self._claim = client.register_script(scripts.CLAIM)
        self._record = client.register_script(scripts.RECORD)
        self._status = client.register_script(scripts.STATUS)
        self._adopt = client.register_script(scripts.ADOPT)
        self._leave = client.register_script(scripts.LEAVE)
        self._delay = client.register_script(scripts.DELAY)
        self._pop_delayed = client.register_script(scripts.POP_DELAYED)
        self._polite = client.register_script(scripts.POLITE)
        self._give_back = client.register_script(scripts.GIVE_BACK)
        self._resume = client.register_script(scripts.RESUME)
        self._targets = client.register_script(scripts.TARGETS)

    def key(self, *parts: str) -> str:
        return self.prefix + "".join(parts)

    def lane_keys(self, lane: str, *subkeys: str) -> list[str]:
        """``P L:<lane>`` and then ``P L:<lane>:<subkey>`` for each subkey."""
        hash_key = self.key("L:", lane)
        return [hash_key, *(f"{hash_key}:{sub}" for sub in subkeys)]

    def emit_key(self, worker: str) -> str:
        """The hash of outputs released to ``worker`` and not yet acknowledged."""
        return self.key("W:", worker, ":emit")

    def _reclaim_keys(self) -> list[str]:
        return [self.key(name) for name in self._RECLAIM]

    def specs(self) -> dict[str, dict[str, Any]]:
        raw = self.client.hgetall(self.key("specs"))
        where = f"key {self.key('specs')!r}"
        return {(name := reply_text(key)): decode.json_object(value, where, name, "the target's spec")
                for key, value in raw.items()}

    # -- scripts ---------------------------------------------------------------------

    def register(
        self, name: str, spec: str, lanes: Sequence[Sequence[Any]], space: str = "", adaptive: bool = True
    ) -> Any:
        """Create a target's lanes (rows of lane, start, step, stop, margin, window, neutral, weight)
        unless the job has it; returns the job's spec (JSON) of that name, or None if created.

        ``space``: the target's id space (:func:`idcrawl.distributed.codec.space_id`); targets of one
        space share their ids (overlapping targets, :mod:`idcrawl.core.overlap`); '' shares nothing.
        ``adaptive``: the lanes follow adaptive speculation (``IDCRAWL_SPECULATION``, as
        ``Lane(adaptive=True)``); False: the fixed window."""
        keys = [self.key("specs"), self.key("tver"), self.key("unsettled"), self.key("tl:", name)]
        args: list[Any] = [name, spec, space, "1" if adaptive else "0"]
        for row in lanes:
            keys.append(self.key("L:", row[0]))
            args += row
        return self._register(keys=keys, args=args)

    def check_targets(self, names: Sequence[str], merge: bool = False) -> tuple[list[str], list[str]] | None:
        """None if a worker with the targets ``names`` may join the job (the first one makes them the
        job's set: ``TARGETS``), else (its targets the job has not, the job's it lacks). ``merge``: join
        whatever the job's targets (``IDCRAWL_REDIS_MERGE_TARGETS``)."""
        reply = self._targets(keys=[self.key("tset"), self.key("specs")], args=["1" if merge else "0", *names])
        if reply_text(reply[0]) == "ok":
            return None
        return [reply_text(n) for n in reply[1]], [reply_text(n) for n in reply[2]]

    def claim(
        self, worker: str, lane: str, n: int, lease_ms: int, speculation: int | None = None, max_held: int = 0
    ) -> Any:
        """Heartbeat, reclaim, up to ``n`` ids of the lane:
        ``[fu, next, reason, cut, last, [deduplicated, touched, released, capped], id...]``.
        ``speculation``: an adaptive lane's new ids at most this many past its earliest possible cut
        (None: its margin; 0 for a worker whose slot of the lane's host is sequential, as
        ``Lane(speculation=0)``). ``max_held``: no new ids while the lane's id space holds that many
        payloads of shared ids and none waits for this lane (``IDCRAWL_MAX_HELD_PAYLOADS``; 0: no cap);
        ``capped`` is 1 when that kept the claim from handing out new ids."""
        keys = [*self._reclaim_keys(), *self.lane_keys(lane, "own", "free", "dec")]
        args: list[Any] = [worker, n, lease_ms]
        if speculation is not None or max_held:
            args.append("" if speculation is None else speculation)
        if max_held:
            args.append(max_held)
        return self._claim(keys=keys, args=args)

    def record(
        self, worker: str, lane: str, id_: int, code: int, payload: bytes, back: tuple[str, int] | None = None,
        page: PageWrite | None = None,
    ) -> Any:
        """An id's outcome: ``[fu, next, reason, cut, last, 7 counts, duplicate, settled, touched, lane|id, blob...]``.

        ``touched``: lanes of the id's space that were waiting for this outcome, each
        ``[lane, fu, next, reason, cut, last, 7 counts, duplicate, settled, id, code]``.
        ``back``: for a list lane (resumed holes, ``id_`` a position), the target's lane and the
        position there of the id, whose outcome the script rewrites.
        ``page``: a found page's record, written with the outcome (``page_record.lua``)."""
        keys = [*self.lane_keys(lane, "own", "dec", "pay", "bits", "free"), self.emit_key(worker),
                self.key("unsettled")]
        args: list[Any] = [lane, id_, code, payload]
        if back is not None:
            keys.append(self.key("L:", back[0], ":bits"))
            args.append(back[1])
        if page is not None:
            keys += [self.key("pages:", page.target), self.key("pagedue:", page.target)]
            args += ["page", page.id, page.record, page.due_at, "1" if page.emits else "0"]
        return self._record(keys=keys, args=args)

    def resume(
        self, worker: str, target: str, args: str, base: str, lane_args: Sequence[Any],
        reopen: Sequence[tuple[str, int]], ids: Sequence[int],
    ) -> Any:
        """Register a resume of ``target`` (reopened cut lanes, hole ids) or join the one in progress:
        ``['created' | 'joined', lane...]`` or ``['conflict', its args]``.
        ``lane_args``: window, neutral, weight of the list lane, and the worker's run of the fleet
        (:func:`idcrawl.distributed.runs.join_run`): a plan of that run is joined."""
        keys = [self.key("R:", target), self.key("unsettled"), self.key("workers"), self.key("tl:", target)]
        argv: list[Any] = [worker, args, base, target, *lane_args, len(reopen)]
        for lane, restart in reopen:
            argv += [lane, restart]
        argv += list(ids)
        return self._resume(keys=keys, args=argv)

    def status(self, worker: str, lease_ms: int, lanes: Sequence[str], max_held: int = 0, busy: bool = False) -> Any:
        """Heartbeat, reclaim, then ``[fu, next, reason, cut, last, free, room]`` per lane and the job's
        counts, its quiet time and a key found missing (``max_held``: a lane the cap keeps from new ids has
        no room, as in :meth:`claim`; ``busy``: this worker has ids or requests in flight)."""
        keys = [*self._reclaim_keys(), self.key("delayed"), self.key("feed"), self.key("tver"), self.key("specs"),
                self.key("run"), self.key("progress")]
        for lane in lanes:
            keys += self.lane_keys(lane, "free")
        return self._status(keys=keys, args=[worker, lease_ms, max_held, "1" if busy else "0"])

    def adopt(self, worker: str, n: int) -> Any:
        """Take up to ``n`` orphaned outputs: ``[lane|id, blob, ...]``."""
        return self._adopt(keys=[self.key("orphans"), self.emit_key(worker)], args=[n])

    def leave(self, worker: str) -> Any:
        """Give back the worker's claims and unacknowledged outputs at once; returns how many ids went back."""
        return self._leave(keys=[*self._reclaim_keys(), self.emit_key(worker)], args=[worker])

    def give_back(self, worker: str, lane: str, ids: Sequence[str | int]) -> Any:
        """Ids the worker holds in Redis but never received go back to the lane's free list; returns how many."""
        return self._give_back(keys=self.lane_keys(lane, "own", "free", "dec"), args=[worker, *ids])

    def delay(self, lane: str, id_: int | str, delay_ms: int, member: bytes) -> Any:
        """Put a retry (``member`` = ``lane\\tid\\n`` + request) in the shared delayed set."""
        return self._delay(keys=[self.key("delayed"), *self.lane_keys(lane, "own")], args=[id_, delay_ms, member])

    def pop_delayed(self, worker: str, n: int) -> Any:
        """Take up to ``n`` due retries (their members)."""
        return self._pop_delayed(keys=[self.key("delayed")], args=[worker, n])

    def polite(self, slot: str, gap_ms: int, token: str) -> Any:
        """Reserve the slot's next start for the fleet for request ``token``, or (called again as it
        leaves) move it to a gap after now: 0 = go now, else ms to wait."""
        return self._polite(keys=[self.key("polite:", slot)], args=[gap_ms, token])


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
        #: lane ids served without a request because an overlapping lane fetched them (this worker's claims)
        self.deduplicated = 0
        #: lanes an outcome of another lane decided an id of (overlapping targets), not yet taken
        self.touched: list[Touched[P]] = []
        #: payloads released by a claim (a known outcome of an overlapping lane), not yet taken
        self.released: list[P] = []
        self.status = JobStatus()
        self._buffers: dict[str, deque[int]] = {}
        self._misses: dict[str, int] = {}  # lane -> misses in a row among its latest outcomes recorded here
        #: claimed ids not fetched because this worker learnt of the lane's cut first
        self.dropped_past_cut = 0
        #: the worker's page records (resume=due): a visited page's record goes with its outcome (record)
        self.pages: FleetPageBook | None = None
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
        stored = self.job.register(target.name, spec_json(mine), rows, space_id(target), self.adaptive)
        if isinstance(stored, list):
            raise StateLost(f"the job's key {reply_text(stored[1])} is gone from Redis, its target {target.name!r}'s "
                            "lanes are there (evicted or deleted): clean the job (scrapy idjob clean) to start over")
        if stored is not None:
            where = f"key {self.job.key('specs')!r}"
            with decode.reading(f"Redis job {self.job.prefix!r}"):
                conflict = spec_conflict(mine, decode.json_object(stored, where, target.name, "the target's spec"))
            if conflict is not None:
                raise TargetConflict(f"target {target.name!r}: {conflict} in Redis job {self.job.prefix!r}")
        self._add_lanes(target, lanes)

    def _add_lanes(self, target: Target, lanes: Sequence[LaneSpec]) -> None:
        self.targets[target.name] = target
        group = self._group_of(target)
        pipe = self.job.client.pipeline(transaction=False)
        for spec in lanes:
            pipe.hmget(self.job.key("L:", spec.key), "fu", "next", "reason", "cut", "last")
        pipe.sismember(self.job.key("resumed"), target.name)  # has a resume added lanes to it?
        *states, resumed = pipe.execute()
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
            if state[0] is not None:
                self._sync(spec.key, *state)
            if not lane.settled:
                self._unsettled.add(spec.key)
                self._iv.add(spec.key, group, spec.weight)
        if resumed:
            self._add_list_lanes(target, exclude={spec.key for spec in lanes})

    def _add_list_lanes(self, target: Target, exclude: Container[str] = (), only: Container[str] | None = None) -> None:
        """Join the target's unsettled list lanes (resumed holes) that Redis has (``only``: those)."""
        client = self.job.client
        keys = [key for key in (reply_text(k) for k in client.lrange(self.job.key("tl:", target.name), 0, -1))
                if key not in exclude and key not in self.lanes and (only is None or key in only)]
        if not keys:
            return
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(self.job.key("L:", key), "ids", "fu", "next", "reason", "cut", "last")
        states = pipe.execute()
        listed = [(key, state) for key, state in zip(keys, states, strict=True)
                  if state[0] is not None and not (reply_text(state[3]) and int(state[1]) == int(state[2]))]
        if not listed:
            return
        pipe = client.pipeline(transaction=False)
        for key, _ in listed:
            pipe.lrange(self.job.key("L:", key, ":ids"), 0, -1)
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
            self._sync(key, *state[1:])
            if not lane.settled:
                self._unsettled.add(key)
                self._iv.add(key, self._group_of(target), target.rate_asc)

    def join_list_lanes(self) -> None:
        """Join the unsettled list lanes of resumes registered since this worker started
        (targets listed in ``P resumed``): a worker started without ``resume`` helps too."""
        for name in sorted(reply_text(n) for n in self.job.client.smembers(self.job.key("resumed"))):
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
               wave: int | None = None) -> str | None:
        """Resume ``target`` (``resume=auto|bound|holes|all|due``; auto, the default, plans as bound, joins the job
        as it is while a resume with other arguments is in progress, and its plan gives way to an explicit one)
        for the whole job, as a single process resumes the same state
        (:func:`idcrawl.core.resume.resume_specs`): its lanes cut by their margin go on from just after their
        last found id (bound, all), its holes become a list lane walked by position (holes, all), its tail is
        walked when ``walk_tail`` (due: the worker that plans decided the tail is due; not due, the plan is
        "nothing to fetch"). The first worker registers the resume, and its plan is the job's; a worker that
        starts while it is in progress (a lane of it unsettled, or the worker belongs to the fleet's run that
        planned it: :meth:`join_run`, ``resume.lua``) joins it, or raises :class:`TargetConflict` if it was
        started with other resume arguments. Returns ``created``, ``joined``, or None (nothing crawled yet: the
        lanes start fresh; that plan is registered too, so that a late worker of the same fleet joins it rather
        than resuming what the others have just walked). ``due_pages`` (due: found ids due for a revisit, in
        fetch order) become the list lane ``<target>:due``, as in one process
        (:func:`idcrawl.core.resume.resume_specs`). ``wave``: a watching fleet's later wave (its time in ms on
        the one clock): a plan of its own, which the workers awake for that wave join (``resume.lua``)."""
        from idcrawl.distributed.state import JobStateStore

        state = JobStateStore(self.job.client, self.job.prefix, read_only=True).load(target.name)
        reopen: list[tuple[str, int]] = []
        holes = None
        fresh = state is None or all(record.cursor == record.start for record in state.lanes.values())
        if state is not None and not fresh:  # else nothing crawled yet: the lanes start fresh (the fleet's plan)
            specs = resume_specs(target, state.lanes, state.outcomes, target.resume, target.holes,
                                 walk_tail=walk_tail, due_pages=due_pages)
            own = {spec.key for spec in lane_specs(target)}
            reopen = [(spec.key, spec.start) for spec in specs if spec.ids is None and spec.key in own]
            holes = next((spec for spec in specs if spec.ids is not None), None)
        args = f"resume={target.resume}" + (f", holes={target.holes}" if target.resume in ("holes", "all") else "")
        if wave is not None:
            args += f", wave={wave}"
        neutral = "1" if Outcome.FAILED in self._neutral else "0"
        reply = self.job.resume(
            self.worker, target.name, args, holes.key if holes is not None else f"{target.name}:holes",
            (target.window, neutral, target.rate_asc, self.join_run(wave).number),
            reopen, holes.ids if holes is not None and holes.ids else (),
        )
        verdict = reply_text(reply[0])
        if verdict == "conflict" and target.resume == "auto":
            return None  # the default joins the job as it is, the lanes of the resume in progress included
        if verdict == "conflict":
            raise TargetConflict(
                f"target {target.name!r}: {args} differs from the resume the job's workers are running "
                f"({reply_text(reply[1])}) in Redis job {self.job.prefix!r}: start this worker with the same "
                "arguments, or once that resume has finished"
            )
        if fresh:
            # registered all the same: a worker of this fleet that starts once the fresh lanes have been walked
            # (a lane cut by its margin) joins this plan instead of planning a resume of its own, which would
            # reopen the cut lanes and walk them a second time in the same run
            return None
        lanes = [reply_text(k) for k in reply[1:]]
        listed = [key for key in lanes if key not in self.lanes]
        for key in lanes:
            if key in self.lanes:
                self._refresh(key)
        if listed:
            self._add_list_lanes(target, only=set(listed))
        return verdict

    def _refresh(self, key: str) -> None:
        """Read a lane the job changed (a cut lane a resume reopened) into its mirror."""
        state = self.job.client.hmget(self.job.key("L:", key), "fu", "next", "reason", "cut", "last")
        if state[0] is None:
            return
        self._sync(key, *state)
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
            if not self.job.client.hexists(self.job.key("L:", lane_key), "ids"):
                self._not_listed.add(lane_key)
                return redis_id
            ids = self._ids[lane_key] = tuple(
                int(i) for i in self.job.client.lrange(self.job.key("L:", lane_key, ":ids"), 0, -1))
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

    def lanes_of(self, target_name: str) -> Iterator[Lane[P]]:
        for key, target in self.lane_target.items():
            if target.name == target_name:
                yield self.lanes[key]

    # -- mirrors -----------------------------------------------------------------

    def _sync(self, key: str, fu: Any, nxt: Any, reason: Any, cut: Any, last: Any) -> tuple[bool, bool]:
        """Copy the job's view of a lane into its mirror; returns (stopped now, settled now)."""
        lane = self.lanes[key]
        was_stopped, was_settled = lane.stopped, lane.settled
        lane.first_undecided = int(fu)
        lane.next_id = int(nxt)
        text = reply_text(reason)
        lane.reason = text or None
        cut_text = reply_text(cut)
        lane.cut_at = int(cut_text) if cut_text else None
        last_text = reply_text(last)
        lane.last_found = int(last_text) if last_text else None
        if lane.settled and key in self._unsettled:
            self._unsettled.discard(key)
            if key in self._iv and not self._buffers[key]:
                self._iv.remove(key)
        return lane.stopped and not was_stopped, lane.settled and not was_settled

    # -- dispensing ------------------------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispatch | None:
        """The next id by weight among this worker's ready lanes; claims a block when a lane's buffer is empty."""
        while True:
            key = self._iv.pick(group_ready, self._lane_ready)
            if key is None:
                return None
            buffer = self._buffers[key]
            if not buffer:
                deduplicated = self.deduplicated
                buffer.extend(self._claim(key))
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
        if key in self._ids:  # a list lane has no margin: no cut to come
            misses = 0
        elif lane.last_found is not None:
            misses = max((lane.first_undecided - lane.last_found) * lane.step - 1, self._misses.get(key, 0))
        else:
            misses = max((lane.first_undecided - lane.start) * lane.step, self._misses.get(key, 0))
        size = self.block >> min(misses, 16)
        if self.concurrency:  # no more than this worker's share of its lanes: held ids wait, a cut may come first
            size = min(size, -(-self.concurrency // max(1, len(self._unsettled))))
        return max(1, size)

    def _claim(self, key: str) -> list[int]:
        speculation = 0 if key in self._unspeculative else None
        reply = self.job.claim(self.worker, key, self.claim_size(key), self.lease_ms, speculation, self.max_held)
        if not reply:
            return []
        deduplicated, touched, released, *capped = reply[5]
        if capped and int(capped[0]):
            self.held_cap_waits += 1
            self._capped.add(key)  # parked by next() if nothing came: woken by a poll or an outcome here
        self._take_touched(touched)
        self.released += self._released(released)
        self._sync(key, *reply[:5])
        self.deduplicated += int(deduplicated)
        return [int(i) for i in reply[6:]]

    def _released(self, released: Sequence[Any]) -> list[P]:
        """The payloads of a reply's ``lane|id, blob, ...``."""
        out: list[P] = []
        for i in range(0, len(released), 2):
            field, blob_out = reply_text(released[i]), released[i + 1]
            key, _, id_text = field.rpartition("|")
            if self._decode is not None:
                out.append(self._decode(key, self.id_of(key, int(id_text)), blob_out))
        return out

    def _take_touched(self, touched: Sequence[Sequence[Any]]) -> None:
        """Lanes of a shared id space that a reply decided an id of: mirrors, counts, :attr:`touched`."""
        for row in touched:
            key = reply_text(row[0])
            lane = self.lanes.get(key)
            if lane is None:  # a lane of a target this worker has not joined yet: its counts are the job's
                continue
            before = replace(lane.counts)
            was_ready = lane.ready
            rec: Recorded[P] = Recorded()
            rec.stopped, _settled = self._sync(key, *row[1:6])
            self._add_counts(lane, row[6:13])
            if key in self._parked and self._room(lane, was_ready):
                rec.became_ready = self.unpark(key)
            after = replace(lane.counts)
            self.touched.append(Touched(key, int(row[15]), _OUTCOMES[int(row[16])], before, after, rec))

    @staticmethod
    def _add_counts(lane: Lane[P], values: Sequence[Any]) -> list[int]:
        deltas = [int(v) for v in values]
        for name, delta in zip(_COUNTS, deltas, strict=True):
            if delta:
                setattr(lane.counts, name, getattr(lane.counts, name) + delta)
        return deltas

    def unpark(self, key: str) -> bool:
        """Let a parked lane be picked again (the job showed room); True if it was parked."""
        self._capped.discard(key)
        if key not in self._parked:
            return False
        self._parked.discard(key)
        if key in self._iv:
            self._iv.unpark(key)
        return True

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
            pipe.hgetall(self.job.key("L:", key, ":own"))
        owners = pipe.execute()
        given = 0
        for key, own in zip(keys, owners, strict=True):
            known = set(self._buffers[key]) | {self.redis_id(key, id_) for lane, id_ in self.inflight if lane == key}
            unknown = [reply_text(id_) for id_, who in own.items() if reply_text(who) == self.worker
                       and int(reply_text(id_)) not in known]
            if unknown:
                given += int(self.job.give_back(self.worker, key, unknown))
        return given

    # -- outcomes ----------------------------------------------------------------

    def record(self, lane_key: str, id_: int, outcome: Outcome, payload: P | None = None) -> Recorded[P]:
        """Record an outcome in Redis; returns the outputs of found ids the prefix passed."""
        result: Recorded[P] = Recorded()
        lane = self.lanes.get(lane_key)
        if lane is None:
            return result
        redis_id = self.redis_id(lane_key, id_)
        if redis_id < 0:  # not an id of this list lane
            return result
        blob = self._encode(payload) if payload is not None and self._encode is not None else b""
        self.inflight.discard((lane_key, id_))
        self.last_activity = time.monotonic()
        page = self.pages.outgoing(self.lane_target[lane_key].name, id_) if self.pages is not None else None
        reply = self.job.record(self.worker, lane_key, redis_id, CODES[outcome], blob, self._back(lane_key, id_), page)
        if outcome is Outcome.FOUND:
            self._misses[lane_key] = 0
        elif outcome not in self._neutral:
            self._misses[lane_key] = self._misses.get(lane_key, 0) + 1
        if not reply:
            return result
        was_ready = lane.ready
        stopped, _settled = self._sync(lane_key, *reply[:5])
        deltas = self._add_counts(lane, reply[5:12])
        result.overshoot = deltas[5] > 0 and outcome is Outcome.FOUND
        result.stopped = stopped
        result.released = self._released(reply[15:])
        if page is not None and self.pages is not None:  # written unless a duplicate or dropped past the cut
            self.pages.sent(page, not int(reply[12]) and not (page.emits and result.overshoot))
        if lane_key in self._parked and self._room(lane, was_ready):
            result.became_ready = self.unpark(lane_key)
        self._take_touched(reply[14])
        if self._capped:
            self._wake_capped(lane_key)
        return result

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

    def close_lane(self, lane_key: str, reason: str) -> None:
        """Stop dispensing a lane *in this worker* (a limit, a shutdown); the job's lane goes on."""
        lane = self.lanes[lane_key]
        if lane.reason is None:
            lane.reason = reason
        self._unsettled.discard(lane_key)
        self._closed_here.add(lane_key)
        self._buffers[lane_key].clear()  # claimed, never dispensed: taken back when this worker leaves
        if lane_key in self._iv:
            self._iv.remove(lane_key)

    # -- polling -------------------------------------------------------------------

    def poll(self, busy: bool = False) -> list[str]:
        """Heartbeat, take back ids of stopped workers, refresh every lane, check the job's keys; returns
        lanes that got room. ``busy``: this worker has work in flight (the job is active)."""
        keys = sorted(self._unsettled)
        reply = self.job.status(self.worker, self.lease_ms, keys, self.max_held, busy or bool(self.inflight))
        woken: list[str] = []
        self.vanished = set()
        for key, state in zip(keys, reply[:-1], strict=True):
            fu, nxt, reason, cut, last, free, room = state
            if not reply_text(fu):
                self.vanished.add(key)  # the job's state is gone (Redis restarted empty, or cleaned)
                continue
            self._sync(key, fu, nxt, reason, cut, last)
            if (int(free) > 0 or int(room)) and self.unpark(key):  # room: the job's (adaptive or not)
                woken.append(key)
        *counts, lost = reply[-1]
        unsettled, delayed, orphans, feed, tver, next_due, quiet = (int(v) for v in counts)
        status = self.status
        status.quiet, status.lost = quiet / 1000, reply_text(lost)
        status.unsettled, status.delayed, status.orphans, status.feed = unsettled, delayed, orphans, feed
        status.tver = tver
        status.next_due = next_due / 1000 if next_due >= 0 else -1.0
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

    def can_dispense(self) -> bool:
        """Work is left in this worker or in the job (the engine must not go idle while others work)."""
        return bool(self.inflight) or any(self._buffers.values()) or not self.finished

    def outstanding(self) -> int:
        return len(self.inflight)

    def lost(self) -> list[tuple[str, list[int]]]:
        """Nothing: the worker's poll finds ids that vanished (it knows when the engine holds nothing)."""
        return []

