"""Redis state store: the same interface as the SQLite file, under a job's key prefix.

Two kinds of crawl keep their state here:

- a single-process crawl with ``IDCRAWL_STATE_BACKEND = "redis"``: per target
  its params, one serialized roaring bitmap per outcome and its lane records,
  written by :meth:`RedisStateStore.commit` in one optimistic transaction
  (WATCH/MULTI: a concurrent writer makes it retry, never lose an id);
- a distributed job (``IDCRAWL_DISTRIBUTED``): its lanes live in the hashes
  and 2-bit outcome fields of :mod:`idcrawl.distributed.scripts`, which
  :meth:`RedisStateStore.load` turns into the same :class:`TargetState`
  (lane records and outcome bitmaps), so ``scrapy idplan`` shows both.

Keys (``P`` = ``<IDCRAWL_REDIS_PREFIX>:{<job>}:``): ``P targets`` (hash name ->
params JSON), ``P o:<target>`` (hash outcome -> roaring bitmap), ``P lanes:<target>``
(hash lane -> record JSON), ``P runs`` (list of run JSON: a start row with the
run's ``targets``, then an end row), ``P runseq``, ``P feeds:<run>`` (hash feed
file path -> offset: the run's feed marks) and ``P feedrun`` (the latest run
that wrote feed marks).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord, merge_outcomes
from idcrawl.state.base import FeedMarks, RunRecord, StateError, StateStore, TargetState

if TYPE_CHECKING:
    import redis

__all__ = ["RedisStateStore", "decode_bits"]

#: Outcome of each 2-bit code of a distributed lane's bitfield.
_BY_CODE = (Outcome.FOUND, Outcome.MISSING, Outcome.FAILED, Outcome.DISALLOWED)
_NONZERO = re.compile(rb"[^\x00]")


def decode_bits(bits: bytes, start: int, step: int, length: int) -> dict[Outcome, BitMap64]:
    """Outcome bitmaps of the first ``length`` ids of a lane from its 2-bit field (0 = found).

    Only bytes that hold a non-found id are decoded one by one, so a lane of
    10,000,000 ids with 1% gaps converts in well under a second.
    """
    result: dict[Outcome, BitMap64] = {outcome: BitMap64() for outcome in _BY_CODE}
    if length <= 0:
        return {}
    found = result[Outcome.FOUND]
    lo, hi = (start, start + length - 1) if step > 0 else (start - length + 1, start)
    found.add_range(lo, hi + 1)
    for match in _NONZERO.finditer(bits):
        index, byte = match.start(), match.group()[0]
        for j in range(4):
            code = (byte >> (6 - 2 * j)) & 3
            position = index * 4 + j
            if code and position < length:
                id_ = start + position * step
                found.discard(id_)
                result[_BY_CODE[code]].add(id_)
    return {outcome: ids for outcome, ids in result.items() if ids}


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStateStore(StateStore):
    """One job's state in Redis (see the module docstring for the keys)."""

    def __init__(self, client: redis.Redis, prefix: str, *, read_only: bool = False) -> None:
        self.client: Any = client  # redis-py's reply types are unions of bytes and str
        self.prefix = prefix
        self.read_only = read_only
        self.path = prefix  # what error lines and `idplan` show as the state's location

    def _key(self, *parts: str) -> str:
        return self.prefix + "".join(parts)

    def _error(self, exc: Exception) -> StateError:
        return StateError(f"Redis state {self.prefix!r}: {exc}")

    # -- reads ----------------------------------------------------------------------

    def targets(self) -> list[str]:
        import redis

        try:
            names = {_text(n) for n in self.client.hkeys(self._key("targets"))}
            names |= {_text(n) for n in self.client.hkeys(self._key("specs"))}
        except redis.RedisError as exc:
            raise self._error(exc) from None
        return sorted(names)

    def load(self, name: str) -> TargetState | None:
        import redis

        try:
            params_raw = self.client.hget(self._key("targets"), name)
            spec_raw = self.client.hget(self._key("specs"), name)
            if params_raw is None and spec_raw is None:
                return None
            params = json.loads(params_raw) if params_raw is not None else _params_of_spec(json.loads(spec_raw))
            state = TargetState(name, params)
            for outcome, blob in self.client.hgetall(self._key("o:", name)).items():
                state.outcomes[Outcome(_text(outcome))] = BitMap64.deserialize(blob)
            for key, raw in self.client.hgetall(self._key("lanes:", name)).items():
                state.lanes[_text(key)] = LaneRecord(**json.loads(raw))
            for key in (_text(k) for k in self.client.lrange(self._key("tl:", name), 0, -1)):
                lane, outcomes = self._distributed_lane(key)
                if lane is not None:
                    state.lanes[key] = lane
                    state.outcomes = merge_outcomes(state.outcomes, outcomes)
        except redis.RedisError as exc:
            raise self._error(exc) from None
        return state

    def _distributed_lane(self, key: str) -> tuple[LaneRecord | None, dict[Outcome, BitMap64]]:
        """A distributed lane's record and the outcomes of the ids its prefix passed."""
        fields = self.client.hmget(self._key("L:", key), "start", "step", "stop", "fu", "last", "cut", "reason", "next")
        if fields[0] is None:
            return None, {}
        start, step, cursor, nxt = int(fields[0]), int(fields[1]), int(fields[3]), int(fields[7])
        stop_text, last, cut, reason = (_text(f) for f in (fields[2], fields[4], fields[5], fields[6]))
        if not stop_text and step < 0:
            stop_text = "0"
        settled = bool(reason) and (bool(cut) or cursor == nxt)
        # as the SQLite recorder writes it: a cut lane's cursor is just past its cut (the
        # scripts leave fu there), and a lane still being crawled has no reason yet
        record = LaneRecord(
            key, start, step, int(stop_text) if stop_text else None, cursor,
            int(last) if last else None, int(cut) if cut else None, reason if settled else None,
        )
        length = (cursor - start) * step
        bits = self.client.get(self._key("L:", key, ":bits")) or b""
        return record, decode_bits(bits, start, step, length)

    def feed_marks(self) -> FeedMarks | None:
        import redis

        try:
            run = self.client.get(self._key("feedrun"))
            if run is None:
                return None
            offsets = self.client.hgetall(self._key("feeds:", _text(run)))
        except redis.RedisError as exc:
            raise self._error(exc) from None
        return FeedMarks(int(run), {_text(path): int(offset) for path, offset in offsets.items()})

    def runs(self) -> list[RunRecord]:
        import redis

        try:
            rows = [json.loads(r) for r in self.client.lrange(self._key("runs"), 0, -1)]
        except redis.RedisError as exc:
            raise self._error(exc) from None
        by_id: dict[int, dict[str, Any]] = {}
        for row in rows:  # a run's end is appended as a second row with the same id
            by_id.setdefault(row["id"], {}).update(row)
        return [RunRecord(r["id"], r["started_at"], r.get("ended_at"), r.get("finish_reason"), r.get("counts", {}),
                          r.get("targets"))
                for _, r in sorted(by_id.items())]

    # -- writes ---------------------------------------------------------------------

    def commit(
        self,
        params: Mapping[str, dict[str, Any]],
        outcomes: Mapping[str, Mapping[Outcome, BitMap64]],
        lanes: Mapping[str, Mapping[str, LaneRecord]],
        feeds: FeedMarks | None = None,
    ) -> None:
        import redis

        self._writable()
        names = [name for name, by in outcomes.items() if any(by.values())]
        keys = [self._key("o:", name) for name in names]
        try:
            while True:
                with self.client.pipeline() as pipe:
                    try:
                        if keys:
                            pipe.watch(*keys)
                        merged = {}
                        for name, key in zip(names, keys, strict=True):
                            existing = {Outcome(_text(o)): BitMap64.deserialize(b)
                                        for o, b in pipe.hgetall(key).items()}
                            merged[key] = merge_outcomes(existing, dict(outcomes[name]))
                        pipe.multi()
                        for name, values in params.items():
                            pipe.hset(self._key("targets"), name, json.dumps(values, sort_keys=True))
                        for key, by_outcome in merged.items():
                            pipe.delete(key)
                            if by_outcome:
                                pipe.hset(key, mapping={o.value: ids.serialize() for o, ids in by_outcome.items()})
                        for name, records in lanes.items():
                            if records:
                                pipe.hset(self._key("lanes:", name),
                                          mapping={k: json.dumps(asdict(r)) for k, r in records.items()})
                        if feeds is not None and feeds.offsets:
                            pipe.hset(self._key("feeds:", str(feeds.run_id)), mapping=dict(feeds.offsets))
                            pipe.set(self._key("feedrun"), feeds.run_id)
                        pipe.execute()
                        return
                    except redis.WatchError:
                        continue
        except redis.RedisError as exc:
            raise self._error(exc) from None

    def reset(self, name: str) -> None:
        import redis

        self._writable()
        try:
            self.client.delete(self._key("o:", name), self._key("lanes:", name))
        except redis.RedisError as exc:
            raise self._error(exc) from None

    def begin_run(self, started_at: str, targets: Sequence[str] | None = None) -> int:
        self._writable()
        run_id = int(self.client.incr(self._key("runseq")))
        row: dict[str, Any] = {"id": run_id, "started_at": started_at}
        if targets is not None:
            row["targets"] = sorted(targets)
        self.client.rpush(self._key("runs"), json.dumps(row))
        return run_id

    def end_run(self, run_id: int, ended_at: str, finish_reason: str, counts: Mapping[str, int]) -> None:
        self._writable()
        self.client.rpush(self._key("runs"), json.dumps(
            {"id": run_id, "ended_at": ended_at, "finish_reason": finish_reason, "counts": dict(counts)}
        ))

    def close(self) -> None:
        """The client belongs to whoever made it; nothing to release here."""

    def _writable(self) -> None:
        if self.read_only:
            raise StateError(f"Redis state {self.prefix!r}: opened read-only")


def _params_of_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The identity params of a distributed target, from its spec."""
    direction = spec.get("direction", "asc")
    start = spec.get("start")
    if start is None:
        start = spec.get("min") if direction == "asc" else spec.get("max")
    return {"url": spec.get("url"), "start": start, "min": spec.get("min"), "max": spec.get("max"),
            "direction": direction}
