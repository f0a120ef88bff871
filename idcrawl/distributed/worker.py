"""``RedisWorker``: one worker of a distributed job, the runtime's plug-in.

It drives a :class:`~idcrawl.distributed.frontier.RedisFrontier` and adds the poll (heartbeat, taking back
stopped workers' ids, pushed targets, orphaned items), waiting for the fleet, liveness; its parts: :mod:`.acks`,
:mod:`.gate`. Why: docs/architecture.md, "The fleet's protocol", "A worker".
"""

from __future__ import annotations

import json
import logging
import pickle
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.utils.asyncio import create_looping_call

from idcrawl._scrapy import close_spider, engine_busy, sequential_host
from idcrawl.config import config_of
from idcrawl.core.clock import format_time
from idcrawl.core.inputs import TargetError
from idcrawl.core.lanes import MARGIN, Outcome
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Schedule
from idcrawl.core.resume import LatePass, due_first, late_due, late_pass, tail_due, tail_reach
from idcrawl.core.safetext import mask_secrets, safe
from idcrawl.core.sitemaps import Evidence, evidence_due
from idcrawl.core.talk import reach_text
from idcrawl.core.targets import RESET_MODES, Target, parse_target
from idcrawl.core.watch import NO_COALESCING, watch_targets, wave_key
from idcrawl.distributed.acks import FleetAcks
from idcrawl.distributed.codec import decode_outputs, encode_outputs
from idcrawl.distributed.connection import (
    RedisUnavailable,
    check_no_eviction,
    connect,
    describe,
    job_prefix,
    reply_text,
)
from idcrawl.distributed.frontier import RedisFrontier, StateLost, TargetConflict, check_distributed
from idcrawl.distributed.gate import FleetGate, FleetRetries
from idcrawl.distributed.job import RedisJob
from idcrawl.distributed.pagerecords import FleetPageRecords, is_due_lane, move_by_sitemap
from idcrawl.distributed.runs import (
    SitemapReading,
    claim_sitemaps,
    record_run_end,
    record_run_start,
    refused,
    sitemap_reading,
    sitemaps_read,
    worker_alive,
)
from idcrawl.distributed.sentinel import primary_address, primary_id
from idcrawl.distributed.urlqueue import RedisUrlQueue
from idcrawl.errors import BadInputError
from idcrawl.processes import worker_gone, worker_id
from idcrawl.runtime import STATS_PREFIX, IdRuntime, Payload
from idcrawl.state.base import StateError
from idcrawl.state.lock import state_owner
from idcrawl.state.redis import is_oom

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Mapping

    from scrapy.statscollectors import StatsCollector

    from idcrawl.config import IdConfig
    from idcrawl.core.scope import JobScope
    from idcrawl.core.sitemaps import SitemapUrl
    from idcrawl.core.urlqueue import UrlQueue
    from idcrawl.distributed.limits import FleetLimitParts
    from idcrawl.worker import Worker

__all__ = ["RedisWorker", "parse_pushed"]

logger = logging.getLogger(__name__)

PREFIX = f"{STATS_PREFIX}/redis"


def parse_pushed(raw: bytes | str, defaults: dict[str, Any]) -> list[Target]:
    """A pushed feed entry: one JSON object of target keys (as a ``[[targets]]`` table), or a list of them."""
    data = json.loads(raw)
    entries = data if isinstance(data, list) else [data]
    targets = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise TargetError("feed", entry, "must be a JSON object of target keys")
        target = parse_target({k: v for k, v in entry.items() if k not in ("resume", "holes")}, defaults)
        check_distributed(target)
        targets.append(target)
    return targets


