"""Stored state read back and checked: each value a store reads is decoded here.

A value that does not decode (junk bitmap, a lane record with missing fields, params that are not a
JSON object, ...) raises :class:`DamagedState` naming where it lies (table or Redis key), the target
and what is wrong; the store adds the file (or Redis prefix) with :func:`reading`. Nothing is repaired.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from functools import cache
from typing import Any

from pyroaring import BitMap64

from idcrawl.core.lanes import MAX_ID, Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.recrawl import Kind, Schedule
from idcrawl.core.scope import Hops, UrlRecord
from idcrawl.core.sitemaps import DEFAULT_PRIORITY
from idcrawl.core.urlqueue import QueuedUrl, QueueState
from idcrawl.state.base import RunRecord, StateError

__all__ = [
    "DamagedState", "bitmap", "feed_mark", "json_object", "lane_record", "outcome", "page_record", "params", "reading",
    "run_record", "schema_version", "tail_record", "url_entry",
]


class DamagedState(StateError):
    """A stored value that does not decode: ``where`` (table or Redis key), ``target``, ``problem``."""

    def __init__(self, where: str, target: str | None, problem: str, source: str = "") -> None:
        super().__init__(where, target, problem)
        self.where, self.target, self.problem, self.source = where, target, problem, source

    def __str__(self) -> str:
        about = self.where if self.target is None else f"{self.where}, target {self.target!r}"
        text = f"damaged state: {about}: {self.problem}; left as it was (restore it, or use a new state)"
        return f"{self.source}: {text}" if self.source else text


@contextmanager
def reading(source: str) -> Iterator[None]:
    """A :class:`DamagedState` raised inside gets ``source`` (``state file '...'``, ``Redis state '...'``)."""
    try:
        yield
    except DamagedState as exc:
        if not exc.source:
            exc.source = source
        raise


def _json(text: Any, where: str, target: str | None, what: str) -> Any:
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError:
            raise DamagedState(where, target, f"{what} is not UTF-8 text") from None
    if not isinstance(text, str):
        raise DamagedState(where, target, f"{what} is not JSON text ({type(text).__name__})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise DamagedState(where, target, f"{what} is not valid JSON: {_short(text)}") from None


def json_object(text: Any, where: str, target: str | None, what: str) -> dict[str, Any]:
    """``text`` decoded as a JSON object."""
    raw = _json(text, where, target, what)
    if not isinstance(raw, dict):
        raise DamagedState(where, target, f"{what} is not a JSON object: {_short(raw)}")
    return raw


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _check_fields(raw: Any, kinds: Mapping[str, tuple[str, ...]], where: str, target: str | None, what: str,
                  *, required: Sequence[str] = (), extra: bool = False) -> dict[str, Any]:
    """``raw`` as a JSON object whose fields have the kinds given (``int``, ``id``, ``number``, ``str``, ``none``)."""
    if not isinstance(raw, dict):
        raise DamagedState(where, target, f"{what} is not a JSON object: {_short(raw)}")
    missing = [name for name in required if name not in raw]
    if missing:
        raise DamagedState(where, target, f"{what} lacks field {missing[0]!r}")
    if not extra:
        unknown = sorted(set(raw) - set(kinds))
        if unknown:
            raise DamagedState(where, target, f"{what} has an unknown field {unknown[0]!r}")
    for name, allowed in kinds.items():
        if name in raw and not _accepts(allowed)(raw[name]):
            raise DamagedState(where, target, f"{what}: {name} = {_short(raw[name])} is not {' or '.join(allowed)}")
    return raw


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "count": lambda v: _is_int(v) and v >= 0,
    "id": lambda v: _is_int(v) and 0 <= v <= MAX_ID,
    "number": _is_number,
    "duration": lambda v: _is_number(v) and v > 0,
    "str": lambda v: isinstance(v, str),
    "none": lambda v: v is None,
}


@cache
def _accepts(allowed: tuple[str, ...]) -> Callable[[Any], bool]:
    """One check for a field that may be any of ``allowed`` kinds."""
    if len(allowed) == 1:
        return _CHECKS[allowed[0]]
    if allowed == ("id", "none"):
        return lambda v: v is None or (type(v) is int and 0 <= v <= MAX_ID)
    if allowed == ("str", "none"):
        return lambda v: v is None or type(v) is str
    checks = [_CHECKS[kind] for kind in allowed]
    return lambda v: any(check(v) for check in checks)


def schema_version(text: Any) -> int:
    """``meta.schema_version``."""
    if isinstance(text, str) and text.strip().isdigit():
        return int(text)
    raise DamagedState("table meta", None, f"schema_version {_short(text)} is not a number")


def params(text: Any, where: str, target: str) -> dict[str, Any]:
    """A target's identity params (a JSON object: url, start, min, max, direction)."""
    kinds = {"url": ("str", "none"), "start": ("id", "none"), "min": ("id", "none"), "max": ("id", "none"),
             "direction": ("str",)}
    return _check_fields(_json(text, where, target, "params"), kinds, where, target, "params", extra=True)


