"""The tails' recrawl schedules of a distributed job (``resume=due`` for a fleet).

A single process applies the recrawl rule to a tail in its run's last commit
(:mod:`idcrawl.state.recorder`). A fleet has no "last commit": its workers
start and stop on their own, any of them may be killed. So a tail's schedule is
updated by a *walk* of its ascending lane, once, in Redis:

- every walk of an ascending lane has a number, the lane's ``walk`` field: 0
  for the lane's first walk (the job's first crawl of the target), and one more
  each time a resume reopens the lane cut by its margin (``resume.lua``:
  ``resume=due`` when the tail is due, ``bound`` and ``all`` too);
- when a walk has ended (the lane is settled, cut by its margin), the first
  worker that sees it applies the rule (:func:`idcrawl.core.recrawl.tail_after_run`,
  news = the lane's last found id above the schedule's ``last_found``) and
  records the walk's number in ``P tailwalk`` in the same transaction
  (``WATCH``/``MULTI``: :func:`settle_tail`). Every other worker, and the same
  worker again, finds the number there and changes nothing: one update per walk,
  whichever workers see it and however many are killed. A walk that has not
  ended (every worker killed before the margin) changes no schedule, as a single
  process's killed run changes none: the tail stays due and the next due run
  walks it again and applies the rule once.

Every worker calls :func:`settle_tail` for the ascending lanes it saw settle
(its poll, and when it leaves). The rule, the due test and the due order are
:mod:`idcrawl.core.recrawl`'s and :mod:`idcrawl.core.resume`'s, as in one process;
the keys (``P tails``, ``P tailwalk``) are under the job's prefix and hash tag.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from idcrawl.core.lanes import MARGIN
from idcrawl.core.recrawl import Schedule, record_of, tail_after_run
from idcrawl.distributed.connection import reply_text
from idcrawl.state import decode
from idcrawl.state.keys import JobKeys

if TYPE_CHECKING:
    from idcrawl.core.targets import Target

__all__ = ["applied_walk", "settle_tail"]



def settle_tail(client: Any, prefix: str, target: Target, lane_key: str, now: float) -> Schedule | None:
    """Apply the recrawl rule to ``target``'s tail for the walk of its ascending lane ``lane_key`` that
    ended (the lane cut by its margin), once for the job: returns the new schedule, or None when there is
    nothing to apply (the walk has not ended, or it was applied already, by this worker or another)."""
    import redis

    keys = JobKeys(prefix)
    lane, tails, walks = keys.lane(lane_key), keys.tails, keys.tailwalk
    with client.pipeline() as pipe:
        while True:
            try:
                pipe.watch(lane, tails, walks)
                fields = pipe.hmget(lane, "cut", "reason", "last", "walk")
                cut, reason, last, walk_text = (reply_text(f) for f in fields)
                if not cut or reason != MARGIN:
                    return None  # not cut by its margin: the walk goes on, or stopped at a bound
                walk = int(walk_text or 0)
                applied = pipe.hget(walks, target.name)
                if applied is not None and int(reply_text(applied)) >= walk:
                    return None
                raw = pipe.hget(tails, target.name)
                previous = decode.tail_record(raw, f"key {tails!r}", target.name) if raw is not None else None
                schedule = tail_after_run(previous, target.name, int(last) if last else None, now, target.policy)
                pipe.multi()
                pipe.hset(tails, target.name, json.dumps(record_of(schedule)))
                pipe.hset(walks, target.name, walk)
                pipe.execute()
                return schedule
            except redis.WatchError:
                continue  # another worker wrote meanwhile: look again (it may have applied this walk)


def applied_walk(client: Any, prefix: str, target: str) -> int | None:
    """The number of the last walk of ``target``'s tail whose rule was applied (None: none)."""
    raw = client.hget(JobKeys(prefix).tailwalk, target)
    return int(reply_text(raw)) if raw is not None else None