class RedisWorker:
    """Frontier in Redis + polling + item acknowledgements, for one worker of a job."""

    #: Redis did not answer; or (recording) outputs that cannot be stored in Redis
    errors: tuple[type[Exception], ...] = (RedisError, pickle.PicklingError, TypeError, ValueError, AttributeError)
    #: a page record goes to Redis with its outcome (no checkpoint waits for the feeds' flush)
    records_pages_at_once = True

    @classmethod
    def keeps_state(cls, config: IdConfig) -> bool:
        """A fleet's job always keeps its state (in Redis)."""
        return True

    def __init__(self, runtime: IdRuntime) -> None:
        """Join the Redis job with the runtime's targets (none: wait for pushed ones), or one error line
        (:class:`~idcrawl.errors.BadInputError`): connect, check nobody else owns the job, join it."""
        self.runtime = runtime
        self.crawler = runtime.crawler
        spider_name = getattr(self.crawler.spidercls, "name", "idseq")
        self._check_ids(runtime, spider_name)
        self.resume_notes: dict[str, str] = {}
        self._reads_sitemaps = False  # this worker claimed the run's sitemaps (claim_sitemaps)
        self._evidence_at: float | None = None  # the earliest due time of what they moved (watch: a wave then)
        self._connect(spider_name)
        self._refuse_if_owned(spider_name)
        try:
            self._join(runtime, spider_name)
        except RedisError as exc:  # out of memory, or gone while joining: one line, nothing half-read used
            raise BadInputError(f"{spider_name}: {self._redis_failed(exc, 'as this worker joined the job')}") from None
        self._init_running(runtime)
        logger.info("idcrawl: worker %s of Redis job %r (%d targets of its own)",
                    self.worker, self.job.prefix, len(runtime.targets))

    # -- joining the job: the steps of __init__ ---------------------------------------------------

    @staticmethod
    def _check_ids(runtime: IdRuntime, spider_name: str) -> None:
        """Refuse targets whose ids a distributed job cannot hold (a watching fleet's later wave watches
        the targets joined or pushed since, too)."""
        if runtime.wave > 1:
            runtime.targets[:] = watch_targets(runtime.targets)
        try:
            for target in runtime.targets:
                check_distributed(target)
        except TargetError as exc:
            raise BadInputError(f"{spider_name}: bad input: {exc}") from None

    def _connect(self, spider_name: str) -> None:
        """The job's Redis client (``noeviction`` checked) and its scripts."""
        settings = self.crawler.settings
        try:
            self.client: Any = connect(settings, stats=self.crawler.stats)
            warning = check_no_eviction(self.client, settings)
        except RedisUnavailable as exc:
            raise BadInputError(f"{spider_name}: {exc}") from None
        if warning:
            logger.warning("idcrawl: %s", warning)
        self.job = RedisJob(self.client, job_prefix(settings, spider_name))
        config = config_of(self.crawler)
        self.job.wait_replicas, self.job.wait_ms = config.redis_wait_replicas, round(config.redis_wait_timeout * 1000)
        try:  # which server answers: another after an outage (a failover, a restart) may lack writes (poll)
            self._primary = primary_id(self.client, self.job.keys.workers)
            self._address = primary_address(self.client)
        except RedisError as exc:
            raise BadInputError(f"{spider_name}: {self._redis_failed(exc, 'as this worker joined the job')}") from None

    def _refuse_if_owned(self, spider_name: str) -> None:
        """One process per state: a single-process crawl writing this job's keys keeps workers out."""
        try:
            owner = state_owner(self.client, self.job.keys.owner)
        except RedisError as exc:
            raise BadInputError(f"{spider_name}: {safe(exc)}") from None
        if owner is not None:
            raise BadInputError(f"{spider_name}: Redis job {self.job.prefix!r} is in use by a single-process crawl "
                                f"(held by {owner}; owner key {self.job.keys.owner!r}); a fleet worker "
                                "cannot join it: wait for it to end, or stop it")

    def _redis_failed(self, exc: Exception, when: str) -> str:
        """The line for a failed Redis call: out of memory (``maxmemory`` with ``noeviction``), or another error."""
        where = mask_secrets(describe(self.crawler.settings))
        if is_oom(exc):
            return (f"Redis at {where} is out of memory (maxmemory reached) {when}: the call was refused, nothing "
                    f"was evicted; give Redis more memory (maxmemory) or clean finished jobs (scrapy idjob clean)")
        return f"Redis at {where} failed {when}: {mask_secrets(str(exc))}"

    def _join(self, runtime: IdRuntime, spider_name: str) -> None:
        """Join the job: its targets checked against this worker's, its run, this worker's targets registered
        and their resumes planned or joined (refused: the run is put back), the page records read."""
        self._make_frontier()
        #: the found pages' records of due runs (conditional revisits, items of changes only): distributed.pagerecords
        self.page_records = FleetPageRecords(self.client, self.job.prefix)
        self.pages = PageBook(runtime.clock, {target.name: target.policy for target in runtime.targets},
                              retain=False, sink=self.page_records,
                              refetch_after=config_of(self.crawler).recrawl_refetch_after)
        self.pages.coalescing = runtime.coalescing
        if self.pages.coalescing != NO_COALESCING:  # watch mode: the pages a wave fetches share its time
            self.pages.wave_at = runtime.wave_time()
        self.frontier.page_records = self.page_records  # a visited page's record goes with its outcome
        self._due_ids: dict[str, list[int]] = {}  # resume=due: target -> its due pages, as this worker planned them
        self._due_planned = 0  # the due pages of the plans this worker registered for the fleet
        self._late: dict[str, LatePass] = {}  # resume=due: target -> its re-probe of late ids, as planned here
        self._late_found = 0  # late ids this worker found
        self._refuse_resets(runtime.targets, spider_name)
        if runtime.targets and runtime.wave == 1:  # a later wave's worker has the targets it joined too
            self._check_targets(runtime.targets, spider_name)
        # the fleet's run this worker belongs to: its resume plans and the URL queue follow it (distributed.runs)
        run = self.frontier.join_run(self._wave())
        record_run_start(self.client, self.job.prefix, run, runtime.clock.stamp(), [t.name for t in runtime.targets],
                         watching=runtime.watching, later_wave=runtime.wave > 1)
        not_due: dict[str, str] = {}  # resume=due: target -> when its tail falls due (this worker's plan)
        resumed = self._register(runtime.targets, spider_name, not_due)
        self._note_resumes(runtime.targets, resumed, not_due)
        try:
            self._load_page_records()
        except StateError as exc:
            raise BadInputError(f"{spider_name}: {exc}") from None

    def _make_frontier(self) -> None:
        """This worker's identity, leases and frontier, from the settings."""
        crawler, settings = self.crawler, self.crawler.settings
        self.config = config = config_of(crawler)
        self.worker = worker_id()
        self.lease = config.redis_lease_timeout
        self.poll_interval = config.redis_poll_interval
        self.idle_timeout = config.redis_idle_timeout
        self.frontier: RedisFrontier[Payload] = RedisFrontier(
            self.job, self.worker,
            block=config.redis_claim_block,
            lease_ms=int(self.lease * 1000),
            neutral=frozenset() if config.margin_counts_failed else frozenset({Outcome.FAILED}),
            # the crawler's spider is set only once from_crawler returned: looked up when used
            encode=lambda payload: encode_outputs(payload[2], crawler.spider),
            decode=lambda lane, id_, blob: (lane, id_, decode_outputs(blob, crawler.spider)),
            concurrency=settings.getint("CONCURRENT_REQUESTS"),
            adaptive=config.speculation == "adaptive",
            sequential=lambda target: sequential_host(settings, target.host),
            max_held=config.max_held_payloads,
        )
        self._defaults = config.target_defaults()

    def _refuse_resets(self, targets: list[Target], spider_name: str) -> None:
        """Starting over is not a worker's word: each worker of the fleet would say it."""
        for target in targets:
            if target.resume in RESET_MODES:
                raise BadInputError(
                    f"{spider_name}: bad input: target {target.name!r}: resume={target.resume}: the workers of a "
                    f"distributed job do not start it over: stop them and run scrapy idjob clean (Redis job "
                    f"{self.job.prefix!r}), or give another IDCRAWL_REDIS_JOB"
                )

    def _register(self, targets: list[Target], spider_name: str, not_due: dict[str, str]) -> dict[str, str | None]:
        """Add this worker's targets to the job and plan (or join) their resumes: auto (the default, as
        bound), bound, holes, all, due, planned once for the job (:meth:`RedisFrontier.resume`). Returns
        each target's verdict. Refused (a conflict, damaged state): the run is put back, one error line."""
        resumed: dict[str, str | None] = {}
        try:
            for target in self._planned(targets):
                self.frontier.add_target(target)
                walk_tail = self._walk_tail(target, spider_name, not_due)
                passed = self._late.get(target.name)
                resumed[target.name] = self.frontier.resume(
                    target, walk_tail=walk_tail, wave=self._wave(), due_pages=self._due_ids.get(target.name, ()),
                    late=passed.ids if passed is not None else (),
                    reach=tail_reach(self._tails.get(target.name)) if target.resume == "due" else None,
                    max_reach=self.config.sitemap_max_reach)
                if resumed[target.name] == "created" and passed is not None:
                    self._plan_late(target, passed)
        except (TargetConflict, StateError) as exc:  # StateError: the job's stored state is damaged
            if self.frontier.run is not None:  # refused: not a worker of the run, nothing saved changed
                refused(self.client, self.job.prefix, self.worker, self.frontier.run)
            what = "bad input: " if isinstance(exc, TargetConflict) and not isinstance(exc, StateLost) else ""
            raise BadInputError(f"{spider_name}: {what}{exc}") from None
        return resumed

    def _note_resumes(self, targets: list[Target], resumed: dict[str, str | None], not_due: dict[str, str]) -> None:
        """The plan lines' notes: lanes the job had walked, resumes registered or joined."""
        for key, lane in self.frontier.lanes.items():  # mirrors of the job's lanes: has it walked them?
            if lane.first_undecided != lane.start or lane.stopped or self.frontier.lane_direction[key] == "holes":
                name = self.frontier.lane_target[key].name
                self.resume_notes[name] = "resumed (Redis job): lanes go on where its workers left them"
        for target in targets:
            verdict = resumed.get(target.name)
            if verdict is not None:  # the plan line shows the holes lane itself ("holes: N ids to refetch")
                self.resume_notes[target.name] = f"resumed (Redis job, resume={target.resume}): " + (
                    "registered for the fleet" if verdict == "created" else "joined the fleet's resume in progress")
                if verdict == "created" and self._due_ids.get(target.name):
                    self._due_planned += len(self._due_ids[target.name])
                if verdict == "created" and target.name in not_due:
                    self.resume_notes[target.name] += f"; {not_due[target.name]}"
                tail = self.frontier.lanes.get(f"{target.name}:asc")
                listed = tail_reach(self._tails.get(target.name))
                if tail is not None and tail.reach is not None and listed is not None:  # a sitemap listed an id
                    self.resume_notes[target.name] += f"; {reach_text(tail.reach, listed)}"

    def _init_running(self, runtime: IdRuntime) -> None:
        """What the joined worker keeps while it runs: polls, acknowledgements, retries, outages."""
        #: ascending lanes whose walk this worker has not yet seen applied to its tail's schedule (settle_tails)
        self._tails_open = {key for key, direction in self.frontier.lane_direction.items() if direction == "asc"}
        #: the crawl scope's URL queue shared by the fleet (url_queue; None: no crawl scope)
        self.urls: RedisUrlQueue | None = None
        #: started without targets (nor page targets): waits for pushed ones (until the idle timeout)
        self.feeder = not runtime.targets and not runtime.scope
        self.frontier.wait_for_feed = self.feeder
        self._tver = -1
        self._loop: Any = None
        self._idle_since = time.monotonic()
        self._last_poll: float | None = None
        #: acknowledgements of released outputs and found pages once their items are written
        self.acks = FleetAcks(runtime, self.client, self.job, self.worker, self.config.state_commit_items,
                              self.config.state_commit_interval, outage=self._outage)
        self._closed = False
        self._quiet_polls = 0
        #: the scheduler's parts: retries shared by the fleet, each slot's next start reserved for the fleet
        self.retries = FleetRetries(runtime, self.frontier, self.job, self.worker, self.poll_interval,
                                    outage=self._outage, down=self._redis_down, load_targets=self._load_targets,
                                    active=self._active)
        self.gate = FleetGate(runtime, self.job, self.worker, lease=self.lease, outage=self._outage)
        self._unrecorded: list[tuple[str, int, Outcome, list[Any] | None, int]] = []
        self._down_since: float | None = None
        self._checked_at: float | None = None  # monotonic time of the last poll that found the job's keys there
        self._joined_at = time.monotonic()
        self.no_progress_leases = self.config.redis_no_progress_leases
        self._taken = 0  # ids given back to the job when this worker left

    def _check_targets(self, targets: list[Target], spider_name: str) -> None:
        """A fleet job's targets are one set: a worker whose targets differ from the job's is refused in one
        line, unless ``IDCRAWL_REDIS_MERGE_TARGETS`` (then its new targets join the job, as pushed ones do)."""
        merge = self.config.redis_merge_targets
        differs = self.job.check_targets([target.name for target in targets], merge)
        if differs is None:
            return
        extra, missing = differs.extra, differs.missing

        def names(items: tuple[str, ...]) -> str:
            shown = ", ".join(repr(safe(name)) for name in items[:5])
            return shown + (f" and {len(items) - 5} more" if len(items) > 5 else "")

        parts = ([f"{names(extra)} not in the job"] if extra else []) + (
            [f"the job's {names(missing)} not among this worker's"] if missing else [])
        raise BadInputError(
            f"{spider_name}: bad input: this worker's targets differ from those of Redis job {safe(self.job.prefix)!r} "
            f"({'; '.join(parts)}): start it with the job's targets, give it another IDCRAWL_REDIS_JOB, or set "
            "IDCRAWL_REDIS_MERGE_TARGETS=True to join the job with them")

    # -- watch mode in a fleet (idcrawl.extensions.watch) ---------------------------------------

    def _wave(self) -> int | None:
        """Watch mode: the key of the wave this worker plans (:func:`idcrawl.core.watch.wave_key`), the
        same for every worker of the fleet awake for it; None for the first wave (the run itself, a plain
        ``resume=due`` plan of the fleet) and when not watching."""
        at = self.runtime.wave_at
        return wave_key(at) if self.runtime.wave > 1 and at is not None else None

    def _settle_before_wave(self, targets: list[Target]) -> None:
        """Watch mode: before planning a wave, apply the rule to any walk of a due target's tail that ended
        but was not applied (its worker was killed between the walk's end and its poll), so that the plan
        sees the tail walked and does not walk it again in the same wave."""
        if not self.config.watch:
            return
        from idcrawl.core.frontier import lane_specs
        from idcrawl.distributed.tails import settle_tail

        now = self.runtime.clock.now()
        for target in targets:
            for spec in lane_specs(target):
                if target.resume == "due" and spec.direction == "asc":
                    settle_tail(self.client, self.job.prefix, target, spec.key, now)

    # -- sitemaps as evidence (idcrawl.spidermiddlewares.evidence) --------------------------

    def claim_sitemaps(self) -> bool:
        """The first worker of the fleet's run to ask reads the sitemaps, for crawl scope and the id targets'
        evidence (:func:`idcrawl.distributed.runs.claim_sitemaps`: ``P sitemaps:<run>``); the others read none."""
        if self.frontier.run is None:
            return False
        try:
            self._reads_sitemaps = claim_sitemaps(self.client, self.job.prefix, self.frontier.run, self.worker)
            return self._reads_sitemaps
        except RedisError as exc:
            self._outage(exc)
            return False

    def sitemap_evidence(self, target: str, entries: Mapping[int, SitemapUrl], now: float) -> Evidence:
        """The job's records of ``target``'s found pages (``P pages:``/``pagedue:``) and its tail's schedule
        (``P tails``) moved by a sitemap's entries, each in one transaction
        (:func:`~idcrawl.distributed.pagerecords.move_by_sitemap`, :func:`~idcrawl.distributed.tails.tail_by_sitemap`):
        the next run's (or wave's) plan takes them."""
        from idcrawl.distributed.tails import tail_by_sitemap

        known = next((t for t in self.runtime.targets if t.name == target), None)
        if known is None:
            return Evidence()
        try:
            pages = move_by_sitemap(self.client, self.job.prefix, target, entries, now, known.policy)
            tail = tail_by_sitemap(self.client, self.job.prefix, known, entries, now)
        except RedisError as exc:
            self._outage(exc)
            return Evidence()
        except StateError as exc:  # a damaged record: left as it is, said once
            logger.warning("idcrawl: sitemaps: %s", exc)
            return Evidence()
        times = [record.due_at() for record in pages.values()] + ([now] if tail else [])  # a tail: due now
        self._evidence_at = evidence_due(self._evidence_at, times)
        return Evidence(len(pages), tail)

    def _sitemaps_read(self) -> None:
        """Leaving the run: if this worker read its sitemaps, the claim says it is done and when what they
        made due wakes a watching fleet's next wave: at once (this worker's leaving) or at its due time
        (:meth:`watch_evidence`, the same for every worker of the run)."""
        run = self.frontier.run
        if not self._reads_sitemaps or run is None:
            return
        now = self.runtime.clock.now()
        due = None if self._evidence_at is None else max(self._evidence_at, now)
        sitemaps_read(self.client, self.job.prefix, run, now, due)

    def sitemaps_pending(self) -> bool:
        """Watch mode, after the wave: whether another worker of the run is still reading the id targets'
        sitemaps (alive, not done): what they make due wakes the next wave, so the watch waits for it."""
        try:
            reading = self._sitemap_reading()
            return (reading is not None and reading.by is not None and reading.by != self.worker and not reading.read
                    and worker_alive(self.client, self.job.prefix, reading.by, lease_ms=int(self.lease * 1000)))
        except RedisError as exc:
            raise BadInputError(f"idcrawl: watch: the Redis job cannot be read ({exc})") from None

    def watch_evidence(self) -> float | None:
        """Watch mode, after the wave: when what the run's sitemaps made due wakes the next wave, as the
        reader left it on the run's claim (``P sitemaps:<run>`` ``due``): the same time for every worker of
        the run, so they agree on the wave (even a time past: the wave starts at once)."""
        try:
            reading = self._sitemap_reading()
        except RedisError as exc:
            raise BadInputError(f"idcrawl: watch: the Redis job cannot be read ({exc})") from None
        return None if reading is None else reading.due

    def _sitemap_reading(self) -> SitemapReading | None:
        """The run's sitemap claim as Redis holds it (None: no id target's sitemaps, or no run)."""
        run = self.frontier.run
        return None if not self.runtime.sitemaps or run is None else sitemap_reading(self.client, self.job.prefix, run)

    def watch_schedules(self) -> list[Schedule]:
        """Watch mode, after a wave (this worker has left the job, its ended walks applied): the job's tail
        schedules as Redis holds them, so every worker, one that joined late too, sleeps until the same
        earliest due time (:func:`idcrawl.core.watch.next_wave_at`). Found pages due for a revisit join a
        wave through :meth:`due_pages`."""
        from idcrawl.distributed.state import JobStateStore

        try:
            return list(JobStateStore(self.client, self.job.prefix, read_only=True).tail_schedules().values())
        except RedisError as exc:
            raise BadInputError(f"idcrawl: watch: the Redis job cannot be read ({exc})") from None

    def watch_pages(self) -> list[float]:
        """Watch mode, after a wave: the earliest due time of the job's found pages as Redis holds their
        records, so every worker wakes for the same page (:func:`idcrawl.core.watch.next_wave_at`). From the
        index of page due times (``P pagedue:<target>``, rebuilt once for a job written before it): O(log
        pages) per target and wave."""
        from idcrawl.distributed.state import JobStateStore

        store = JobStateStore(self.client, self.job.prefix)
        now = self.runtime.clock.now()
        try:
            times = [store.next_page_due(target.name, now, target.policy.gone_limit) for target in self.runtime.targets]
        except (RedisError, StateError) as exc:
            raise BadInputError(f"idcrawl: watch: the Redis job cannot be read ({exc})") from None
        return [at for at in times if at is not None]

    # -- resume=due: the tails of a fleet (idcrawl.distributed.tails) -------------------------

    def _planned(self, targets: list[Target]) -> list[Target]:
        """The targets in the order a single process plans them: for ``resume=due`` the most overdue tails
        first (:func:`idcrawl.core.resume.due_first`), with the schedules the job holds now."""
        self._tails: dict[str, Schedule] = {}
        if any(target.resume == "due" for target in targets):
            # imported for a due plan only: importing the state stores at every worker's start shifted the workers'
            # start times enough that test_robots_txt_fetches_keep_the_fleets_gaps_too failed every time
            from idcrawl.distributed.state import JobStateStore

            self._settle_before_wave(targets)
            self._tails = JobStateStore(self.client, self.job.prefix, read_only=True).tail_schedules()
        return due_first(targets, self._tails, self.runtime.clock.now()) if self._tails else list(targets)

    def _walk_tail(self, target: Target, spider_name: str, not_due: dict[str, str]) -> bool:
        """``resume=due``: is the target's tail due at the clock's now (:func:`idcrawl.core.resume.tail_due`,
        the single process's rule)? Only the first worker's answer counts: it registers the fleet's plan,
        and the workers that join it take that plan (RedisFrontier.resume), with its due pages (:meth:`due_pages`)."""
        if target.resume != "due":
            return True
        schedule = self._tails.get(target.name)
        walk = tail_due(schedule, self.runtime.clock.now(), self.runtime.coalescing)
        pages = self._due_ids[target.name] = self.due_pages(target)
        late = self.late_ids(target, schedule)
        if not walk and schedule is not None:
            not_due[target.name] = f"tail not due until {format_time(schedule.due_at())}, " + (
                f"{len(pages)} found pages due" if pages else "nothing to fetch") + (
                f", {len(late.ids):,} late ids to re-probe" if late is not None else "")
        return walk

    def late_ids(self, target: Target, schedule: Schedule | None) -> LatePass | None:
        """``resume=due``: the re-probe of ``target``'s late ids due now (:func:`idcrawl.core.resume.late_pass`,
        the single process's rule, on the job's outcomes); the first worker's is the fleet's plan (a
        ``<target>:late`` list lane) and it stores the re-probe in the tail's schedule (:meth:`_plan_late`)."""
        now = self.runtime.clock.now()
        if not late_due(target, schedule, now):  # read the outcomes only when one is due
            return None
        from idcrawl.distributed.state import JobStateStore

        state = JobStateStore(self.client, self.job.prefix, read_only=True).load(target.name)
        passed = late_pass(target, schedule, state.outcomes if state is not None else {}, now)
        if passed is not None:
            self._late[target.name] = passed
        return passed

    def _plan_late(self, target: Target, passed: LatePass) -> None:
        """This worker registered the fleet's re-probe of ``target``'s late ids: counted, and kept in the
        tail's schedule (:func:`idcrawl.distributed.tails.plan_late`), so the next one waits ``late_every``."""
        from idcrawl.distributed.tails import plan_late

        plan_late(self.client, self.job.prefix, target.name, passed.schedule)
        self.stats.inc_value(f"{STATS_PREFIX}/late/planned", len(passed.ids))

    def due_pages(self, target: Target) -> list[int]:
        """``resume=due``: the found ids of ``target`` due for a revisit at the clock's now, most overdue
        first (:meth:`idcrawl.core.pagebook.PageBook.due_ids`, the single process's computation, on the
        job's page records and found ids: :func:`idcrawl.distributed.pagerecords.fleet_due_ids`, from the index of
        page due times). The first worker's list is the fleet's plan (a ``<target>:due`` list lane, each page
        fetched once by the fleet); the due pages' records are loaded, whose validators its revisits send."""
        from idcrawl.core.lanes import Outcome
        from idcrawl.distributed.state import JobStateStore

        state = JobStateStore(self.client, self.job.prefix, read_only=True).load(target.name)
        self.pages.policies[target.name] = target.policy
        found = state.outcomes.get(Outcome.FOUND, ()) if state is not None else ()
        return self.page_records.due_ids(self.pages, target.name, found)

    def _load_page_records(self) -> None:
        """The page records of the ids of the due runs this worker walks (a plan it joined, whose ids may
        differ from its own: :meth:`RedisFrontier.join_list_lanes`): their revisits are conditional too."""
        for key, ids in self.frontier.list_lanes().items():
            target = self.frontier.lane_target[key]
            if is_due_lane(key, target.name):
                self.pages.policies.setdefault(target.name, target.policy)
                self.page_records.load_ids(self.pages, target.name, ids)

    def _count_page_records(self) -> None:
        """The stat of the page records written with their outcomes (``RECORD``: :meth:`FleetPageRecords.outgoing`)."""
        if self.page_records.written:
            self.stats.set_value(f"{PREFIX}/page_records_written", self.page_records.written)

    def settle_tails(self) -> int:
        """Apply the recrawl rule, once for the job, to the tails whose walk this worker saw end (an ascending
        lane cut by its margin: :func:`idcrawl.distributed.tails.settle_tail`); returns how many it applied.
        One pipelined read first, so that the walks another worker applied cost no transaction."""
        ended = sorted(key for key in self._tails_open
                       if (lane := self.frontier.lanes.get(key)) is not None and lane.settled and lane.reason == MARGIN)
        if not ended:
            return 0
        from idcrawl.distributed.tails import settle_tail  # imported when a walk ends (see _planned)

        pipe = self.client.pipeline(transaction=False)
        for key in ended:
            pipe.hget(self.job.keys.lane(key), "walk")
            pipe.hget(self.job.keys.tailwalk, self.frontier.lane_target[key].name)
        replies = pipe.execute()
        applied = 0
        now = self.runtime.clock.now()
        for n, key in enumerate(ended):
            self._tails_open.discard(key)
            walk, done = replies[2 * n: 2 * n + 2]
            if done is not None and int(done) >= int(walk or 0):
                continue
            if settle_tail(self.client, self.job.prefix, self.frontier.lane_target[key], key, now) is not None:
                applied += 1
        if applied:
            self._inc(f"{PREFIX}/tails_settled", applied)
        return applied

    @property
    def stats(self) -> StatsCollector:
        return self.runtime.stats

    def url_queue(self, scope: JobScope, rng: random.Random, skip: Callable[[str], bool] | None,
                  postpone_for: float, previous: UrlQueue | None) -> RedisUrlQueue:
        """The crawl scope's URL queue (``IdScopeMiddleware`` asks): one queue for the fleet, in the job's
        keys (:mod:`idcrawl.distributed.urlqueue`); its taken URLs are held under this worker's lease."""
        self.urls = RedisUrlQueue(self.client, self.job.prefix, self.worker, lease_ms=int(self.lease * 1000),
                                  rng=rng, skip=skip, postpone_for=postpone_for, run=self.frontier.run)
        return self.urls

    def _inc(self, key: str, count: int = 1) -> None:
        self.stats.inc_value(key, count)

    #: a worker's counts are its own share; lane cursors and cuts are the job's
    counts_scope = " by this worker"

    # -- lifecycle ---------------------------------------------------------------

    def open(self) -> None:
        self.crawler.signals.connect(self.acks.item_written, signal=signals.item_scraped)
        self.crawler.signals.connect(self.acks.item_written, signal=signals.item_dropped)
        self._idle_since = self._joined_at = time.monotonic()
        if self._due_planned:
            self.stats.set_value(f"{STATS_PREFIX}/pages/due", self._due_planned)
        self._take_over()
        self.gate.listen()  # freed places of full hosts are notified: a waiting request does not ask again
        self.poll()
        self._loop = create_looping_call(self.poll)
        self._loop.start(self.poll_interval, now=False)

    def _take_over(self) -> None:
        """Joining: release at once the job's workers that are processes of this machine known to have
        ended (:func:`~idcrawl.processes.worker_gone`), without waiting for their lease.

        Their undecided ids go back to the lanes' free lists and their unacknowledged items to the
        orphans, as when a worker leaves; this worker's first poll takes them. Workers elsewhere are
        left to the lease (``IDCRAWL_REDIS_LEASE_TIMEOUT``).
        """
        try:
            members = self.client.zrange(self.job.keys.workers, 0, -1)
            gone = [w for w in map(reply_text, members) if w != self.worker and worker_gone(w)]
            ids = 0
            for worker in gone:
                ids += self.job.leave(worker)
            if gone:
                self.client.hincrby(self.job.keys.job, "reclaimed_workers", len(gone))
        except RedisError as exc:
            self._outage(exc)
            return
        if gone:
            logger.warning("idcrawl: took over %d ids of %d ended worker(s) of this machine: %s",
                           ids, len(gone), ", ".join(gone[:5]))
            self._inc(f"{PREFIX}/taken_over_workers", len(gone))
            self._inc(f"{PREFIX}/taken_over_ids", ids)

    def stop(self, reason: str) -> None:
        """This worker leaves: acknowledge what was written, give back claims and the rest at once.

        The job's lanes go on (other workers, a later start): they keep the job's reason.
        """
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._closed = True
        try:
            self.acks.ack(force=True)
            self._count_page_records()
            self.settle_tails()
            if self.urls is not None:  # taken, not answered: ready again for the fleet
                self._inc(f"{PREFIX}/urls_given_back", self.urls.give_back())
            self._sitemaps_read()  # before leaving: a worker waiting for it sees it done, not gone
            self._taken = self.job.leave(self.worker)
            if self.frontier.run is not None:
                record_run_end(self.client, self.job.prefix, self.frontier.run, self.runtime.clock.stamp(), reason,
                               self.runtime.watch_deltas())
        except RedisError as exc:
            if not is_oom(exc):  # out of memory: the stop's line said so already
                logger.warning("idcrawl: could not leave the Redis job cleanly (%s): the other workers take back "
                               "this worker's ids after IDCRAWL_REDIS_LEASE_TIMEOUT", mask_secrets(str(exc)))
        if self._unrecorded and reason != "idcrawl_redis_oom":  # (the out-of-memory line said so)
            logger.error("idcrawl: %d outcomes could not be recorded in Redis; their ids are fetched again",
                         len(self._unrecorded))

    def close(self, reason: str) -> None:
        frontier = self.frontier
        self.stats.set_value(f"{PREFIX}/given_back", int(self._taken))
        self.stats.set_value(f"{PREFIX}/job_finished", frontier.status.finished)
        if frontier.held_cap_waits:
            self.stats.set_value(f"{PREFIX}/held_cap_waits", frontier.held_cap_waits)
        if self.job.unconfirmed:
            self.stats.set_value(f"{PREFIX}/wait_short", self.job.unconfirmed)
        self.gate.close()

    # -- the runtime's calls that Redis did not answer ---------------------------------

    def unavailable(self, exc: Exception) -> None:
        if not isinstance(exc, RedisError):
            raise exc  # only recording an outcome stores outputs (the other errors are theirs)
        self._outage(exc)

    def record_failed(
        self, exc: Exception, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None, attempt: int
    ) -> list[Any]:
        """Kept, and recorded by the poll once Redis answers again (the id stays this worker's)."""
        if not isinstance(exc, RedisError):
            # outputs that cannot travel through Redis (a callback that is not a spider method, an
            # unpicklable item): emitted now rather than lost, without waiting for the prefix
            logger.error("idcrawl: the outputs of %s id %s cannot be stored in Redis (%s): emitted at once",
                         lane_key, id_, exc)
            self._inc(f"{PREFIX}/unstorable")
            return [*(outputs or []), *self.runtime.record(lane_key, id_, outcome, None, attempt=attempt)]
        self.frontier.inflight.add((lane_key, id_))
        self._unrecorded.append((lane_key, id_, outcome, outputs, attempt))
        self._outage(exc)
        return []

    def decided(self, target: str, outcome: Outcome, id_: int) -> None:
        """Durable already: Redis recorded it (a visited page's record with it)."""
        self._idle_since = time.monotonic()

    def released(self, lane_key: str, id_: int, outputs: list[Any]) -> None:
        """Expect the items of released outputs; they are acknowledged once written."""
        lane_target = self.frontier.lane_target
        target = lane_target[lane_key].name if lane_key in lane_target else lane_key.rpartition(":")[0]
        if lane_key.rpartition(":")[2].rstrip("0123456789") == "late" and outputs:  # a late id found
            self._late_found += 1
            self.stats.set_value(f"{STATS_PREFIX}/late/found", self._late_found)
        self.acks.expect(target, id_, outputs, f"{lane_key}|{self.frontier.redis_id(lane_key, id_)}")

    def describe_state(self) -> str:
        return f"state in Redis job {self.job.prefix!r} (worker {self.worker})"

    def lock_lost(self) -> None:
        """Never called: a fleet's job has no owner key (a single process's state does)."""

    def wave_ended(self) -> None:
        """Nothing to let go of: the wave's close left the job."""

    def retire(self) -> None:
        """Nothing to hand over: the next wave's worker builds a queue of its own (a run of the fleet's)."""

    def _take(self, released: list[Payload]) -> list[Any]:
        """Outputs released to this worker outside an outcome of its own (adopted, recovered)."""
        return self.runtime.emit_released(released)

    def hold_page(self, owner: str, url: str, outputs: list[Any], harvest: Callable[[], None]) -> bool:
        """A found page of the crawl scope: harvested in the fleet's queue (``harvest()``) once the items
        that stand for it are written and acknowledged, as released ids are; False: none, harvest now."""
        return self.acks.hold_page(owner, url, outputs, harvest)

    # -- the poll ------------------------------------------------------------------------

    def poll(self) -> None:
        """Heartbeat and news from the job (see the module docstring); Redis outages are retried here."""
        if self._closed:
            return
        now = time.monotonic()
        if self._last_poll is not None and now - self._last_poll > self.lease / 2:
            # a stalled process (or reactor): past the lease, the other workers take this worker's ids
            logger.warning("idcrawl: %.1f s since this worker's last heartbeat (IDCRAWL_REDIS_LEASE_TIMEOUT %.0f s): "
                           "the process was stalled", now - self._last_poll, self.lease)
            self._inc(f"{PREFIX}/late_heartbeats")
        self._last_poll = now
        try:
            self._poll()
        except RedisError as exc:
            self._outage(exc)
            return
        moved = self._address != (address := primary_address(self.client))  # a failover, no call failing
        self._address = address
        if self._down_since is not None or moved:
            if self._down_since is not None:
                logger.warning("idcrawl: Redis answers again after %.1f s", time.monotonic() - self._down_since)
            self._down_since = None
            try:
                reopened = self._after_failover()
                self._recover_emits()
                given = self.frontier.give_back_unknown()
            except RedisError as exc:
                self._outage(exc)
                return
            if given:
                logger.warning("idcrawl: %d ids claimed in a reply the outage cut went back to the job", given)
                self._inc(f"{PREFIX}/given_back_after_outage", given)
            if given or reopened:
                self.runtime.wake_engine()

    def _after_failover(self) -> int:
        """After an outage: if another server answers now (a replica promoted by a failover, Redis restarted
        from its AOF), writes the old one acknowledged may be lost. The lanes this worker saw settled are
        read again (walked again if the job lost their last outcomes), its last acknowledgement is sent
        again; the ids it holds there but does not know go back (give_back_unknown) and the items released
        to it that it does not know are emitted (_recover_emits). Outcomes lost: their ids are fetched again."""
        primary = primary_id(self.client, self.job.keys.workers)
        if primary == self._primary:
            return 0
        self._primary = primary
        reopened = self.frontier.reopen_settled()
        self.acks.ack_again()
        self._inc(f"{PREFIX}/failovers")
        logger.warning("idcrawl: another Redis server answers now (a failover or a restart): writes of the old one "
                       "may be lost; %d lanes this worker saw settled are walked again, ids whose outcomes were "
                       "lost are fetched again", reopened)
        if reopened:
            self._inc(f"{PREFIX}/failover_reopened", reopened)
        return reopened

    def _recover_emits(self) -> None:
        """Outputs Redis released to this worker in a reply that never arrived (a call cut by the outage)."""
        known = self.acks.known()
        spider = self.crawler.spider
        released: list[Payload] = [
            (item.lane, self.frontier.id_of(item.lane, item.id), decode_outputs(item.blob, spider))
            for item in self.job.emitted(self.worker) if item.field not in known]
        if released:
            logger.warning("idcrawl: %d items released during the Redis outage are emitted now", len(released))
            self._inc(f"{PREFIX}/recovered", len(released))
            self._emit(self._take(released))

    def _outage(self, exc: Exception) -> None:
        """Redis did not answer: carry on polling, and stop cleanly after the lease timeout. Redis out of
        memory: stop now (``idcrawl_redis_oom``), one line."""
        now = time.monotonic()
        self._inc(f"{PREFIX}/errors")
        if is_oom(exc):
            if not self._closed:
                logger.error("idcrawl: %s: stopping this worker (its ids not recorded go back to the job after "
                             "IDCRAWL_REDIS_LEASE_TIMEOUT and are fetched again)",
                             self._redis_failed(exc, "mid-crawl"))
                self._inc(f"{PREFIX}/oom")
                self._stop("idcrawl_redis_oom")
            return
        if self._down_since is None:
            self._down_since = now
            logger.warning("idcrawl: Redis at %s does not answer (%s); retrying every %.1f s for up to %.0f s",
                           describe(self.crawler.settings), exc, self.poll_interval, self.lease)
            return
        if now - self._down_since > self.lease and not self._closed:
            checked = "" if self._checked_at is None else (
                f"; the job's keys were all there at its last poll, {now - self._checked_at:.0f} s ago")
            logger.error("idcrawl: Redis at %s has not answered for %.0f s: stopping this worker (start it again "
                         "when Redis is back%s)", mask_secrets(describe(self.crawler.settings)),
                         now - self._down_since, checked)
            self._stop("idcrawl_redis_unavailable")

    def _redis_down(self) -> bool:
        return self._down_since is not None

    def _active(self) -> None:
        self._idle_since = time.monotonic()

    def _stop(self, reason: str) -> None:
        engine = self.crawler.engine
        if engine is not None and not self._closed:
            self._closed = True
            close_spider(self.crawler, reason)

    def _poll(self) -> None:
        frontier = self.frontier
        if self._unrecorded:
            self._replay()
        woken = frontier.poll(busy=self._busy())
        urls_ready = False
        if self.urls is not None:  # the crawl scope's queue: stopped workers' URLs ready again
            urls = self.urls.poll()
            if self.urls.taken_over:  # this poll's and the queue's start's (before the stats could count)
                self.stats.set_value(f"{PREFIX}/urls_taken_over", self.urls.taken_over)
            urls_ready = urls.ready > 0  # the engine asks for them
            if urls.ready or urls.taken_by_others or urls.taken_here:
                self._idle_since = time.monotonic()
        status = frontier.status
        lost = [self.job.keys.lane(key) for key in sorted(frontier.vanished)[:5]] or (
            [status.lost] if status.lost else [])
        if lost:
            logger.error("idcrawl: the job's keys %s are gone from Redis (evicted, deleted, or Redis restarted "
                         "without persistence): stopping this worker rather than finish a job it did not crawl",
                         ", ".join(safe(key) for key in lost))
            self._inc(f"{PREFIX}/state_lost")
            self._stop("idcrawl_redis_state_lost")
            return
        self._checked_at = time.monotonic()
        if self._no_progress():
            return
        if status.next_due >= 0:
            self.retries.due_in(status.next_due)
            self.runtime.wake_in(status.next_due)
        if status.tver != self._tver:
            self._tver = status.tver
            self._load_targets()
            self._open_tails()
            self._load_page_records()
        if status.feed:
            self._pop_feed()
            self._open_tails()
        self.settle_tails()
        self._count_page_records()
        if status.orphans:
            self._adopt()
        self.acks.ack()
        self._check_lost()
        if woken or urls_ready or frontier.can_dispense() or frontier.finished:
            # finished: the engine checks at once whether it is idle and closes (the fleet's finish,
            # as this poll read it from Redis), instead of at Scrapy's next 5 s idle check
            self.runtime.wake_engine()
        if not frontier.finished or self.feeder:
            self._check_idle()

    def _busy(self) -> bool:
        """Has this worker work in flight (ids, requests, retries, outcomes to record)? A busy worker keeps the
        job active for the no-progress rule, however long a download or a politeness gap takes."""
        return bool(self.frontier.inflight or self.retries.waiting() or self._unrecorded
                    or engine_busy(self.crawler))

    def _no_progress(self) -> bool:
        """The job has work outstanding, yet no worker recorded an outcome, was busy or waited for a retry
        for ``IDCRAWL_REDIS_NO_PROGRESS_LEASES`` leases (and this worker has been in the job as long): the
        fleet is stalled (keys of the job lost, a worker that holds ids and never answers), stop."""
        status, frontier = self.frontier.status, self.frontier
        limit = self.no_progress_leases * self.lease
        if limit <= 0 or frontier.finished or not status.unsettled or self._closed:
            return False
        if status.quiet < limit or time.monotonic() - self._joined_at < limit:
            return False
        stuck = frontier.unsettled()
        logger.error("idcrawl: no progress in Redis job %r for %.0f s (IDCRAWL_REDIS_NO_PROGRESS_LEASES=%s x "
                     "IDCRAWL_REDIS_LEASE_TIMEOUT=%s s) with %d lanes unsettled (%s), no worker busy: stopping this "
                     "worker; `scrapy idjob status` shows where its lanes wait",
                     safe(self.job.prefix), status.quiet, self.no_progress_leases, self.lease, status.unsettled,
                     ", ".join(safe(key) for key in stuck[:5]) or "of other workers")
        self._stop("idcrawl_no_progress")
        return True

    def _replay(self) -> None:
        """Record the outcomes that arrived while Redis did not answer; emit what they release."""
        pending, self._unrecorded = self._unrecorded, []
        outputs: list[Any] = []
        for lane_key, id_, outcome, lane_outputs, attempt in pending:
            outputs.extend(self.runtime.record(lane_key, id_, outcome, lane_outputs, attempt=attempt))
        self._emit(outputs)

    def _emit(self, outputs: list[Any]) -> None:
        """Outputs no callback is carrying: a data: request does (as the spider's idle handler)."""
        engine = self.crawler.engine
        emit = getattr(self.crawler.spider, "_emit", None)
        if outputs and engine is not None and emit is not None:
            engine.crawl(Request("data:,", callback=emit, cb_kwargs={"outputs": outputs}, dont_filter=True,
                                 meta={"dont_obey_robotstxt": True}))

    def _load_targets(self) -> None:
        """Targets other workers added (or pushed): join their lanes; and lanes a resume added or reopened."""
        self.frontier.join_list_lanes()
        for name, spec in self.frontier.known_specs().items():
            if name in self.frontier.targets:
                continue
            try:
                target = parse_target(spec, self._defaults)
            except TargetError as exc:
                logger.error("idcrawl: job target %r cannot be used here: %s", name, exc)
                continue
            self.frontier.join(target)
            self.runtime.targets.append(target)
            self.stats.set_value(f"{STATS_PREFIX}/targets", len(self.runtime.targets))
            self.stats.set_value(f"{STATS_PREFIX}/lanes", len(self.frontier.lanes))
            logger.info("idcrawl: joined target %r of the job", name)
            self._idle_since = time.monotonic()

    def _open_tails(self) -> None:
        """Ascending lanes walking now (joined, pushed, or reopened by a resume): their walk's end is to be
        settled. Once per poll that changed the job's targets (one pass over the lanes)."""
        self._tails_open.update(key for key, direction in self.frontier.lane_direction.items()
                                if direction == "asc" and not self.frontier.lanes[key].settled)

    def _pop_feed(self) -> None:
        """Take pushed targets (``LPOP`` of the feed key): register them for the whole job."""
        while True:
            raw = self.client.lpop(self.job.keys.feed)
            if raw is None:
                return
            try:
                targets = parse_pushed(raw, self._defaults)
            except (TargetError, ValueError) as exc:
                logger.error("idcrawl: pushed target refused: %s: %s", safe(raw)[:200], exc)  # masked, then cut
                self._inc(f"{PREFIX}/feed_refused")
                continue
            for target in targets:
                if target.name in self.frontier.targets:
                    logger.error("idcrawl: pushed target %r refused: the job already has it", target.name)
                    continue
                try:
                    self.frontier.add_target(target)
                except TargetConflict as exc:
                    logger.error("idcrawl: pushed target refused: %s", exc)
                    self._inc(f"{PREFIX}/feed_refused")
                    continue
                self.runtime.targets.append(target)
                self._inc(f"{PREFIX}/feed_taken")
                logger.info("idcrawl: took pushed target %r", target.name)
            self._idle_since = time.monotonic()

    def _adopt(self) -> None:
        """Emit the outputs a stopped worker had received but not acknowledged."""
        spider = self.crawler.spider
        released: list[Payload] = [
            (item.lane, self.frontier.id_of(item.lane, item.id), decode_outputs(item.blob, spider))
            for item in self.job.adopt(self.worker, 64)]
        if not released:
            return
        self._inc(f"{PREFIX}/adopted", len(released))
        self._emit(self._take(released))
        self._idle_since = time.monotonic()

    def _check_lost(self) -> None:
        """Ids handed out that vanished without a response (the engine holds nothing): failed."""
        frontier = self.frontier
        engine = self.crawler.engine
        if not frontier.inflight or engine is None:
            return
        if engine_busy(self.crawler):
            self._quiet_polls = 0
            return
        self._quiet_polls += 1
        if self._quiet_polls < 2:
            return
        lost = sorted(frontier.inflight - {(lane, id_) for lane, id_, *_ in self._unrecorded})
        if not lost:
            return
        logger.warning("idcrawl: ids %s never got an outcome; counted as failed", lost[:10])
        self._inc(f"{STATS_PREFIX}/lost", len(lost))
        outputs: list[Any] = []
        for lane_key, id_ in lost:
            outputs.extend(self.runtime.record(lane_key, id_, Outcome.FAILED))
        self._emit(outputs)

    def _check_idle(self) -> None:
        # the frontier's last dispensed or decided id counts as activity too
        idle_since = max(self._idle_since, self.frontier.last_activity)
        if self.idle_timeout <= 0 or time.monotonic() - idle_since < self.idle_timeout:
            return
        if self.frontier.inflight or self.frontier.buffered():
            return
        engine = self.crawler.engine
        if engine is not None and not self._closed:
            logger.info("idcrawl: no work for %.1f s (IDCRAWL_REDIS_IDLE_TIMEOUT): closing", self.idle_timeout)
            self._stop("idcrawl_idle_timeout")

    def limit_parts(self) -> FleetLimitParts:
        """The job limits' parts: the fleet's counters and stops in Redis, every worker's incidents in one list."""
        from idcrawl.distributed.limits import FleetLimitParts

        name = self.crawler.spidercls.name
        try:
            return FleetLimitParts(self.crawler.settings, name, self.crawler.stats)
        except RedisUnavailable as exc:
            raise BadInputError(f"{name}: {exc}") from None

    def shared_retries(self) -> FleetRetries:
        """Retries parked in the job's delayed set (:mod:`idcrawl.distributed.gate`)."""
        return self.retries

    def politeness_gate(self) -> FleetGate:
        """The fleet's reservations of each slot's next start (:mod:`idcrawl.distributed.gate`)."""
        return self.gate


if TYPE_CHECKING:  # mypy checks that the Redis worker is a Worker and its frontier an IdFrontier

    def _is_a_worker(worker: RedisWorker) -> Worker:
        return worker