def outcome(text: Any, where: str, target: str) -> Outcome:
    value = text.decode(errors="replace") if isinstance(text, bytes) else text
    try:
        return Outcome(value)
    except ValueError:
        raise DamagedState(where, target, f"unknown outcome {_short(value)}") from None


def bitmap(blob: Any, where: str, target: str, name: str) -> BitMap64:
    """A serialized roaring bitmap (the ids of one outcome)."""
    if not isinstance(blob, bytes) or not blob:
        raise DamagedState(where, target, f"the {name} ids are not a bitmap ({type(blob).__name__})")
    try:
        return BitMap64.deserialize(blob)
    except (ValueError, IndexError, TypeError, OverflowError):
        raise DamagedState(where, target, f"the {name} ids are not a bitmap ({len(blob)} bytes of junk)") from None


_LANE_KINDS = {
    "key": ("str",), "start": ("id",), "step": ("int",), "stop": ("id", "none"), "cursor": ("int",),
    "last_found": ("id", "none"), "cut_at": ("id", "none"), "reason": ("str", "none"),
}
_LANE_FIELDS = tuple(f.name for f in fields(LaneRecord))
_LANE_KEYS = frozenset(_LANE_FIELDS)


def _id_or_none(value: Any) -> bool:
    return value is None or (type(value) is int and 0 <= value <= MAX_ID)


def _sound_lane(raw: Any, key: str) -> LaneRecord | None:
    """The record of a sound lane (the common case, checked fast: a job may have 100,000 lanes); None: look closer."""
    if type(raw) is not dict or not raw.keys() <= _LANE_KEYS:
        return None
    start, step, cursor, reason = raw.get("start"), raw.get("step"), raw.get("cursor"), raw.get("reason")
    stop, last, cut = raw.get("stop"), raw.get("last_found"), raw.get("cut_at")
    if (raw.get("key") == key and type(start) is int and 0 <= start <= MAX_ID and type(step) is int
            and step in (1, -1) and type(cursor) is int and -1 <= cursor <= MAX_ID + 1
            and _id_or_none(stop) and _id_or_none(last) and _id_or_none(cut)
            and (reason is None or type(reason) is str)):
        return LaneRecord(key, start, step, stop, cursor, last, cut, reason)
    return None


def lane_record(text: Any, where: str, target: str, key: str) -> LaneRecord:
    """A lane's durable record (:class:`LaneRecord` as a JSON object), for the lane ``key``."""
    what = f"lane {key!r}"
    if isinstance(text, (str, bytes)):
        try:
            sound = _sound_lane(json.loads(text), key)
        except (ValueError, RecursionError):
            sound = None
        if sound is not None:
            return sound
    raw = _check_fields(_json(text, where, target, what), _LANE_KINDS, where, target, what,
                        required=("key", "start", "step", "cursor"))
    record = LaneRecord(**{name: raw.get(name) for name in _LANE_FIELDS})  # type: ignore[arg-type]  # checked
    if record.key != key:
        raise DamagedState(where, target, f"{what} holds the record of lane {record.key!r}")
    if record.step not in (1, -1):
        raise DamagedState(where, target, f"{what}: step = {record.step} is not 1 or -1")
    if not -1 <= record.cursor <= MAX_ID + 1:
        raise DamagedState(where, target, f"{what}: cursor = {record.cursor} is out of the id range")
    return record


