"""``JobKeys``: the names of a job's Redis keys, the one place in Python that spells them.

Every key of a job starts with its prefix ``P`` = ``<IDCRAWL_REDIS_PREFIX>:{<job>}:`` (the braces are a
Redis Cluster hash tag). The Lua scripts derive the keys they find while running from that prefix too;
docs/architecture.md, "The fleet's protocol", lists every key with its type and content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["JobKeys", "glob"]


class _Key:
    """A job-wide key: ``P <name>``, read as an attribute of :class:`JobKeys`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, keys: JobKeys, owner: Any = None) -> str:
        return keys.prefix + self.name


def glob(text: str) -> str:
    """``text`` as a literal in a Redis ``MATCH`` pattern (the prefix's braces and any ``*?[]\\``)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


@dataclass(frozen=True, slots=True)
class JobKeys:
    """The keys of the job whose prefix is ``prefix`` (``idcrawl:{idseq}:``)."""

    prefix: str

    # -- the fleet's job: targets, lanes, workers (the Lua scripts of idcrawl.distributed) ------------
    specs = _Key("specs")  # hash: target name -> its spec (JSON)
    tver = _Key("tver")  # int: bumped when a target is added
    tset = _Key("tset")  # set: the targets of the job's first worker
    progress = _Key("progress")  # hash: outcomes recorded, the job's last activity, the lane change serial (chg)
    lchg = _Key("lchg")  # zset: lane -> the serial of its last change (STATUS reads the changes, not every lane)
    unsettled = _Key("unsettled")  # set: lanes not settled yet
    workers = _Key("workers")  # zset: worker -> last heartbeat (ms)
    orphans = _Key("orphans")  # hash: released outputs taken from workers that stopped
    job = _Key("job")  # hash: job totals (reclaimed workers and ids, held-cap waits)
    delayed = _Key("delayed")  # zset: shared retries by due time (ms)
    feed = _Key("feed")  # list: targets pushed to the fleet (JSON)
    run = _Key("run")  # hash: the fleet's run (idcrawl.distributed.runs)
    watch = _Key("watch")  # hash: a watching fleet's session: its run row and counters (idcrawl.distributed.runs)
    resumed = _Key("resumed")  # set: targets with a resume
    tails = _Key("tails")  # hash: target -> its tail's recrawl schedule (JSON)
    tailwalk = _Key("tailwalk")  # hash: target -> the walk its tail's schedule was last moved for
    incidents = _Key("incidents")  # list: incident log entries of every worker
    dupefilter = _Key("dupefilter")  # set: the exact dupefilter's fingerprints
    bloom_count = _Key("bloom:count")  # int: the Bloom dupefilter's size
    job_limits = _Key("limits:job")  # hash: the fleet's job limit counts (LIMITS)
    owner = _Key("owner")  # string: the single-process crawl holding the job (idcrawl.state.lock)

    @property
    def job_name(self) -> str:
        """The job's name: ``myjob`` of ``idcrawl:{myjob}:`` (the prefix itself if it has no hash tag)."""
        _, brace, rest = self.prefix.partition("{")
        name, closed, _ = rest.partition("}")
        return name if brace and closed else self.prefix

    def lane(self, lane: str, sub: str = "") -> str:
        """``P L:<lane>`` (hash: cursor, margin, cut, totals), or its ``P L:<lane>:<sub>`` (``bits``,
        ``dec``, ``pay``, ``own``, ``free``, ``ids``, ``back``)."""
        return f"{self.prefix}L:{lane}:{sub}" if sub else f"{self.prefix}L:{lane}"

    def target_lanes(self, target: str) -> str:
        """``P tl:<target>`` (list): the target's lane keys, in order."""
        return f"{self.prefix}tl:{target}"

    def resume(self, target: str) -> str:
        """``P R:<target>`` (hash): the target's last resume."""
        return f"{self.prefix}R:{target}"

    def emit(self, worker: str) -> str:
        """``P W:<worker>:emit`` (hash): outputs released to ``worker``, not yet acknowledged."""
        return f"{self.prefix}W:{worker}:emit"

    def polite(self, slot: str) -> str:
        """``P polite:<slot>`` (string): the slot's next start for the fleet (POLITE)."""
        return f"{self.prefix}polite:{slot}"

    def busy(self, slot: str) -> str:
        """``P busy:<slot>`` (hash): token -> start and end of life (ms) of each of the slot's requests in
        flight fleet-wide, and ``lat`` -> how long they last (ms) (POLITE)."""
        return f"{self.prefix}busy:{slot}"

    def domain_limits(self, domain: str) -> str:
        """``P limits:domain:<domain>`` (hash): the fleet's limit counts of a domain (LIMITS)."""
        return f"{self.prefix}limits:domain:{domain}"

    def bloom(self, shard: int) -> str:
        """``P bloom:<shard>`` (string): a shard of the Bloom dupefilter's bits."""
        return f"{self.prefix}bloom:{shard}"

    # -- page records (a fleet's and a single-process Redis state's) -----------------------------------
    pageidx = _Key("pageidx")  # set: targets whose pagedue index holds every record

    def pages(self, target: str) -> str:
        """``P pages:<target>`` (hash): id -> a found page's recrawl record (JSON)."""
        return f"{self.prefix}pages:{target}"

    def page_due(self, target: str) -> str:
        """``P pagedue:<target>`` (zset): ids by their record's due time (s)."""
        return f"{self.prefix}pagedue:{target}"

    # -- the crawl scope's shared URL queue (urls_common.lua) ------------------------------------------
    uhosts = _Key("uhosts")  # hash: host -> ready URLs
    uwait = _Key("uwait")  # zset: harvested URLs waiting for their revisit, by next harvest time
    umarks = _Key("umarks")  # hash: target -> its scope mark at the last run's start (core.scope.scope_marks)

    def url(self, url: str) -> str:
        """``P U:<url>`` (hash): a URL's entry."""
        return f"{self.prefix}U:{url}"

    def url_of(self, key: str) -> str:
        """The URL of a ``P U:<url>`` key (:meth:`url` reversed)."""
        return key[len(self.url("")):]

    def url_pattern(self) -> str:
        """A ``SCAN`` pattern matching every ``P U:<url>`` key."""
        return glob(self.url("")) + "*"

    def sitemap_claim(self, run: int) -> str:
        """``P sitemaps:<run>`` (hash, expires): the worker that reads the sitemaps for the fleet's run, for
        every component that reads them (crawl scope's seeds, id targets' evidence: ``idcrawl.sitemaps``):
        ``by``, then ``read`` (ms: it is done) and ``due`` (ms: what they made due wakes a watch's wave)."""
        return f"{self.prefix}sitemaps:{run}"

    def url_counts(self, host: str) -> str:
        """``P uqc:<host>`` (hash): yield group -> ready URLs of the host."""
        return f"{self.prefix}uqc:{host}"

    # -- a single-process crawl's Redis state (idcrawl.state.redis) ------------------------------------
    targets = _Key("targets")  # hash: target name -> params (JSON)
    runs = _Key("runs")  # list: run rows (JSON)
    runseq = _Key("runseq")  # int: the last run id
    feedrun = _Key("feedrun")  # string: the latest run that wrote feed marks

    def outcomes(self, target: str) -> str:
        """``P o:<target>`` (hash): outcome -> roaring bitmap of ids."""
        return f"{self.prefix}o:{target}"

    def lane_records(self, target: str) -> str:
        """``P lanes:<target>`` (hash): lane -> its record (JSON)."""
        return f"{self.prefix}lanes:{target}"

    def feed_marks(self, run: str) -> str:
        """``P feeds:<run>`` (hash): feed file path -> offset, the run's feed marks."""
        return f"{self.prefix}feeds:{run}"

    def all_pattern(self) -> str:
        """A ``SCAN`` pattern matching every key of the job."""
        return glob(self.prefix) + "*"
