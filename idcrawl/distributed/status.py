"""A distributed job's progress as a document (``scrapy idjob status``).

Read-only: a few commands per lane, nothing changes in Redis (stopped workers
are shown as stale, and taken back by the next worker poll, not here).
"""

from __future__ import annotations

import json
from typing import Any

from idcrawl.core.safetext import mask_secrets, safe
from idcrawl.distributed.connection import reply_text
from idcrawl.distributed.runs import watch_session
from idcrawl.state.keys import JobKeys
from idcrawl.state.redis import redis_now_ms

__all__ = ["job_status", "render_status"]

_COUNTS = ("dispensed", "found", "missing", "failed", "disallowed", "emitted", "overshoot", "past_cut")



def job_status(client: Any, prefix: str, lease: float) -> dict[str, Any]:
    """Workers, targets, lanes and what the job still waits for."""
    keys = JobKeys(prefix)
    now_ms = redis_now_ms(client, keys.workers)
    workers = [
        {"worker": reply_text(w), "heartbeat_age": round((now_ms - score) / 1000, 3),
         "alive": now_ms - score <= lease * 1000}
        for w, score in client.zrange(keys.workers, 0, -1, withscores=True)
    ]
    specs = {reply_text(n): _spec(raw) for n, raw in client.hgetall(keys.specs).items()}
    first = {reply_text(n) for n in client.smembers(keys.tset)}
    targets = [
        {"name": name, "url": mask_secrets(str(spec.get("url", ""))), "start": spec.get("start"),
         "direction": spec.get("direction"), "min": spec.get("min"), "max": spec.get("max"),
         "margin": spec.get("margin"),
         # the set the job's workers must start with (TARGETS), or pushed / added by a merging worker
         "joined": "started" if name in first or not first else "added"}
        for name, spec in sorted(specs.items())
    ]
    lanes = []
    for name in sorted(specs):
        for key in (reply_text(k) for k in client.lrange(keys.target_lanes(name), 0, -1)):
            raw = {reply_text(k): reply_text(v) for k, v in client.hgetall(keys.lane(key)).items()}
            if not raw:
                continue
            fu, nxt, step = int(raw["fu"]), int(raw["next"]), int(raw["step"])
            settled = bool(raw["reason"]) and (bool(raw["cut"]) or fu == nxt)
            lanes.append({
                "key": key, "target": name, "start": int(raw["start"]),
                "stop": int(raw["stop"]) if raw["stop"] else None,
                "first_undecided": fu, "next": nxt, "in_flight": (nxt - fu) * step,
                "cut_at": int(raw["cut"]) if raw["cut"] else None, "reason": raw["reason"] or None,
                "last_found": int(raw["last"]) if raw["last"] else None, "settled": settled,
                "taken_back": int(client.llen(keys.lane(key, "free"))),
                "counts": {name: int(raw.get(f"c_{name}", 0) or 0) for name in _COUNTS},
                # a list lane of resumed holes: start, stop, first_undecided and next are positions
                "holes": bool(raw.get("ids")),
            })
    job = {reply_text(k): int(v) for k, v in client.hgetall(keys.job).items()}
    waiting = {
        "unsettled_lanes": int(client.scard(keys.unsettled)),
        "delayed_retries": int(client.zcard(keys.delayed)),
        "orphaned_items": int(client.hlen(keys.orphans)),
        "pushed_targets": int(client.llen(keys.feed)),
        "incidents": int(client.llen(keys.incidents)),
    }
    finished = not any(v for k, v in waiting.items() if k != "incidents") and bool(lanes)
    outcomes, active_at = client.hmget(keys.progress, "outcomes", "active_at")
    progress = {"outcomes": int(outcomes or 0),  # recorded by the workers; the last activity the no-progress rule saw
                "last_activity_age": round((now_ms - int(active_at)) / 1000, 3) if active_at else None}
    return {"format": 1, "job": prefix, "name": keys.job_name, "finished": finished, "workers": workers,
            "waiting": waiting, "taken_back": job, "progress": progress, "targets": targets, "lanes": lanes,
            "watch": watch_session(client, prefix)}


def _spec(raw: Any) -> dict[str, Any]:
    try:
        spec = json.loads(raw)
    except ValueError:
        return {}
    return spec if isinstance(spec, dict) else {}


def render_status(document: dict[str, Any]) -> str:
    name = document.get("name") or JobKeys(document["job"]).job_name
    lines = [f"job {name!r} (keys {document['job']}): {'finished' if document['finished'] else 'running'}"]
    for w in document["workers"]:
        state = "alive" if w["alive"] else "stale (its ids are taken back at the next poll)"
        lines.append(f"  worker {w['worker']}: heartbeat {w['heartbeat_age']:.1f} s ago, {state}")
    if not document["workers"]:
        lines.append("  no workers")
    waiting = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in document["waiting"].items())
    lines.append(f"  waiting: {waiting}")
    progress = document.get("progress") or {}
    if progress:
        age = progress.get("last_activity_age")
        lines.append(f"  progress: {progress['outcomes']} outcomes recorded"
                     + (f", last activity {age:.1f} s ago" if age is not None else ""))
    watch = document.get("watch")
    if watch:
        lines.append(f"  watch session: run #{watch.get('session')}, {watch.get('waves', 0)} waves, "
                     f"{watch.get('fetches', 0)} fetches, {watch.get('news', 0)} with news")
    for t in document.get("targets", []):
        bounds = "".join(f", {key} {t[key]}" for key in ("min", "max") if t.get(key) is not None)
        lines.append(f"  target {safe(t['name'])}: {safe(t['url'])} from {t['start']} {t['direction']}{bounds}, "
                     f"margin {t['margin']}" + ("" if t["joined"] == "started" else " (added after the start)"))
    for lane in document["lanes"]:
        c = lane["counts"]
        where = (f"cut at {lane['cut_at']} ({lane['reason']})" if lane["cut_at"] is not None
                 else f"{lane['reason'] or 'at'} {lane['first_undecided']}")
        if lane.get("holes"):
            where = f"holes {lane['first_undecided']}/{(lane['stop'] or 0) + 1} refetched"
        lines.append(
            f"  {lane['key']}: {where}; in flight {lane['in_flight']}; found {c['found']}, missing {c['missing']}, "
            f"failed {c['failed']}, emitted {c['emitted']}, overshoot {c['overshoot']}"
            + ("; settled" if lane["settled"] else "")
        )
    return "".join(safe(line) + "\n" for line in lines)  # names from Redis: one line each, escaped