_SCHEDULE_KINDS = {
    "last_crawled": ("number",), "update_duration": ("duration",), "last_found": ("id", "none"),
    "checksum": ("str", "none"), "etag": ("str", "none"), "last_modified": ("str", "none"),
    "last_status": ("int", "none"), "gone": ("count",), "revision": ("count",),
    "modified": ("number", "none"), "body_at": ("number", "none"),
    "late_at": ("number", "none"), "late_below": ("id", "none"), "listed": ("id", "none"),
    "capture_uri": ("str", "none"), "capture_date": ("str", "none"), "capture_digest": ("str", "none"),
}


def page_record(text: Any, where: str, target: str, id_: Any) -> tuple[int, Schedule]:
    """A found page's schedule record (fields a later idcrawl added are ignored) and its id."""
    try:
        page = int(id_)
    except (TypeError, ValueError, OverflowError):  # a float inf or nan is not an id either
        raise DamagedState(where, target, f"page id {_short(id_)} is not a number") from None
    what = f"page {page}"
    raw = _check_fields(_json(text, where, target, what), _SCHEDULE_KINDS, where, target, what,
                        required=("last_crawled", "update_duration"), extra=True)
    values = {name: raw[name] for name in _SCHEDULE_KINDS if name in raw}
    return page, Schedule(Kind.PAGE, f"{target}/{page}", **values)


def tail_record(text: Any, where: str, target: str) -> Schedule:
    """A target's tail schedule (:func:`idcrawl.core.recrawl.record_of`'s object)."""
    kinds = {**_SCHEDULE_KINDS, "kind": ("str",), "key": ("str",)}
    raw = _check_fields(_json(text, where, target, "tail schedule"), kinds, where, target, "tail schedule",
                        required=("kind", "key", "last_crawled", "update_duration"), extra=True)
    try:
        kind = Kind(raw["kind"])
    except ValueError:
        raise DamagedState(where, target, f"tail schedule: kind = {_short(raw['kind'])} is unknown") from None
    return Schedule(kind, **{name: raw[name] for name in ("key", *_SCHEDULE_KINDS) if name in raw})


def run_record(values: Mapping[str, Any], where: str) -> RunRecord:
    """A run's row: id, started_at, ended_at, finish_reason, counts (JSON or object), targets (JSON, object or
    None), watch (a watch session's counters: JSON, object or None)."""
    run_id = values.get("id")
    if not isinstance(run_id, int) or isinstance(run_id, bool):
        raise DamagedState(where, None, f"a run's id {_short(run_id)} is not a number")
    what = f"run {run_id}"
    for name, allowed in (("started_at", (str,)), ("ended_at", (str, type(None))),
                          ("finish_reason", (str, type(None)))):
        if not isinstance(values.get(name), allowed):
            raise DamagedState(where, None, f"{what}: {name} = {_short(values.get(name))} is not text")
    counts = values.get("counts", {})
    if isinstance(counts, (str, bytes)):
        counts = _json(counts, where, None, f"{what}: counts")
    if not isinstance(counts, dict) or not all(isinstance(k, str) and _is_number(v) for k, v in counts.items()):
        raise DamagedState(where, None, f"{what}: counts is not an object of numbers: {_short(counts)}")
    names = values.get("targets")
    if isinstance(names, (str, bytes)):
        names = _json(names, where, None, f"{what}: targets")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise DamagedState(where, None, f"{what}: targets is not a list of names: {_short(names)}")
    watch = values.get("watch")
    if isinstance(watch, (str, bytes)):
        watch = _json(watch, where, None, f"{what}: watch")
    if watch is not None and not (isinstance(watch, dict) and all(isinstance(k, str) and _is_number(v)
                                                                 for k, v in watch.items())):
        raise DamagedState(where, None, f"{what}: watch is not an object of numbers: {_short(watch)}")
    return RunRecord(run_id, values["started_at"], values.get("ended_at"), values.get("finish_reason"), counts, names,
                     watch)


