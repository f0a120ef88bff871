"""The tails' recrawl schedules of a distributed job (``resume=due`` for a fleet).

A tail's schedule moves once per walk of its ascending lane, whichever worker sees the walk end
(:func:`settle_tail`, one ``WATCH``/``MULTI`` transaction). Why: docs/architecture.md, "Tails in a fleet".
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from idcrawl.core.lanes import MARGIN
from idcrawl.core.recrawl import Schedule, record_of, tail_after_run
from idcrawl.core.sitemaps import tail_due_by_sitemap
from idcrawl.distributed.connection import reply_text
from idcrawl.state import decode
from idcrawl.state.keys import JobKeys
from idcrawl.state.redis import watched

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from idcrawl.core.targets import Target

__all__ = ["applied_walk", "plan_late", "settle_tail", "tail_by_sitemap"]



def settle_tail(client: Any, prefix: str, target: Target, lane_key: str, now: float) -> Schedule | None:
    """Apply the recrawl rule to ``target``'s tail for the walk of its ascending lane ``lane_key`` that
    ended (the lane cut by its margin), once for the job: returns the new schedule, or None when there is
    nothing to apply (the walk has not ended, or it was applied already, by this worker or another)."""
    keys = JobKeys(prefix)
    lane, tails, walks = keys.lane(lane_key), keys.tails, keys.tailwalk

    def read(pipe: Any) -> tuple[Schedule | None, Callable[[Any], object] | None]:
        # tried again if another worker wrote meanwhile (it may have applied this walk)
        fields = pipe.hmget(lane, "cut", "reason", "last", "walk")
        cut, reason, last, walk_text = (reply_text(f) for f in fields)
        if not cut or reason != MARGIN:
            return None, None  # not cut by its margin: the walk goes on, or stopped at a bound
        walk = int(walk_text or 0)
        applied = pipe.hget(walks, target.name)
        if applied is not None and int(reply_text(applied)) >= walk:
            return None, None
        raw = pipe.hget(tails, target.name)
        previous = decode.tail_record(raw, f"key {tails!r}", target.name) if raw is not None else None
        schedule = tail_after_run(previous, target.name, int(last) if last else None, now, target.policy,
                                  cut=int(cut))

        def write(pipe: Any) -> None:
            pipe.hset(tails, target.name, json.dumps(record_of(schedule)))
            pipe.hset(walks, target.name, walk)

        return schedule, write

    return watched(client, [lane, tails, walks], read)


def applied_walk(client: Any, prefix: str, target: str) -> int | None:
    """The number of the last walk of ``target``'s tail whose rule was applied (None: none)."""
    raw = client.hget(JobKeys(prefix).tailwalk, target)
    return int(reply_text(raw)) if raw is not None else None


def plan_late(client: Any, prefix: str, target: str, planned: Schedule) -> None:
    """Keep a re-probe of ``target``'s late ids the fleet registered (``late_at``, ``late_below`` of
    ``planned``: :func:`idcrawl.core.resume.late_pass`) in its tail's schedule as the job holds it now
    (a walk applied meanwhile kept), one ``WATCH``/``MULTI`` transaction as :func:`settle_tail`."""
    _move_tail(client, prefix, target, lambda stored: replace(stored or planned, late_at=planned.late_at,
                                                               late_below=planned.late_below))


def tail_by_sitemap(client: Any, prefix: str, target: Target, listed: Iterable[int], now: float) -> bool:
    """``target``'s tail schedule made due now when a sitemap lists ids above its last found id
    (:func:`idcrawl.core.sitemaps.tail_due_by_sitemap`), in the job's tails as the job holds them now
    (one ``WATCH``/``MULTI`` transaction as :func:`settle_tail`). Returns whether it was moved."""
    ids = list(listed)
    return _move_tail(client, prefix, target.name, lambda stored: (
        tail_due_by_sitemap(stored, ids, now, target.policy) if stored is not None else None)) is not None


def _move_tail(client: Any, prefix: str, name: str, move: Callable[[Schedule | None], Schedule | None]
               ) -> Schedule | None:
    """Tail ``name``'s schedule as the job holds it now (None: none stored) replaced by ``move``'s (None:
    left as it is), in one transaction (:func:`~idcrawl.state.redis.watched`); returns the one written."""
    tails = JobKeys(prefix).tails

    def read(pipe: Any) -> tuple[Schedule | None, Callable[[Any], object] | None]:
        raw = pipe.hget(tails, name)
        moved = move(decode.tail_record(raw, f"key {tails!r}", name) if raw is not None else None)
        if moved is None:
            return None, None
        return moved, lambda pipe: pipe.hset(tails, name, json.dumps(record_of(moved)))

    return watched(client, [tails], read)
