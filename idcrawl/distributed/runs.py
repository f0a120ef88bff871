"""Runs of a fleet: which run a starting worker belongs to (``RUN``), the one rule of a distributed job.

The URL queue's reconcile and the resume plans follow the run a worker joined. Why: docs/architecture.md,
"Runs of a fleet".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from idcrawl.distributed import scripts
from idcrawl.distributed.connection import reply_text
from idcrawl.distributed.replies import RunReply
from idcrawl.state.keys import JobKeys
from idcrawl.state.redis import redis_now_ms

if TYPE_CHECKING:
    import redis

__all__ = [
    "SITEMAP_CLAIM_TTL",
    "Run",
    "SitemapReading",
    "await_reconciled",
    "claim_sitemaps",
    "join_run",
    "reconciled",
    "record_run_end",
    "record_run_start",
    "refused",
    "sitemap_reading",
    "sitemaps_read",
    "watch_session",
    "worker_alive",
]

#: Seconds a run's sitemap claim is kept (runs are numbered anew: an old claim only has to outlive its run's start).
SITEMAP_CLAIM_TTL = 7 * 86400
#: seconds between two reads of ``P run`` while a joining worker waits for the run's reconcile
WAIT_POLL = 0.02


@dataclass(frozen=True, slots=True)
class Run:
    """The fleet's run a worker joined: its number, and whether this worker started it."""

    number: int
    new: bool
    #: ``P run``'s n, wave, at, by and ready before this worker joined ('' = none): what :func:`refused` puts back
    before: tuple[str, ...] = field(default=("", "", "", "", ""), compare=False)


def join_run(client: redis.Redis, prefix: str, worker: str, *, lease_ms: int, wave: int | None = None,
             now_ms: int | None = None) -> Run:
    """The run of the job (keys under ``prefix``) that ``worker`` belongs to as it starts (``RUN``): the run in
    progress (another worker in the job, or less than ``lease_ms`` since it started or a worker
    left), else a new one. ``wave``: a watching fleet's later wave (ms), which names its run. ``now_ms``: the
    fleet's time (None: Redis's clock, as the heartbeats; tests pass a time). Registers the worker's heartbeat."""
    script: Any = client.register_script(scripts.RUN)
    keys = JobKeys(prefix)
    args = [worker, "" if wave is None else wave, lease_ms, "" if now_ms is None else now_ms]
    reply = RunReply.parse(script(keys=[keys.run, keys.workers], args=args))
    return Run(reply.number, reply.new, reply.before)


def record_run_start(client: redis.Redis, prefix: str, run: Run, started_at: str, targets: list[str], *,
                     watching: bool = False, later_wave: bool = False) -> None:
    """The job's runs list (``P runs``, read by ``scrapy idplan`` as a single process's runs) gets the fleet's
    run when the worker that started it joins: its number, start time and targets.

    A watching fleet (``watching``) has one row per watch session, not one per wave: the run that starts a
    session (a worker's first wave, ``later_wave`` False) begins its row and its counters (``P watch``:
    the session's row id, waves, fetches, news); a later wave's run only counts a wave."""
    keys = JobKeys(prefix)
    if not run.new:
        return
    if watching and later_wave and client.hexists(keys.watch, "session"):
        client.hincrby(keys.watch, "waves", 1)
        return
    row = {"id": run.number, "started_at": started_at, "targets": sorted(targets)}
    with client.pipeline(transaction=False) as pipe:
        if watching:
            pipe.delete(keys.watch)
            pipe.hset(keys.watch, mapping={"session": run.number, "waves": 1, "fetches": 0, "news": 0})
        pipe.rpush(keys.runs, json.dumps(row))
        pipe.execute()


def record_run_end(client: redis.Redis, prefix: str, run: Run, ended_at: str, reason: str,
                   watch: dict[str, int] | None = None) -> None:
    """A worker of ``run`` leaves: the run's end row (a later worker's row replaces it when read: the run
    ended when its last worker left, for the reason that one closed). A watching worker (``watch``: its
    fetches and news since it last said) adds them to the session's counters and writes the session's
    row: its id, the end and the counters (read back, each row's counters the largest yet: they only grow)."""
    keys = JobKeys(prefix)
    row: dict[str, object] = {"id": run.number, "ended_at": ended_at, "finish_reason": reason}
    if watch is not None:  # (no transaction, as a cluster has it: another worker's counts only add to these)
        with client.pipeline(transaction=False) as pipe:
            for name in ("fetches", "news"):
                pipe.hincrby(keys.watch, name, watch.get(name, 0))
            pipe.hgetall(keys.watch)
            session = {reply_text(k): int(v) for k, v in pipe.execute()[-1].items()}
        if "session" in session:
            row["id"] = session.pop("session")
            row["watch"] = {name: session.get(name, 0) for name in ("waves", "fetches", "news")}
    client.rpush(keys.runs, json.dumps(row))