def feed_mark(run: Any, path: Any, offset: Any, where: str) -> tuple[int, str, int]:
    """One feed mark: the run, a feed file's path, its committed size (-1: not read back)."""
    values = []
    for name, value in (("run", run), ("offset", offset)):
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            raise DamagedState(where, None, f"feed mark {name} = {_short(value)} is not a number") from None
        if isinstance(value, float) or number < -1:
            raise DamagedState(where, None, f"feed mark {name} = {_short(value)} is not a number")
        values.append(number)
    text = path.decode(errors="replace") if isinstance(path, bytes) else path
    if not isinstance(text, str):
        raise DamagedState(where, None, f"feed mark path {_short(path)} is not text")
    return values[0], text, values[1]


_QUEUE_STATES = frozenset(QueueState)


def scope_marks(text: Any, where: str) -> dict[str, str]:
    """The targets' scope marks stored with the URL queue (JSON: target name -> mark)."""
    marks = _json(text, where, None, "scope marks")
    if not (isinstance(marks, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in marks.items())):
        raise DamagedState(where, None, f"scope marks = {_short(marks)}")
    return marks


def url_entry(row: Sequence[Any], where: str) -> QueuedUrl:
    """A row of the URL queue of crawl scope (the ``urls`` table's columns, in order)."""
    (url, owner, collection, names, hops, offsite, state, next_harvest, last_harvest,
     not_found, errors, cycles, paths, links, *more) = row
    priority, checksum, etag, last_modified, capture, read_at = (*more, None, None, None, None, None, None)[:6]
    if not isinstance(url, str):
        raise DamagedState(where, None, f"a URL {_short(url)} is not text")
    what = f"URL {url!r}"

    def check(name: str, value: Any, ok: bool) -> None:
        if not ok:
            raise DamagedState(where, owner if isinstance(owner, str) else None, f"{what}: {name} = {_short(value)}")

    check("owner", owner, isinstance(owner, str))
    check("collection", collection, collection is None or isinstance(collection, str))
    for name, value in (("hops", hops), ("offsite_hops", offsite), ("not_found", not_found), ("errors", errors),
                        ("cycles", cycles)):
        check(name, value, _is_int(value) and value >= 0)
    for name, value in (("next_harvest", next_harvest), ("last_harvest", last_harvest)):
        check(name, value, value is None or _is_number(value))
    check("state", state, state in _QUEUE_STATES)
    check("priority", priority, priority is None or (_is_number(priority) and 0 <= priority <= 1))
    check("read_at", read_at, read_at is None or _is_number(read_at))
    for name, value in (("checksum", checksum), ("etag", etag), ("last_modified", last_modified)):
        check(name, value, value is None or isinstance(value, str))
    stored = None if capture is None else _json(capture, where, owner, f"{what}: capture")
    check("capture", capture, stored is None or (isinstance(stored, list) and len(stored) == 3
                                                 and all(isinstance(part, str) for part in stored)))
    profiles = _json(names, where, owner, f"{what}: crawl_profiles")
    check("crawl_profiles", profiles, isinstance(profiles, list) and all(isinstance(n, str) for n in profiles))
    pairs = _json(paths, where, owner, f"{what}: paths")
    check("paths", pairs, isinstance(pairs, list) and all(
        isinstance(p, list) and len(p) in (2, 3) and all(_is_int(h) and h >= 0 for h in p[:2])
        and (len(p) == 2 or isinstance(p[2], str)) for p in pairs))
    found = None if links is None else _json(links, where, owner, f"{what}: links")
    check("links", found, found is None or (isinstance(found, list) and all(isinstance(u, str) for u in found)))
    record = UrlRecord(url, owner, collection, tuple(profiles), Hops(hops, offsite), next_harvest, last_harvest,
                       not_found, errors, cycles, DEFAULT_PRIORITY if priority is None else float(priority),
                       checksum, etag, last_modified, None if stored is None else (stored[0], stored[1], stored[2]),
                       None if read_at is None else float(read_at))
    paths = tuple(Hops(p[0], p[1]) for p in pairs if len(p) == 2)
    others = tuple((p[2], Hops(p[0], p[1])) for p in pairs if len(p) == 3)  # other seeds' claims
    claims = tuple(sorted((*((owner, hops) for hops in paths), *others))) if others else ()
    return QueuedUrl(record, QueueState(state), paths, None if found is None else tuple(found), claims)
