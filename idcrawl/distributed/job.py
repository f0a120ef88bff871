"""``RedisJob``: one job's Lua scripts on one Redis client, a method per script.

Each method takes the script's non-key arguments, passes every key it touches in ``KEYS``
(:class:`idcrawl.state.keys.JobKeys`) and returns the script's typed reply
(:mod:`idcrawl.distributed.replies`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from idcrawl.core.lanes import Outcome
from idcrawl.distributed import scripts
from idcrawl.distributed.connection import reply_text
from idcrawl.distributed.replies import (
    ClaimReply,
    PoliteReply,
    RecordReply,
    RegisterReply,
    Released,
    ResumeReply,
    StatusReply,
    TargetsReply,
)
from idcrawl.state import decode
from idcrawl.state.keys import JobKeys

if TYPE_CHECKING:
    import redis

    from idcrawl.distributed.pagerecords import PageWrite

__all__ = ["CODES", "OUTCOMES", "RedisJob"]

#: Outcome codes in Redis (2 bits per id in the lane's bitfield).
CODES: dict[Outcome, int] = {Outcome.FOUND: 0, Outcome.MISSING: 1, Outcome.FAILED: 2, Outcome.DISALLOWED: 3}
OUTCOMES = {code: outcome for outcome, code in CODES.items()}

#: Seconds a worker waits for only the replicas that confirmed its last short WAIT (IDCRAWL_REDIS_WAIT_REPLICAS).
FEWER_FOR = 10.0


class RedisJob:
    """One job's keys and scripts on one Redis client."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.keys = JobKeys(prefix)
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
        #: ``IDCRAWL_REDIS_WAIT_REPLICAS``: replicas that must have a write that commits (claims, outcomes,
        #: adoptions, give-backs, acknowledgements) before the call returns; 0: none asked (no WAIT sent)
        self.wait_replicas = 0
        self.wait_ms = 1000
        #: WAITs that timed out before enough replicas confirmed (idcrawl/redis/wait_short)
        self.unconfirmed = 0
        #: after a short WAIT, only the replicas that confirmed it are waited for, until this monotonic time
        self._fewer: tuple[int, float] | None = None

    def _wanted(self) -> int:
        """Replicas to wait for now: ``wait_replicas``, or for ``FEWER_FOR`` seconds after a short WAIT the
        number that confirmed it (a replica gone, or promoted by a failover: no write waits for it)."""
        if self._fewer is not None:
            if time.monotonic() < self._fewer[1]:
                return self._fewer[0]
            self._fewer = None
        return self.wait_replicas

    def _commit(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """Run a script whose writes commit; with ``wait_replicas``, ``WAIT`` in the same round trip (a
        pipeline outside any transaction), so that a failover keeps what this worker goes on from."""
        wanted = self._wanted()
        if wanted <= 0:
            return script(keys=keys, args=args)
        import redis

        pipe = self.client.pipeline(transaction=False)
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        pipe.wait(wanted, self.wait_ms)
        try:
            reply, confirmed = pipe.execute()
        except redis.exceptions.NoScriptError:  # not in this server's script cache (a promoted replica): not run
            reply = script(keys=keys, args=args)
            confirmed = self.client.wait(wanted, self.wait_ms)
        self._confirmed(int(confirmed), wanted)
        return reply

    def commit(self, command: str, *args: Any) -> Any:
        """A plain command whose write commits (an acknowledgement's HDEL), with ``WAIT`` as :meth:`_commit`."""
        wanted = self._wanted()
        client: Any = self.client
        if wanted <= 0:
            return client.execute_command(command, *args)
        pipe = client.pipeline(transaction=False)
        pipe.execute_command(command, *args)
        pipe.wait(wanted, self.wait_ms)
        reply, confirmed = pipe.execute()
        self._confirmed(int(confirmed), wanted)
        return reply

    def _confirmed(self, confirmed: int, wanted: int) -> None:
        if confirmed < wanted:
            self.unconfirmed += 1
            self._fewer = (confirmed, time.monotonic() + FEWER_FOR)

    def lane_keys(self, lane: str, *subkeys: str) -> list[str]:
        """``P L:<lane>`` and then ``P L:<lane>:<subkey>`` for each subkey."""
        return [self.keys.lane(lane), *(self.keys.lane(lane, sub) for sub in subkeys)]

    def _reclaim_keys(self) -> list[str]:
        """KEYS[1..4] of the scripts that take back the work of stopped workers (CLAIM, STATUS, LEAVE)."""
        keys = self.keys
        return [keys.workers, keys.unsettled, keys.orphans, keys.job]

    def emitted(self, worker: str) -> tuple[Released, ...]:
        """The outputs released to ``worker`` and not acknowledged yet (its emit hash)."""
        raw: Any = self.client.hgetall(self.keys.emit(worker))
        return tuple(Released.parse(field, blob) for field, blob in raw.items())

    def specs(self) -> dict[str, dict[str, Any]]:
        raw = self.client.hgetall(self.keys.specs)
        where = f"key {self.keys.specs!r}"
        return {(name := reply_text(key)): decode.json_object(value, where, name, "the target's spec")
                for key, value in raw.items()}

    # -- scripts ---------------------------------------------------------------------

    def register(
        self, name: str, spec: str, lanes: Sequence[Sequence[Any]], space: str = "", adaptive: bool = True
    ) -> RegisterReply:
        """Create a target's lanes (rows of lane, start, step, stop, margin, window, neutral, weight)
        unless the job has it; the reply holds the job's spec (JSON) of that name, or None if created.

        ``space``: the target's id space (:func:`idcrawl.distributed.codec.space_id`); targets of one
        space share their ids (overlapping targets, :mod:`idcrawl.core.overlap`); '' shares nothing.
        ``adaptive``: the lanes follow adaptive speculation (``IDCRAWL_SPECULATION``, as
        ``Lane(adaptive=True)``); False: the fixed window."""
        keys = [self.keys.specs, self.keys.tver, self.keys.unsettled, self.keys.target_lanes(name)]
        args: list[Any] = [name, spec, space, "1" if adaptive else "0"]
        for row in lanes:
            keys.append(self.keys.lane(row[0]))
            args += row
        return RegisterReply.parse(self._register(keys=keys, args=args))

    def check_targets(self, names: Sequence[str], merge: bool = False) -> TargetsReply | None:
        """None if a worker with the targets ``names`` may join the job (the first one makes them the
        job's set: ``TARGETS``), else its targets the job has not and the job's it lacks. ``merge``: join
        whatever the job's targets (``IDCRAWL_REDIS_MERGE_TARGETS``)."""
        return TargetsReply.parse(self._targets(keys=[self.keys.tset, self.keys.specs],
                                                args=["1" if merge else "0", *names]))

    def claim(
        self, worker: str, lane: str, n: int, lease_ms: int, speculation: int | None = None, max_held: int = 0
    ) -> ClaimReply | None:
        """Heartbeat, reclaim, up to ``n`` ids of the lane (None: an unknown lane).
        ``speculation``: an adaptive lane's new ids at most this many past its earliest possible cut
        (None: its margin; 0 for a worker whose slot of the lane's host is sequential, as
        ``Lane(speculation=0)``). ``max_held``: no new ids while the lane's id space holds that many
        payloads of shared ids and none waits for this lane (``IDCRAWL_MAX_HELD_PAYLOADS``; 0: no cap);
        the reply's ``capped`` says that kept the claim from handing out new ids."""
        keys = [*self._reclaim_keys(), *self.lane_keys(lane, "own", "free", "dec")]
        args: list[Any] = [worker, n, lease_ms]
        if speculation is not None or max_held:
            args.append("" if speculation is None else speculation)
        if max_held:
            args.append(max_held)
        return ClaimReply.parse(self._commit(self._claim, keys, args))

    def record(
        self, worker: str, lane: str, id_: int, code: int, payload: bytes, back: tuple[str, int] | None = None,
        page: PageWrite | None = None,
    ) -> RecordReply | None:
        """An id's outcome (None: an unknown lane); the reply's ``touched`` are the lanes of the id's space
        that were waiting for it.
        ``back``: for a list lane (resumed holes, ``id_`` a position), the target's lane and the
        position there of the id, whose outcome the script rewrites.
        ``page``: a found page's record, written with the outcome (``page_record.lua``)."""
        keys = [*self.lane_keys(lane, "own", "dec", "pay", "bits", "free"), self.keys.emit(worker),
                self.keys.unsettled]
        args: list[Any] = [lane, id_, code, payload]
        if back is not None:
            keys.append(self.keys.lane(back[0], "bits"))
            args.append(back[1])
        if page is not None:
            keys += [self.keys.pages(page.target), self.keys.page_due(page.target)]
            args += ["page", page.id, page.record, page.due_at, "1" if page.emits else "0"]
        return RecordReply.parse(self._commit(self._record, keys, args))

    def resume(
        self, worker: str, target: str, args: str, base: str, lane_args: Sequence[Any],
        reopen: Sequence[tuple[str, int, int | None]], ids: Sequence[int],
        more: Sequence[tuple[str, Sequence[int]]] = (),
    ) -> ResumeReply:
        """Register a resume of ``target`` (reopened cut lanes, hole ids) or join the one in progress.
        ``lane_args``: window, neutral, weight of the list lane, and the worker's run of the fleet
        (:func:`idcrawl.distributed.runs.join_run`): a plan of that run is joined. ``reopen``: cut lanes
        going on (lane, restart id, reach: None none, :attr:`idcrawl.core.frontier.LaneSpec.reach`).
        ``more``: more list lanes after ``base``'s (name, ids): the late ids of a due resume."""
        keys = [self.keys.resume(target), self.keys.unsettled, self.keys.workers, self.keys.target_lanes(target)]
        argv: list[Any] = [worker, args, base, target, *lane_args, len(reopen)]
        for lane, restart, reach in reopen:
            argv += [lane, restart, "" if reach is None else reach]
        argv += [len(more), len(ids), *ids]
        for name, listed in more:
            argv += [name, len(listed), *listed]
        return ResumeReply.parse(self._resume(keys=keys, args=argv))

    def status(self, worker: str, lease_ms: int, lanes: Sequence[str], max_held: int = 0,
               busy: bool = False, since: int = 0, limit: int = 1000) -> StatusReply:
        """Heartbeat, reclaim, then a row per lane of ``lanes`` (each checked for lost keys), the job's
        counts, and the lanes changed after change serial ``since`` (at most ``limit``; :meth:`serial`)
        (``max_held``: a lane the cap keeps from new ids has no room, as in :meth:`claim`; ``busy``: this
        worker has ids or requests in flight)."""
        k = self.keys
        keys = [*self._reclaim_keys(), k.delayed, k.feed, k.tver, k.specs, k.run, k.progress, k.lchg]
        for lane in lanes:
            keys += self.lane_keys(lane, "free")
        args: list[Any] = [worker, lease_ms, max_held, "1" if busy else "0", since, limit]
        return StatusReply.parse(self._status(keys=keys, args=args))

    def adopt(self, worker: str, n: int) -> tuple[Released, ...]:
        """Take up to ``n`` orphaned outputs."""
        return Released.parse_all(self._commit(self._adopt, [self.keys.orphans, self.keys.emit(worker)], [n]))

    def leave(self, worker: str) -> int:
        """Give back the worker's claims and unacknowledged outputs at once; returns how many ids went back."""
        return int(self._leave(keys=[*self._reclaim_keys(), self.keys.emit(worker)], args=[worker]))

    def give_back(self, worker: str, lane: str, ids: Sequence[str | int]) -> int:
        """Ids the worker holds in Redis but never received go back to the lane's free list; returns how many."""
        return int(self._commit(self._give_back, self.lane_keys(lane, "own", "free", "dec"), [worker, lane, *ids]))

    def delay(self, lane: str, id_: int | str, delay_ms: int, member: bytes) -> Any:
        """Put a retry (``member`` = ``lane\\tid\\n`` + request) in the shared delayed set."""
        return self._commit(self._delay, [self.keys.delayed, *self.lane_keys(lane, "own")], [id_, delay_ms, member])

    def pop_delayed(self, worker: str, n: int) -> list[bytes]:
        """Take up to ``n`` due retries (their members)."""
        return list(self._commit(self._pop_delayed, [self.keys.delayed], [worker, n]))

    def polite(self, op: str, slot: str, token: str, *, gap_ms: int, cap: int, life_ms: int, lease_ms: int,
               releases: Sequence[tuple[str, str]] = ()) -> PoliteReply:
        """The slot's gap and places in flight for request ``token``: ``reserve`` its start, ``go`` (it
        leaves: its start a gap after now, a place in flight taken) or ``done`` (its place given back);
        first the places of ``releases`` ((slot, token) each) given back."""
        keys = [self.keys.polite(slot), self.keys.busy(slot), self.keys.workers]
        args: list[Any] = [op, token, gap_ms, cap, life_ms, lease_ms]
        for other, other_token in releases:
            keys.append(self.keys.busy(other))
            args.append(other_token)
        return PoliteReply.parse(self._polite(keys=keys, args=args))