def watch_session(client: redis.Redis, prefix: str) -> dict[str, int] | None:
    """A watching fleet's last session (``P watch``): its run row id (``session``), waves, fetches and news;
    None: no watch session was recorded."""
    raw = client.hgetall(JobKeys(prefix).watch)
    return {reply_text(k): int(v) for k, v in raw.items()} if raw else None


def claim_sitemaps(client: redis.Redis, prefix: str, run: Run, worker: str) -> bool:
    """Whether ``worker`` reads the sitemaps of the fleet's ``run``: the first worker of the run to ask
    (``HSETNX`` of ``by`` on ``P sitemaps:<run>``, kept ``SITEMAP_CLAIM_TTL`` seconds), for every component
    that reads them (crawl scope's seeds, id targets' evidence); the others read none."""
    key = JobKeys(prefix).sitemap_claim(run.number)
    with client.pipeline(transaction=True) as pipe:  # MULTI: the claim never left without its expiry
        pipe.hsetnx(key, "by", worker)
        pipe.expire(key, SITEMAP_CLAIM_TTL)
        won, _ = pipe.execute()
    return bool(won)


def sitemaps_read(client: redis.Redis, prefix: str, run: Run, at: float, due: float | None) -> None:
    """The reader of ``run``'s sitemaps is done (it leaves the run, at ``at`` on the fleet's clock):
    ``read`` (ms) on the claim, and ``due`` (ms): when what the sitemaps made due wakes a watching
    fleet's next wave (None: nothing)."""
    key = JobKeys(prefix).sitemap_claim(run.number)
    if due is None:
        client.hset(key, mapping={"read": round(at * 1000)})
    else:
        client.hset(key, mapping={"read": round(at * 1000), "due": round(due * 1000)})


@dataclass(frozen=True, slots=True)
class SitemapReading:
    """The reading of a run's sitemaps as its claim says: the worker reading them (``by``; None: none
    claimed them), whether it is done (``read``) and what it made due (``due``, seconds; None: nothing)."""

    by: str | None
    read: bool
    due: float | None


def sitemap_reading(client: redis.Redis, prefix: str, run: Run) -> SitemapReading:
    """``run``'s sitemap claim (``P sitemaps:<run>``) read back."""
    by, read, due = client.hmget(JobKeys(prefix).sitemap_claim(run.number), ["by", "read", "due"])
    return SitemapReading(None if by is None else reply_text(by), read is not None,
                          None if due is None else int(due) / 1000)


def worker_alive(client: redis.Redis, prefix: str, worker: str, *, lease_ms: int) -> bool:
    """Whether ``worker`` is in the job (``P workers``) with a heartbeat younger than ``lease_ms``."""
    keys = JobKeys(prefix)
    beat: Any = client.zscore(keys.workers, worker)
    return beat is not None and redis_now_ms(client, keys.workers) - float(beat) < lease_ms


def reconciled(client: redis.Redis, prefix: str, run: Run) -> None:
    """The worker that started ``run`` (or took its reconcile over) reconciled the URL queue: joining workers go on."""
    client.hset(JobKeys(prefix).run, "ready", str(run.number))


def await_reconciled(client: redis.Redis, prefix: str, run: Run, *, lease_ms: int) -> bool:
    """A worker that joined ``run`` waits until the worker that started it has reconciled the URL queue
    (a URL taken before would be fetched under the last run's scope). True: reconciled (or the run is no
    longer the one joined); False: its starter left or its heartbeat is older than ``lease_ms`` before it
    did, so this worker reconciles (each entry is a compare-and-set: a reconcile cut short is finished)."""
    keys = JobKeys(prefix)
    while True:
        n, ready, by = (None if v is None else reply_text(v) for v in client.hmget(keys.run, "n", "ready", "by"))
        if n != str(run.number) or ready == n or not by:  # moved on, reconciled, or a run older than the rule
            return True
        if not worker_alive(client, prefix, by, lease_ms=lease_ms):
            return False
        time.sleep(WAIT_POLL)  # a condition on Redis: the starter is alive and reconciling


def refused(client: redis.Redis, prefix: str, worker: str, run: Run) -> bool:
    """``worker`` joined ``run`` and was refused (bad input): it is no worker of the job, and a run it started
    is put back as it was, so that nothing saved changed (``RUN_REFUSED``, one script: atomic). A run another
    worker joined in the meantime stays, for that worker. True if the run was put back."""
    script: Any = client.register_script(scripts.RUN_REFUSED)
    keys = JobKeys(prefix)
    return bool(script(keys=[keys.run, keys.workers],
                       args=[worker, run.number, "1" if run.new else "0", *run.before]))

