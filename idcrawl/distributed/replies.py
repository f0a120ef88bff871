"""The replies of the job's Lua scripts as typed values, parsed in one place.

Each script's header (``idcrawl/distributed/lua/*.lua``) gives its reply as a Lua table; each class here
is one of them (or a row within one) with a ``parse(raw)`` classmethod, so no caller indexes a reply by
position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from idcrawl.distributed.connection import reply_text

__all__ = [
    "ClaimReply", "Deltas", "JobCounts", "LaneState", "LaneStatus", "PoliteReply", "RecordReply", "RegisterReply",
    "Released", "ResumeReply", "RunReply", "StatusReply", "TargetsReply", "TouchedRow", "UrlDueReply", "UrlStatusReply",
]


def _int_or_none(value: Any) -> int | None:
    text = reply_text(value)
    return int(text) if text else None


@dataclass(frozen=True, slots=True)
class LaneState:
    """A lane as the job has it: first undecided id, next id to hand out, reason it stopped ('': none),
    its cut and last found id (None: none). Five values of a reply, or of ``HMGET P L:<lane> fu next reason
    cut last``."""

    first_undecided: int
    next_id: int
    reason: str | None
    cut_at: int | None
    last_found: int | None

    #: the fields of ``P L:<lane>`` these are read from, in order
    FIELDS = ("fu", "next", "reason", "cut", "last")

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> LaneState:
        fu, nxt, reason, cut, last = raw
        return cls(int(fu), int(nxt), reply_text(reason) or None, _int_or_none(cut), _int_or_none(last))

    @classmethod
    def read(cls, raw: Sequence[Any]) -> LaneState | None:
        """The ``HMGET`` of :attr:`FIELDS`: None if the job has no such lane."""
        fu, *_ = raw
        return None if fu is None else cls.parse(raw)


@dataclass(frozen=True, slots=True)
class Deltas:
    """What one call added to a lane's counts (in this order in a reply)."""

    found: int
    missing: int
    failed: int
    disallowed: int
    emitted: int
    overshoot: int
    past_cut: int

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> Deltas:
        return cls(*(int(v) for v in raw))

    def items(self) -> list[tuple[str, int]]:
        """(count name, delta) for each count, in order."""
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


_DELTAS = len(fields(Deltas))


@dataclass(frozen=True, slots=True)
class Released:
    """An output released to the worker: its lane, the id as Redis names it (a list lane's position), the blob."""

    lane: str
    id: int
    blob: bytes
    #: its field in an emit hash (``P W:<worker>:emit``), ``lane|id`` as Redis spelled it
    field: str = ""

    @classmethod
    def parse(cls, field: Any, blob: bytes) -> Released:
        text = reply_text(field)
        lane, _, id_text = text.rpartition("|")
        return cls(lane, int(id_text), blob, text)

    @classmethod
    def parse_all(cls, raw: Sequence[Any]) -> tuple[Released, ...]:
        """The items of a flat ``lane|id, blob, ...``."""
        return tuple(cls.parse(raw[i], raw[i + 1]) for i in range(0, len(raw), 2))


@dataclass(frozen=True, slots=True)
class TouchedRow:
    """A lane of a shared id space that a call decided an id of: ``{lane, 5 state, 7 counts, duplicate,
    settled, id, code}``."""

    lane: str
    state: LaneState
    deltas: Deltas
    id: int
    code: int

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> TouchedRow:
        lane, *rest = raw
        state, deltas = rest[:5], rest[5:5 + _DELTAS]
        _duplicate, _settled, id_, code = rest[5 + _DELTAS:]
        return cls(reply_text(lane), LaneState.parse(state), Deltas.parse(deltas), int(id_), int(code))


def _touched(raw: Sequence[Sequence[Any]]) -> tuple[TouchedRow, ...]:
    return tuple(TouchedRow.parse(row) for row in raw)


