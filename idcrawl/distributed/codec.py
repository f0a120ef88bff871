"""What travels through Redis: target specs, held outputs and retry requests.

- A target travels as its *spec*: the keys of a job-file table (JSON), so a
  worker that never saw the job file rebuilds the same :class:`Target`, and
  two workers can compare what they mean by one target name.
- A found id's outputs (items and follow-up requests) are pickled with
  scrapy-redis's ``picklecompat``; requests go as ``Request.to_dict()`` (the
  form scrapy-redis queues use), so a callback is named, not pickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from scrapy import Request
from scrapy.utils.request import request_from_dict
from scrapy_redis import picklecompat

from idcrawl.core.overlap import space_fields
from idcrawl.core.targets import Direction, Target

__all__ = [
    "CONFLICT_FREE_KEYS", "decode_outputs", "encode_outputs", "space_id", "spec_conflict", "spec_json", "target_spec",
]

#: Spec keys that may differ between workers of one job: they only change how a
#: worker interleaves its lanes and retries, never which ids exist or the cut.
CONFLICT_FREE_KEYS = frozenset({"rate", "attempts", "cooldown", "backoff"})


def target_spec(target: Target) -> dict[str, Any]:
    """The job-file keys that rebuild ``target`` with ``parse_target`` (resume and holes left out)."""
    rule = target.rule
    spec: dict[str, Any] = {
        "name": target.name,
        "url": target.url,
        "start": target.start,
        "direction": str(target.direction),
        "margin": target.margin,
        "window": target.window,
        "rate": f"{target.rate_asc}:{target.rate_desc}" if target.direction is Direction.BOTH
        else str(target.rate_asc if target.direction is Direction.ASC else target.rate_desc),
        "attempts": target.attempts,
        "cooldown": target.cooldown,
        "backoff": target.backoff,
        "missing_statuses": sorted(rule.missing_statuses),
    }
    if target.follow_redirects != "host":  # only when set: the specs of jobs made before the key stay equal
        spec["follow_redirects"] = target.follow_redirects
    for key in ("min", "max"):
        if getattr(target, key) is not None:
            spec[key] = getattr(target, key)
    for key in ("soft404_regex", "soft404_css", "soft404_xpath", "found_css", "found_xpath", "soft404_max_bytes"):
        value = getattr(rule, key)
        if value is not None:
            spec[key] = value
    return spec


def space_id(target: Target) -> str:
    """The id space of ``target`` in a Redis job: equal for targets with equal
    :func:`idcrawl.core.overlap.space_key` in any worker (sets sorted, no hash seed involved)."""
    text = repr(_canonical(space_fields(target)))
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:16]


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple((f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((_canonical(v) for v in value), key=repr))
    if isinstance(value, (tuple, list)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _canonical(v)) for k, v in value.items()))
    return value


def spec_json(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def spec_conflict(mine: dict[str, Any], stored: dict[str, Any]) -> str | None:
    """The first key (``key=mine`` vs the stored value) on which two specs of one target disagree."""
    for key in sorted(set(mine) | set(stored)):
        if key in CONFLICT_FREE_KEYS:
            continue
        if mine.get(key) != stored.get(key):
            return f"{key}={mine.get(key)!r} differs from the job's ({key}={stored.get(key)!r})"
    return None


def encode_outputs(outputs: list[Any], spider: Any) -> bytes:
    """Items as they are, requests as dicts (callbacks by name)."""
    packed = [("r", o.to_dict(spider=spider)) if isinstance(o, Request) else ("i", o) for o in outputs]
    return bytes(picklecompat.dumps(packed))


def decode_outputs(blob: bytes, spider: Any, where: str = "held outputs") -> list[Any]:
    """The outputs :func:`encode_outputs` packed; :class:`~idcrawl.state.decode.DamagedState` if they do not decode."""
    try:
        packed = picklecompat.loads(blob)
        return [request_from_dict(value, spider=spider) if kind == "r" else value for kind, value in packed]
    except Exception as exc:
        from idcrawl.state.decode import DamagedState

        raise DamagedState(where, None, f"the outputs of a found id do not decode ({type(exc).__name__})") from None
