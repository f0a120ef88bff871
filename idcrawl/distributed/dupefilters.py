"""Request fingerprints shared by all workers of a distributed job: follow-up pages fetched once by the fleet.

``RedisSeen`` (the fleet's part of :class:`idcrawl.dupefilters.IdDupeFilter`: a sharded Bloom filter in
Redis) and ``RedisRFPDupeFilter`` (scrapy-redis's exact set, the crawler's fingerprinter), their keys under
the job's prefix. Lane requests never cost a call. docs/distributed.md ("Follow-up pages"); the shards and
the batching: docs/architecture.md ("Module notes").
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import TYPE_CHECKING, Any, ClassVar

from redis.exceptions import RedisError
from scrapy_redis.dupefilter import RFPDupeFilter as ScrapyRedisRFPDupeFilter

from idcrawl.core.seen import Seen
from idcrawl.core.templates import id_in_template
from idcrawl.distributed import scripts
from idcrawl.dupefilters import IdDupeFilter
from idcrawl.errors import BadInputError
from idcrawl.runtime import META_KEY
from idcrawl.state.keys import JobKeys

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from idcrawl.config import IdConfig
    from idcrawl.core.targets import Target

__all__ = [
    "ADD_BATCH", "ADD_DELAY", "DEFAULT_CAPACITY", "LanePages", "RedisBloomDupeFilter", "RedisBloomSeen",
    "RedisRFPDupeFilter", "RedisSeen", "lane_request",
]

logger = logging.getLogger(__name__)

#: Capacity of a Redis Bloom filter whose capacity is not set (it does not grow).
DEFAULT_CAPACITY = 10_000_000
#: Bits of one shard: a Redis string's limit (512 MB).
MAX_SHARD_BITS = 2**32
#: Fingerprints whose responses arrived are added to the Bloom filter with the worker's next test, or
#: in one call once this many wait ...
ADD_BATCH = 64
#: ... or when one more arrives after the oldest waited this long (s). Until a fingerprint reaches
#: Redis other workers may fetch its page too (a duplicate, never a loss).
ADD_DELAY = 1.0


def _outage_once(owner: Any, exc: Exception) -> None:
    """One warning per outage (the worker's poll reports the outage and its end)."""
    if not owner._warned:
        owner._warned = True
        logger.warning("idcrawl: the Redis dupefilter lets requests through while Redis does not answer (%s); "
                       "their fingerprints are added once it does", exc)


class RedisBloomSeen:
    """A fixed-size Bloom filter in Redis (the :class:`idcrawl.core.seen.FingerprintSet` protocol).

    :meth:`add` and ``in`` are one ``BLOOM`` call each, which also carries every add waiting in
    ``_unsent``: the adds :meth:`defer` put off (a response arrived; sent with the next test, or by
    :meth:`defer` itself once :data:`ADD_BATCH` wait or the oldest waited :data:`ADD_DELAY` seconds,
    or at :meth:`flush`) and those an outage kept from Redis.
    """

    name: ClassVar[str] = "redis-bloom"
    library: ClassVar[str | None] = None

    def __init__(self, client: Any, prefix: str, error_rate: float, capacity: int,
                 *, shard_bits: int = MAX_SHARD_BITS) -> None:
        if not 0 < error_rate < 1:
            raise ValueError(f"error rate must be between 0 and 1, not {error_rate!r}")
        self.client = client
        self.keys = JobKeys(prefix)
        self.error_rate = error_rate
        self.configured_capacity = capacity
        self.size = capacity or DEFAULT_CAPACITY
        bits = math.ceil(-self.size * math.log(error_rate) / math.log(2) ** 2)
        self.hashes = max(1, round(bits / self.size * math.log(2)))
        self.shards = max(1, math.ceil(bits / shard_bits))
        self.shard_bits = math.ceil(bits / self.shards)
        self.bits = self.shard_bits * self.shards
        self._script = client.register_script(scripts.BLOOM)
        self._unsent: list[bytes] = []  # fingerprints to add, sent with the next call
        self._unsent_since = 0.0  # monotonic time the oldest of them waits since
        self._warned = False

    def _positions(self, fp: bytes) -> tuple[str, list[int]]:
        """The fingerprint's shard and its k bit positions (double hashing of a SHA-256 of it)."""
        digest = hashlib.sha256(fp).digest()
        h1, h2, h3 = (int.from_bytes(digest[i:i + 8], "big") for i in (0, 8, 16))
        shard = h3 % self.shards
        return self.keys.bloom(shard), [(h1 + i * h2) % self.shard_bits for i in range(self.hashes)]

    def add(self, fp: bytes) -> bool:
        """During an outage: not seen (the page is fetched; a duplicate is cheap, a skipped page is not),
        and the fingerprint is added with the next call that reaches Redis."""
        try:
            return self._call(fp, 1)
        except RedisError as exc:
            self._wait(fp)
            _outage_once(self, exc)
            return False

    def defer(self, fp: bytes) -> None:
        """Add ``fp`` with the next call (see the class docstring); never raises for an outage."""
        self._wait(fp)
        if len(self._unsent) >= ADD_BATCH or time.monotonic() - self._unsent_since >= ADD_DELAY:
            self.flush()

    def flush(self) -> None:
        """Send the adds that wait (kept for the next call if Redis does not answer)."""
        if not self._unsent:
            return
        try:
            self._send([])
        except RedisError as exc:
            _outage_once(self, exc)

    def __contains__(self, fp: bytes) -> bool:
        try:
            return self._call(fp, 0)
        except RedisError as exc:
            _outage_once(self, exc)
            return fp in self._unsent

    def _wait(self, fp: bytes) -> None:
        if not self._unsent:
            self._unsent_since = time.monotonic()
        self._unsent.append(fp)

    def _call(self, fp: bytes, add: int) -> bool:
        return self._send([(fp, add)])[-1]

    def _send(self, asks: list[tuple[bytes, int]]) -> list[bool]:
        """One ``BLOOM`` call: the waiting adds, then ``asks``; the answers to ``asks`` (was it there)."""
        batch = [(fp, 1) for fp in self._unsent] + asks
        keys = [self.keys.bloom_count]
        index: dict[str, int] = {}
        args: list[Any] = [self.hashes]
        for fp, add in batch:
            key, positions = self._positions(fp)
            if key not in index:
                keys.append(key)
                index[key] = len(keys)
            args += [add, index[key], *positions]
        replies = self._script(keys=keys, args=args)
        self._unsent = []
        self._warned = False
        return [bool(reply) for reply in replies[len(batch) - len(asks):]]

    def __len__(self) -> int:
        try:
            return int(self.client.get(self.keys.bloom_count) or 0) + len(self._unsent)
        except RedisError:
            return len(self._unsent)

    @property
    def capacity(self) -> int:
        return self.size

    def estimated_error_rate(self) -> float:
        n = len(self)
        return (1 - math.exp(-self.hashes * n / self.bits)) ** self.hashes if n else 0.0

    def dumps(self) -> bytes:
        """Nothing: the filter lives in Redis."""
        return b""


def lane_request(request: Request) -> bool:
    """A lane's request (or its retry): never filtered, and never asked about in Redis: the job's
    frontier knows every lane id exactly."""
    return bool(request.dont_filter) and META_KEY in request.meta


class LanePages:
    """Which follow-up URLs are pages of lanes the job already handed out.

    A single process's dupefilter learns every lane request, so that a link to a lane's page is
    not fetched again; the shared dupefilters never see lane requests (no call), so they ask the
    job's frontier instead, whose lane cursors are the job's as this worker last saw them.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._known = -1  # targets the groups were made of
        self._groups: dict[str, list[Target]] = {}

    def dispensed(self, request: Request) -> bool:
        from idcrawl.runtime import runtime_of

        runtime = runtime_of(self.crawler)
        if runtime is None:
            return False
        frontier = runtime.frontier
        if len(frontier.targets) != self._known:  # targets of one template share the URL parsing
            self._groups = {}
            for target in list(frontier.targets.values()):
                self._groups.setdefault(target.url, []).append(target)
            self._known = len(frontier.targets)
        for template, targets in self._groups.items():
            id_ = id_in_template(template, request.url)  # the targets' bounds differ: the lanes say
            if id_ is None:
                continue
            for target in targets:
                for lane in frontier.lanes_of(target.name):
                    if (id_ - lane.start) * lane.step >= 0 and (lane.next_id - id_) * lane.step > 0:
                        return True
        return False


class RedisSeen:
    """The fleet's fingerprints (an :class:`idcrawl.dupefilters.SeenStore`): a Bloom filter in the job's
    Redis keys (no file), shared by its workers. A follow-up costs one ``BLOOM`` call (carrying the adds
    that wait); a lane request none."""

    name = RedisBloomSeen.name

    def __init__(self, crawler: Crawler, error_rate: float, capacity: int) -> None:
        """:class:`~idcrawl.errors.BadInputError` if Redis cannot be reached or the error rate is bad."""
        from idcrawl.distributed.connection import RedisUnavailable, connect, job_prefix

        settings = crawler.settings
        spider = crawler.spider
        try:
            client = connect(settings, stats=crawler.stats)
            self.backend = RedisBloomSeen(client, job_prefix(settings, getattr(spider, "name", "crawl")), error_rate,
                                          capacity)
        except RedisUnavailable as exc:
            raise BadInputError(f"dupefilter: {exc}") from None
        except ValueError as exc:
            raise BadInputError(f"IDCRAWL_DUPEFILTER_ERROR_RATE={error_rate!r}: {exc}") from None
        self.lane_pages = LanePages(crawler)

    @classmethod
    def of(cls, crawler: Crawler, config: IdConfig) -> RedisSeen:
        return cls(crawler, config.dupefilter_error_rate, config.dupefilter_capacity)

    def start(self) -> Seen:
        return Seen(self.backend, loaded=len(self.backend))

    def prepare(self, seen: Seen) -> Seen:
        return seen  # the job's keys: nothing to read

    def answers(self, request: Request) -> bool | None:
        """A lane request: not seen, no call; a link to a lane page the job handed out: seen."""
        if lane_request(request):
            return False
        if self.lane_pages.dispensed(request):
            return True
        return None

    def fetched(self, seen: Seen, fp: bytes) -> bool:
        """The response arrived: the fingerprint is added with the next call (batched)."""
        seen.pending.discard(fp)
        self.backend.defer(fp)
        return False

    def close(self, seen: Seen) -> None:
        self.backend.flush()


#: The name the ``distributed`` profile once set as ``DUPEFILTER_CLASS``, kept for settings that name it:
#: :class:`IdDupeFilter`, whose fingerprints a fleet (``IDCRAWL_DISTRIBUTED``) keeps in Redis.
RedisBloomDupeFilter = IdDupeFilter


class RedisRFPDupeFilter(ScrapyRedisRFPDupeFilter):  # type: ignore[misc]
    """scrapy-redis's exact dupefilter on the job's key, with the crawler's fingerprinter."""

    fingerprinter: Any = None
    lane_pages: LanePages | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisRFPDupeFilter:
        from idcrawl.distributed.connection import RedisUnavailable, connect, job_prefix

        try:
            client = connect(crawler.settings, stats=crawler.stats)
        except RedisUnavailable as exc:
            raise BadInputError(f"dupefilter: {exc}") from None
        spider = crawler.spider
        key = JobKeys(job_prefix(crawler.settings, getattr(spider, "name", "crawl"))).dupefilter
        dupefilter = cls(client, key=key, debug=crawler.settings.getbool("DUPEFILTER_DEBUG"))
        dupefilter.fingerprinter = crawler.request_fingerprinter
        dupefilter.lane_pages = LanePages(crawler)
        return dupefilter

    _unsent: tuple[str, ...] = ()  # fingerprints seen during an outage, sent with the next call
    _warned = False

    def request_seen(self, request: Request) -> bool:
        """scrapy-redis's SADD; during an outage the request goes through (a duplicate is cheap, a skipped
        page is not) and its fingerprint is added with the next call that reaches Redis."""
        if lane_request(request):
            return False  # no call: the job's frontier knows every lane id
        if self.lane_pages is not None and self.lane_pages.dispensed(request):
            return True
        fp = self.request_fingerprint(request)
        try:
            if self._unsent:
                self.server.sadd(self.key, *self._unsent)
                self._unsent = ()
            added = self.server.sadd(self.key, fp)
        except RedisError as exc:
            self._unsent = (*self._unsent, fp)
            _outage_once(self, exc)
            return False
        self._warned = False
        return bool(added == 0)

    def request_fingerprint(self, request: Request) -> str:
        if self.fingerprinter is not None:
            return str(self.fingerprinter.fingerprint(request).hex())
        return str(super().request_fingerprint(request))

    def close(self, reason: str = "") -> None:
        """Keep the job's fingerprints (scrapy-redis deletes them when its scheduler closes)."""