@dataclass(frozen=True, slots=True)
class ClaimReply:
    """``CLAIM``: ``{5 state, {deduplicated, touched, released, capped}, id...}``; None for ``{}`` (an unknown lane)."""

    state: LaneState
    deduplicated: int
    touched: tuple[TouchedRow, ...]
    released: tuple[Released, ...]
    capped: bool
    ids: tuple[int, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> ClaimReply | None:
        if not raw:
            return None
        state, shared, ids = raw[:5], raw[5], raw[6:]
        deduplicated, touched, released, *capped = shared
        return cls(LaneState.parse(state), int(deduplicated), _touched(touched), Released.parse_all(released),
                   bool(capped and int(capped[0])), tuple(int(i) for i in ids))


@dataclass(frozen=True, slots=True)
class RecordReply:
    """``RECORD``: ``{5 state, 7 counts, duplicate, settled, touched, lane|id, blob, ...}``; None for ``{}``."""

    state: LaneState
    deltas: Deltas
    duplicate: bool
    settled: bool
    touched: tuple[TouchedRow, ...]
    released: tuple[Released, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> RecordReply | None:
        if not raw:
            return None
        at = 5 + _DELTAS
        duplicate, settled, touched = raw[at:at + 3]
        return cls(LaneState.parse(raw[:5]), Deltas.parse(raw[5:at]), bool(int(duplicate)), bool(int(settled)),
                   _touched(touched), Released.parse_all(raw[at + 3:]))


@dataclass(frozen=True, slots=True)
class LaneStatus:
    """A lane in ``STATUS``'s reply: its state (None: the job's lane is gone), ids taken back, room (CLAIM
    would hand out new ids)."""

    state: LaneState | None
    free: int
    room: bool

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> LaneStatus:
        *state, free, room = raw
        return cls(LaneState.parse(state) if reply_text(state[0]) else None, int(free), bool(int(room)))


@dataclass(frozen=True, slots=True)
class JobCounts:
    """The job in ``STATUS``'s reply: unsettled lanes, delayed retries, orphaned outputs, pushed targets,
    target version, ms to the next due retry (-1: none), quiet ms, a key found missing ('': none)."""

    unsettled: int
    delayed: int
    orphans: int
    feed: int
    tver: int
    next_due_ms: int
    quiet_ms: int
    lost: str

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> JobCounts:
        unsettled, delayed, orphans, feed, tver, next_due, quiet, lost = raw
        return cls(int(unsettled), int(delayed), int(orphans), int(feed), int(tver), int(next_due), int(quiet),
                   reply_text(lost))


@dataclass(frozen=True, slots=True)
class StatusReply:
    """``STATUS``: a row per lane asked, the job's counts, then the lanes changed since the serial the
    worker passed (lane -> its row; a lane gone has a row whose state is None; ``@<space base>``: a space
    whose held payloads shrank, row None) and the serial the worker has now seen."""

    lanes: tuple[LaneStatus, ...]
    job: JobCounts
    changed: tuple[tuple[str, LaneStatus | None], ...] = ()
    serial: int = 0

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> StatusReply:
        *lanes, job, changes = raw
        serial, *flat = changes
        changed: list[tuple[str, LaneStatus | None]] = []
        for member, row in zip(flat[::2], flat[1::2], strict=True):
            name = reply_text(member)
            if name.startswith("@"):
                changed.append((name, None))
            else:
                changed.append((name, LaneStatus.parse(row) if row else LaneStatus(None, 0, False)))
        return cls(tuple(LaneStatus.parse(row) for row in lanes), JobCounts.parse(job), tuple(changed),
                   int(float(reply_text(serial))))


@dataclass(frozen=True, slots=True)
class RegisterReply:
    """``REGISTER``: the job's spec of the name (None: created now), or the key found lost ('': none)."""

    stored: Any
    lost: str

    @classmethod
    def parse(cls, raw: Any) -> RegisterReply:
        if isinstance(raw, list):  # {'lost', P specs}
            return cls(None, reply_text(raw[1]))
        return cls(raw, "")


@dataclass(frozen=True, slots=True)
class TargetsReply:
    """``TARGETS``: None if the worker may join, else (its targets the job has not, the job's it lacks)."""

    extra: tuple[str, ...]
    missing: tuple[str, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> TargetsReply | None:
        if reply_text(raw[0]) == "ok":
            return None
        return cls(tuple(reply_text(n) for n in raw[1]), tuple(reply_text(n) for n in raw[2]))


@dataclass(frozen=True, slots=True)
class ResumeReply:
    """``RESUME``: ``created``/``joined`` and the resume's lanes, or ``conflict`` and the args in progress."""

    verdict: str
    lanes: tuple[str, ...]
    conflict: str

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> ResumeReply:
        verdict = reply_text(raw[0])
        if verdict == "conflict":
            return cls(verdict, (), reply_text(raw[1]))
        return cls(verdict, tuple(reply_text(k) for k in raw[1:]), "")


@dataclass(frozen=True, slots=True)
class RunReply:
    """``RUN``: the run's number, whether this worker started it, and ``P run``'s n, wave, at, by and ready
    before ('' = none)."""

    number: int
    new: bool
    before: tuple[str, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> RunReply:
        number, verdict, *before = raw
        return cls(int(number), reply_text(verdict) == "new", tuple(reply_text(v) for v in before))


@dataclass(frozen=True, slots=True)
class PoliteReply:
    """``POLITE``: the ms to wait (0: go now), why (:attr:`GAP`: the slot's gap, :attr:`FULL`: its places
    in flight all taken fleet-wide) and how many of the slot's requests are in flight fleet-wide."""

    GO, GAP, FULL = 0, 1, 2

    wait_ms: int
    why: int
    flying: int
    #: a full slot: ms until its oldest request should be done (a worker without notifications asks then)
    estimate_ms: int = 0

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> PoliteReply:
        return cls(int(raw[0]), int(raw[1]), int(raw[2]), int(raw[3]) if len(raw) > 3 else 0)


@dataclass(frozen=True, slots=True)
class UrlDueReply:
    """``URL_DUE``: the ready URLs of every host, and at most the few hosts asked for with ready URLs, in
    round-robin order from the worker's place."""

    ready: int
    hosts: tuple[str, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> UrlDueReply:
        ready, *hosts = raw
        return cls(int(ready or 0), tuple(reply_text(h) for h in hosts))


@dataclass(frozen=True, slots=True)
class UrlStatusReply:
    """``URL_STATUS``: ready, taken by others, taken by this worker, postponed, given back."""

    ready: int
    taken_by_others: int
    taken_here: int
    postponed: int
    given_back: int

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> UrlStatusReply:
        ready, others, mine, postponed, back = raw
        return cls(int(ready or 0), int(others), int(mine), int(postponed), int(back))
