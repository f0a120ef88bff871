"""``JobStateStore``: the Redis state store that also reads a distributed job's lanes.

The scripts' lane hashes and 2-bit outcome fields become the same
:class:`~idcrawl.state.base.TargetState` a single-process crawl stores, so ``scrapy idplan`` shows both alike.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from idcrawl.core.lanes import MAX_ID, Outcome
from idcrawl.core.ranges import LaneRecord, merge_outcomes
from idcrawl.distributed.connection import reply_text
from idcrawl.state import decode
from idcrawl.state.base import TargetState
from idcrawl.state.redis import RedisStateStore

if TYPE_CHECKING:
    from idcrawl.core.urlqueue import QueuedUrl

__all__ = ["JobStateStore", "decode_bits"]

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



class JobStateStore(RedisStateStore):
    """A Redis state store that reads a distributed job's targets and lanes too, and the URL queue
    of its crawl scope (:mod:`idcrawl.distributed.urlqueue`: the fleet's workers write it)."""

    def load_urls(self) -> list[QueuedUrl]:
        """The job's URLs of crawl scope, in URL order (read only: the workers write them)."""
        import redis

        from idcrawl.distributed.urlqueue import read_entries

        try:
            with decode.reading(self.source):
                return sorted(read_entries(self.client, self.prefix), key=lambda entry: entry.url)
        except redis.RedisError as exc:
            raise self.state_error(exc) from None

    def _names(self) -> set[str]:
        return super()._names() | {reply_text(n) for n in self.client.hkeys(self.keys.specs)}

    def _params(self, name: str) -> dict[str, Any] | None:
        params = super()._params(name)
        if params is not None:
            return params
        spec_raw = self.client.hget(self.keys.specs, name)
        if spec_raw is None:
            return None
        where = self.location_of(self.keys.specs)
        return _params_of_spec(decode.json_object(spec_raw, where, name, "the target's spec"))

    def _more_lanes(self, name: str, state: TargetState) -> None:
        for key in (reply_text(k) for k in self.client.lrange(self.keys.target_lanes(name), 0, -1)):
            lane, outcomes = self._job_lane(key)
            if lane is not None:
                state.lanes[key] = lane
                state.outcomes = merge_outcomes(state.outcomes, outcomes)

    def _job_lane(self, key: str) -> tuple[LaneRecord | None, dict[Outcome, BitMap64]]:
        """A distributed lane's record and the outcomes of the ids its prefix passed.

        A list lane of resumed holes has none of its own: its outcomes were written
        back into the target's lanes (``RECORD``), as a single process merges them."""
        names = ("start", "step", "stop", "fu", "last", "cut", "reason", "next", "ids")
        row = dict(zip(names, self.client.hmget(self.keys.lane(key), *names), strict=True))
        if row["start"] is None or row["ids"] is not None:
            return None, {}
        where = self.location_of(self.keys.lane(key))
        try:
            start, step, cursor, nxt = int(row["start"]), int(row["step"]), int(row["fu"]), int(row["next"])
            stop_text, last, cut, reason = (reply_text(row[f]) for f in ("stop", "last", "cut", "reason"))
            for text in (stop_text, last, cut):
                if text:
                    int(text)
        except (TypeError, ValueError):
            raise decode.DamagedState(where, None, f"lane {key!r}: start, step, stop, fu, last, cut "
                                      "and next are not all numbers") from None
        if step not in (1, -1) or not 0 <= start <= MAX_ID or not -1 <= cursor <= MAX_ID + 1:
            raise decode.DamagedState(where, None, f"lane {key!r}: start, step or fu out of range")
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
        bits = self.client.get(self.keys.lane(key, "bits")) or b""
        return record, decode_bits(bits, start, step, length)


def _params_of_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The identity params of a distributed target, from its spec."""
    direction = spec.get("direction", "asc")
    start = spec.get("start")
    if start is None:
        start = spec.get("min") if direction == "asc" else spec.get("max")
    return {"url": spec.get("url"), "start": start, "min": spec.get("min"), "max": spec.get("max"),
            "direction": direction}
