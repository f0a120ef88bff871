"""Redis state store: the same interface as the SQLite file, under a job's key prefix.

Written in one optimistic transaction per commit (WATCH/MULTI). The keys: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.pagebook import schedule_to_json
from idcrawl.core.ranges import LaneRecord, merge_outcomes
from idcrawl.core.recrawl import Schedule, record_of
from idcrawl.core.safetext import mask_secrets
from idcrawl.state import decode
from idcrawl.state.base import FeedMarks, RunRecord, StateError, StateStore, TargetState
from idcrawl.state.keys import JobKeys

if TYPE_CHECKING:
    import redis

__all__ = ["RedisStateStore", "is_oom", "redis_now_ms", "watched"]

def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


T = TypeVar("T")


def watched(client: Any, keys: Sequence[str], read: Callable[[Any], tuple[T, Callable[[Any], object] | None]]) -> T:
    """One optimistic transaction on ``client``, tried again until none of ``keys`` changed meanwhile
    (``WATCH``/``MULTI``/``EXEC``): ``read(pipe)`` reads through the watching pipeline and returns its
    result and the writes to queue (a function of the pipeline, executed atomically; None: nothing to
    write, the watch let go). redis-py's ``transaction`` is this loop, but sends an empty
    ``MULTI``/``EXEC`` when there is nothing to write."""
    import redis

    with client.pipeline(transaction=True) as pipe:  # WATCH/MULTI (not a cluster pipeline's default)
        while True:
            try:
                if keys:
                    pipe.watch(*keys)
                result, writes = read(pipe)
                if writes is None:
                    pipe.reset()
                    return result
                pipe.multi()
                writes(pipe)
                pipe.execute()
                return result
            except redis.WatchError:
                continue  # another client wrote meanwhile: read again


def redis_now_ms(client: Any, key: str) -> int:
    """Redis's clock in ms (``TIME``): the clock of the fleet's heartbeats, the same for every worker.
    ``key``: one of the job's keys; a cluster client asks the master of its slot, whose clock the job's
    scripts read (``IDCRAWL_REDIS_CLUSTER``)."""
    from redis.cluster import RedisCluster

    node = {"target_nodes": client.get_node_from_key(key)} if isinstance(client, RedisCluster) else {}  # type: ignore[no-untyped-call]
    seconds, micros = client.time(**node)
    return int(seconds) * 1000 + int(micros) // 1000


def is_oom(exc: BaseException) -> bool:
    """Whether a Redis error is its out-of-memory refusal (``maxmemory`` reached with ``noeviction``)."""
    import redis

    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.ResponseError) and "OOM command not allowed" in str(exc))


class RedisStateStore(StateStore):
    """One job's state in Redis (see the module docstring for the keys)."""

    def __init__(self, client: redis.Redis, prefix: str, *, read_only: bool = False) -> None:
        self.client: Any = client  # redis-py's reply types are unions of bytes and str
        self.prefix = prefix
        self.keys = JobKeys(prefix)
        self.read_only = read_only
        self.path = prefix  # what error lines and `idplan` show as the state's location


    def state_error(self, exc: Exception) -> StateError:
        """A Redis error as a state error; out of memory and no answer carry the fleet's finish reasons."""
        import redis

        if is_oom(exc):
            error = StateError(f"{self.source}: Redis is out of memory (maxmemory reached): the write was refused, "
                               "nothing was evicted")
            error.reason = "idcrawl_redis_oom"
        elif isinstance(exc, redis.ConnectionError | redis.TimeoutError):
            error = StateError(f"{self.source}: Redis does not answer ({mask_secrets(str(exc))})")
            error.reason = "idcrawl_redis_unavailable"
        else:
            error = StateError(f"{self.source}: {mask_secrets(str(exc))}")
        error.where = self.source
        return error

    # -- reads ----------------------------------------------------------------------

    def targets(self) -> list[str]:
        import redis

        try:
            names = self._names()
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        return sorted(names)

    def _names(self) -> set[str]:
        return {_text(n) for n in self.client.hkeys(self.keys.targets)}

    def _params(self, name: str) -> dict[str, Any] | None:
        """A stored target's identity params, or None if the state has no such target."""
        raw = self.client.hget(self.keys.targets, name)
        return decode.params(raw, self.location_of(self.keys.targets), name) if raw is not None else None

    @staticmethod
    def location_of(key: str) -> str:
        """A Redis key as damage reports name it."""
        return f"key {key!r}"

    @property
    def source(self) -> str:
        return f"Redis state {self.prefix!r}"

    def _more_lanes(self, name: str, state: TargetState) -> None:
        """Add lanes kept elsewhere (a distributed job's: :mod:`idcrawl.distributed.state`)."""

    def load(self, name: str) -> TargetState | None:
        import redis

        try:
            with decode.reading(self.source):
                params = self._params(name)
                if params is None:
                    return None
                state = TargetState(name, params)
                where = self.location_of(self.keys.outcomes(name))
                for outcome, blob in self.client.hgetall(self.keys.outcomes(name)).items():
                    kind = decode.outcome(outcome, where, name)
                    state.outcomes[kind] = decode.bitmap(blob, where, name, kind.value)
                where = self.location_of(self.keys.lane_records(name))
                for key, raw in self.client.hgetall(self.keys.lane_records(name)).items():
                    state.lanes[_text(key)] = decode.lane_record(raw, where, name, _text(key))
                self._more_lanes(name, state)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        return state

    def load_pages(self, name: str) -> dict[int, Schedule]:
        import redis

        try:
            rows = self.client.hgetall(self.keys.pages(name))
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        with decode.reading(self.source):
            return dict(decode.page_record(raw, self.location_of(self.keys.pages(name)), name, _text(id_))
                        for id_, raw in rows.items())

    # -- the index of page due times ------------------------------------------------------

    def pages_indexed(self, name: str) -> bool:
        """Whether ``P pagedue:<name>`` holds every page record of ``name``."""
        return bool(self.client.sismember(self.keys.pageidx, name))

    def index_pages(self, name: str) -> bool:
        """Make sure the index of ``name``'s page due times is complete: built once from the records of a
        job written before it (one optimistic transaction, O(pages)); False for a read-only store that finds
        no index (its reader reads the records the old way)."""
        import redis

        try:
            if self.pages_indexed(name):
                return True
            if self.read_only:
                return False
            pages, due = self.keys.pages(name), self.keys.page_due(name)

            def read(pipe: Any) -> tuple[bool, Callable[[Any], object]]:
                rows = pipe.hgetall(pages)
                with decode.reading(self.source):
                    where = self.location_of(pages)
                    index = {str(id_): schedule.due_at()
                             for id_, schedule in (decode.page_record(raw, where, name, _text(id_))
                                                   for id_, raw in rows.items())}

                def write(pipe: Any) -> None:
                    pipe.delete(due)
                    if index:
                        pipe.zadd(due, index)
                    pipe.sadd(self.keys.pageidx, name)

                return True, write

            return watched(self.client, [pages], read)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def load_page_ids(self, name: str, ids: Sequence[int]) -> dict[int, Schedule]:
        """The stored records of ``ids`` of target ``name`` (those that have one): O(len(ids))."""
        import redis

        found: dict[int, Schedule] = {}
        try:
            for at in range(0, len(ids), 1000):
                chunk = list(ids[at:at + 1000])
                for id_, raw in zip(chunk, self.client.hmget(self.keys.pages(name), [str(i) for i in chunk]),
                                    strict=True):
                    if raw is not None:
                        with decode.reading(self.source):
                            found[id_] = decode.page_record(raw, self.location_of(self.keys.pages(name)), name, id_)[1]
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        return found

    def due_page_records(self, name: str, now: float) -> dict[int, Schedule]:
        """From the index (:meth:`index_pages` first): the records whose due time is not after ``now``
        (the due ones among them: :func:`idcrawl.core.recrawl.due`), O(log pages + due)."""
        import redis

        if not self.index_pages(name):  # a read-only store of a job without the index: every record
            return super().due_page_records(name, now)
        try:
            ids = [int(i) for i in self.client.zrangebyscore(self.keys.page_due(name), "-inf", now)]
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        return self.load_page_ids(name, ids)

    def page_ids(self, name: str) -> BitMap64:
        """From the index: the ids of ``name`` that have a page record (ids only, no record read)."""
        import redis

        if not self.index_pages(name):
            return super().page_ids(name)
        try:
            return BitMap64(int(i) for i in self.client.zrange(self.keys.page_due(name), 0, -1))
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def next_page_due(self, name: str, now: float, gone_limit: int) -> float | None:
        """From the index (built once by a writable store: :meth:`index_pages`): O(log pages), plus the records
        off the schedule it steps over (as the SQLite store's ``pages_due`` index); a read-only store of a job
        without the index reads every record (the default)."""
        import redis

        try:
            if not self.index_pages(name):
                return super().next_page_due(name, now, gone_limit)
            key, offset = self.keys.page_due(name), 0
            while True:
                rows = self.client.zrangebyscore(key, now, "+inf", start=offset, num=64, withscores=True)
                if not rows:
                    return None
                for schedule in self.load_page_ids(name, [int(i) for i, _ in rows]).values():
                    if schedule.gone < gone_limit and schedule.due_at() >= now:
                        return schedule.due_at()
                offset += len(rows)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def feed_marks(self) -> FeedMarks | None:
        import redis

        try:
            run = self.client.get(self.keys.feedrun)
            if run is None:
                return None
            offsets = self.client.hgetall(self.keys.feed_marks(_text(run)))
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        with decode.reading(self.source):
            run_id = decode.feed_mark(run, "", 0, self.location_of(self.keys.feedrun))[0]
            where = self.location_of(self.keys.feed_marks(_text(run)))
            marks = [decode.feed_mark(run_id, path, offset, where) for path, offset in offsets.items()]
        return FeedMarks(run_id, {path: offset for _, path, offset in marks})

    def tail_schedules(self) -> dict[str, Schedule]:
        import redis

        try:
            rows = self.client.hgetall(self.keys.tails)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        with decode.reading(self.source):
            return {_text(name): decode.tail_record(raw, self.location_of(self.keys.tails), _text(name))
                    for name, raw in sorted(rows.items())}

    def runs(self) -> list[RunRecord]:
        import redis

        try:
            raw_rows = self.client.lrange(self.keys.runs, 0, -1)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        where = self.location_of(self.keys.runs)
        by_id: dict[int, dict[str, Any]] = {}
        with decode.reading(self.source):
            for raw in raw_rows:  # a run's end is appended as a second row with the same id
                row = decode.json_object(raw, where, None, "a run's row")
                run_id = row.get("id")
                if not isinstance(run_id, int) or isinstance(run_id, bool):
                    raise decode.DamagedState(where, None, f"a run's id {run_id!r} is not a number")
                merged = by_id.setdefault(run_id, {})
                if isinstance(merged.get("watch"), dict) and isinstance(row.get("watch"), dict):
                    # a watching fleet's session row: each worker's counters as it read them, the largest last
                    before = merged["watch"]
                    row["watch"] = {k: max(v, before[k]) if _is_count(v) and _is_count(before.get(k)) else v
                                    for k, v in row["watch"].items()}
                merged.update(row)
            return [decode.run_record(r, where) for _, r in sorted(by_id.items())]

    # -- writes ---------------------------------------------------------------------

    def commit(
        self,
        params: Mapping[str, dict[str, Any]],
        outcomes: Mapping[str, Mapping[Outcome, BitMap64]],
        lanes: Mapping[str, Mapping[str, LaneRecord]],
        feeds: FeedMarks | None = None,
        pages: Mapping[str, Mapping[int, Schedule | None]] | None = None,
        tails: Mapping[str, Schedule] | None = None,
    ) -> None:
        import redis

        self._writable()
        names = [name for name, by in outcomes.items() if any(by.values())]
        keys = [self.keys.outcomes(name) for name in names]

        def read(pipe: Any) -> tuple[None, Callable[[Any], object]]:
            merged = {}
            for name, key in zip(names, keys, strict=True):
                existing = {Outcome(_text(o)): BitMap64.deserialize(b) for o, b in pipe.hgetall(key).items()}
                merged[key] = merge_outcomes(existing, dict(outcomes[name]))

            def write(pipe: Any) -> None:
                for name, values in params.items():
                    pipe.hset(self.keys.targets, name, json.dumps(values, sort_keys=True))
                for key, by_outcome in merged.items():
                    pipe.delete(key)
                    if by_outcome:
                        pipe.hset(key, mapping={o.value: ids.serialize() for o, ids in by_outcome.items()})
                for name, records in lanes.items():
                    if records:
                        pipe.hset(self.keys.lane_records(name),
                                  mapping={k: json.dumps(asdict(r)) for k, r in records.items()})
                if feeds is not None and feeds.offsets:
                    pipe.hset(self.keys.feed_marks(str(feeds.run_id)), mapping=dict(feeds.offsets))
                    pipe.set(self.keys.feedrun, feeds.run_id)
                for name, page_records in (pages or {}).items():
                    kept = {str(i): schedule_to_json(r) for i, r in page_records.items() if r is not None}
                    left = [str(i) for i, r in page_records.items() if r is None]
                    if kept:
                        pipe.hset(self.keys.pages(name), mapping=kept)
                        pipe.zadd(self.keys.page_due(name), {
                            str(i): r.due_at() for i, r in page_records.items() if r is not None})
                    if left:
                        pipe.hdel(self.keys.pages(name), *left)
                        pipe.zrem(self.keys.page_due(name), *left)
                if tails:
                    pipe.hset(self.keys.tails, mapping={n: json.dumps(record_of(t)) for n, t in tails.items()})

            return None, write

        try:
            watched(self.client, keys, read)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def reset(self, name: str) -> None:
        import redis

        self._writable()
        try:
            with self.client.pipeline(transaction=True) as pipe:  # one MULTI: outcomes, lanes, pages, tail schedule
                pipe.delete(self.keys.outcomes(name), self.keys.lane_records(name), self.keys.pages(name),
                            self.keys.page_due(name))
                pipe.sadd(self.keys.pageidx, name)  # no records: an empty index is complete
                pipe.hdel(self.keys.tails, name)
                pipe.execute()
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def begin_run(self, started_at: str, targets: Sequence[str] | None = None) -> int:
        import redis

        self._writable()
        try:
            run_id = int(self.client.incr(self.keys.runseq))
            row: dict[str, Any] = {"id": run_id, "started_at": started_at}
            if targets is not None:
                row["targets"] = sorted(targets)
            self.client.rpush(self.keys.runs, json.dumps(row))
        except redis.RedisError as exc:
            raise self.state_error(exc) from None
        return run_id

    def end_run(self, run_id: int, ended_at: str, finish_reason: str, counts: Mapping[str, int],
                watch: Mapping[str, int] | None = None) -> None:
        import redis

        self._writable()
        row: dict[str, Any] = {"id": run_id, "ended_at": ended_at, "finish_reason": finish_reason,
                               "counts": dict(counts)}
        if watch is not None:
            row["watch"] = dict(watch)
        try:
            self.client.rpush(self.keys.runs, json.dumps(row))
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def close(self) -> None:
        """The client belongs to whoever made it; nothing to release here."""

    def _writable(self) -> None:
        if self.read_only:
            raise StateError(f"Redis state {self.prefix!r}: opened read-only")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
