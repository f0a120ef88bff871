"""``IdDupeFilter``: Scrapy's request dupefilter on a Bloom filter that outlives the run.

Scrapy's ``RFPDupeFilter`` interface and stat, the crawler's request fingerprinter; where the fingerprints
live is the backend's part (:class:`SeenStore`): one process's in a file kept between runs (:class:`FileSeen`),
a fleet's in Redis. docs/dedup.md (backends, size, the file, the trade-off); when a fingerprint counts as
seen: docs/architecture.md ("Module notes").
"""

from __future__ import annotations

import logging
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import Request, signals
from scrapy.dupefilters import RFPDupeFilter
from scrapy.utils.request import RequestFingerprinter

from idcrawl import default_settings
from idcrawl.backends import backend_of, load
from idcrawl.config import IdConfig, config_of, given
from idcrawl.core.laneprint import TemplatePrint, template_print
from idcrawl.core.seen import (
    FingerprintSet,
    Seen,
    SeenConfigError,
    SeenFileError,
    is_seen_file,
    make_backend,
)
from idcrawl.core.seen import dump as dump_seen
from idcrawl.core.seen import load as load_seen
from idcrawl.core.targets import RESET_MODES
from idcrawl.errors import BadInputError
from idcrawl.runtime import META_KEY, runtime_of
from idcrawl.state.location import job_file
from idcrawl.storage import report_storage_error, storage_problem

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

__all__ = ["STATS_PREFIX", "FileSeen", "IdDupeFilter", "SeenStore", "seen_path"]

logger = logging.getLogger(__name__)

#: Prefix of this component's stats (``dupefilter/filtered`` stays Scrapy's).
STATS_PREFIX = "idcrawl/dupefilter"


def seen_path(settings: BaseSettings | Any, spider_name: str, backend: str) -> Path:
    """The filter file of a crawl of ``spider_name`` with these settings.

    1. ``IDCRAWL_DUPEFILTER_PATH`` if set;
    2. else ``<JOBDIR>/idcrawl-seen.<backend>`` if ``JOBDIR`` is set;
    3. else beside an explicit ``IDCRAWL_STATE_PATH``: ``<its stem>-seen.<backend>``;
    4. else ``.scrapy/idcrawl/<spider_name>-seen.<backend>`` (beside the default state file).
    """
    state = given(settings, "IDCRAWL_STATE_PATH")
    if not given(settings, "IDCRAWL_DUPEFILTER_PATH") and not settings.get("JOBDIR") and state:
        state = Path(state)
        return state.with_name(f"{state.stem}-seen.{backend}")
    return job_file(settings, "IDCRAWL_DUPEFILTER_PATH", f"idcrawl-seen.{backend}", f"{spider_name}-seen.{backend}")


def _resumes(crawler: Crawler) -> bool:
    """Does any target of an id crawl continue an earlier run (``resume`` other than reset: auto, the default, too)?"""
    runtime = runtime_of(crawler)
    return runtime is not None and any(target.resume not in RESET_MODES for target in runtime.targets)


def _full(message: str) -> None:
    logger.warning("dupefilter: %s (IDCRAWL_DUPEFILTER_CAPACITY)", message)


class SeenStore(Protocol):
    """Where a crawl's request fingerprints live: the part the backend gives :class:`IdDupeFilter`
    (``idcrawl.backends.Backend.seen``): a file kept between runs (:class:`FileSeen`), or the fleet's
    Bloom filter in Redis, shared by its workers (``idcrawl.distributed.dupefilters.RedisSeen``)."""

    #: the fingerprints' backend (stat ``idcrawl/dupefilter/backend``)
    name: str

    def start(self) -> Seen:
        """The fingerprints the filter starts with, before anything is read."""

    def prepare(self, seen: Seen) -> Seen:
        """Before the engine opens: the fingerprints a run continues (read from where they are kept), else
        ``seen``; :class:`~idcrawl.errors.BadInputError` if they cannot be used."""

    def answers(self, request: Request) -> bool | None:
        """Whether ``request`` counts as seen without its fingerprint (None: ask the fingerprints)."""

    def fetched(self, seen: Seen, fp: bytes) -> bool:
        """A pending fingerprint's response arrived (it is seen from now on); True: the fingerprints were
        saved (their stats change)."""

    def close(self, seen: Seen) -> None:
        """The crawl closes: what outlives it is kept."""


class FileSeen:
    """One process's fingerprints: a backend of :mod:`idcrawl.core.seen` in memory, kept in a file between
    runs (:func:`seen_path`) and read back by a run that continues the job."""

    def __init__(
        self, crawler: Crawler, backend: str, error_rate: float, capacity: int, *, persist: bool, save_interval: float,
    ) -> None:
        """:class:`~idcrawl.core.seen.SeenConfigError` for a bad backend, error rate or capacity."""
        self.crawler = crawler
        self.name, self.error_rate, self.capacity = backend, error_rate, capacity
        self.persist, self.save_interval = persist, save_interval
        self._empty = Seen(make_backend(backend, error_rate, capacity, _full))
        self.path: Path | None = None
        self._last_save = time.monotonic()

    @classmethod
    def of(cls, crawler: Crawler, config: IdConfig) -> FileSeen:
        return cls(crawler, config.dupefilter_backend, config.dupefilter_error_rate, config.dupefilter_capacity,
                   persist=config.dupefilter_persist, save_interval=config.dupefilter_save_interval)

    def start(self) -> Seen:
        return self._empty

    def answers(self, request: Request) -> bool | None:
        return None  # every request is asked about, lane requests too (a link to a lane's page is not fetched again)

    def prepare(self, seen: Seen) -> Seen:
        """Find the file and read it if this run continues the job.

        Called from :meth:`IdDupeFilter.from_crawler`, before the engine opens anything: a
        file that cannot be used then stops the crawl with one line (raised
        from :meth:`IdDupeFilter.open`, Scrapy would first half-open the spider and log the
        errors of closing it).
        """
        spider = self.crawler.spider
        name = spider.name if spider is not None else "crawl"
        self.path = seen_path(self.crawler.settings, name, self.name)
        if self.persist and self.path.exists():
            if self.crawler.settings.get("JOBDIR") or _resumes(self.crawler):
                return self._load(self.path)
            if not self._ours(self.path):
                raise BadInputError(
                    f"{self.path}: not an idcrawl dupefilter file; it is left as it is: "
                    f"set IDCRAWL_DUPEFILTER_PATH to another file"
                )
            logger.info("dupefilter: not resuming: %s is replaced at close", self.path)
        return seen

    def _ours(self, path: Path) -> bool:
        try:
            return is_seen_file(path)
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read the dupefilter file ({exc})") from None

    def _load(self, path: Path) -> Seen:
        try:
            backend = load_seen(path, self.name, _full)
        except SeenFileError as exc:
            raise BadInputError(
                f"{exc}; it is left as it is: remove it, or set IDCRAWL_DUPEFILTER_PATH to another file"
            ) from None
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read the dupefilter file ({exc})") from None
        if (backend.error_rate, backend.configured_capacity) != (self.error_rate, self.capacity):
            logger.warning(
                "dupefilter: %s was made with error rate %s and capacity %s; it keeps them "
                "(IDCRAWL_DUPEFILTER_ERROR_RATE=%s and IDCRAWL_DUPEFILTER_CAPACITY=%s apply to new files)",
                path, backend.error_rate, backend.configured_capacity, self.error_rate, self.capacity,
            )
        logger.info("dupefilter: loaded %d fingerprints (%s) from %s", len(backend), self.name, path)
        return Seen(backend, loaded=len(backend))

    def fetched(self, seen: Seen, fp: bytes) -> bool:
        seen.fetched(fp)
        if (
            self.persist and self.save_interval and seen.unsaved and self.path is not None
            and time.monotonic() - self._last_save >= self.save_interval
        ):
            self._save(seen)
            return True
        return False

    def close(self, seen: Seen) -> None:
        if self.persist and self.path is not None:
            self._save(seen)

    def _save(self, seen: Seen) -> None:
        assert self.path is not None
        try:
            size = dump_seen(seen.backend, self.path)
        except OSError as exc:  # the old file stays (written aside, then renamed)
            problem = storage_problem(exc)
            if problem is None:
                raise
            report_storage_error(self.crawler, self.path, problem)
            return
        seen.unsaved = 0
        self._last_save = time.monotonic()
        logger.info(
            "dupefilter: saved %d fingerprints (%s, %d bytes, estimated false-positive rate %.2g) to %s",
            len(seen.backend), self.name, size, seen.backend.estimated_error_rate(), self.path,
        )


class IdDupeFilter(RFPDupeFilter):
    """Request dupefilter backed by :mod:`idcrawl.core.seen`; see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        backend: str = default_settings.IDCRAWL_DUPEFILTER_BACKEND,
        error_rate: float = default_settings.IDCRAWL_DUPEFILTER_ERROR_RATE,
        capacity: int = default_settings.IDCRAWL_DUPEFILTER_CAPACITY,
        *,
        persist: bool = default_settings.IDCRAWL_DUPEFILTER_PERSIST,
        save_interval: float = default_settings.IDCRAWL_DUPEFILTER_SAVE_INTERVAL,
        debug: bool = False,
        store: SeenStore | None = None,
    ) -> None:
        """``store``: where the fingerprints live (:meth:`from_crawler`: the backend's); default: a
        :class:`FileSeen` of ``backend``, ``error_rate``, ``capacity``, ``persist`` and ``save_interval``."""
        # no path: RFPDupeFilter's own requests.seen file is not kept
        super().__init__(None, debug, fingerprinter=crawler.request_fingerprinter)
        self.crawler = crawler
        self.store: SeenStore = store if store is not None else FileSeen(
            crawler, backend, error_rate, capacity, persist=persist, save_interval=save_interval)
        self.backend_name = self.store.name
        self.seen = self.store.start()
        self._retry_codes = frozenset(int(code) for code in crawler.settings.getlist("RETRY_HTTP_CODES"))
        self._opened = False
        # requests asked about: their responses are matched to pending fingerprints without
        # fingerprinting every lane response (see response_received)
        self._asked: weakref.WeakKeyDictionary[Request, bytes] = weakref.WeakKeyDictionary()
        # lane fingerprints from their templates (idcrawl.core.laneprint), by target name; only
        # in front of Scrapy's own fingerprinter, whose bytes they are
        self._prints: dict[str, TemplatePrint | None] | None = (
            {} if type(self.fingerprinter) is RequestFingerprinter else None
        )
        # and by template: targets that split one template's ids share its print (28 probes each)
        self._template_prints: dict[str, TemplatePrint | None] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """The filter on the fingerprints' store of the crawl's backend (``idcrawl.backends.backend_of``)."""
        settings = crawler.settings
        config = config_of(crawler)  # bad values: one line naming the setting
        try:
            store = load(backend_of(settings).seen).of(crawler, config)
            dupefilter = cls(crawler, store=store, debug=settings.getbool("DUPEFILTER_DEBUG"))
        except SeenConfigError as exc:
            key = {"error_rate": "IDCRAWL_DUPEFILTER_ERROR_RATE", "capacity": "IDCRAWL_DUPEFILTER_CAPACITY"}.get(
                exc.field, "IDCRAWL_DUPEFILTER_BACKEND"
            )
            raise BadInputError(f"{key}={exc.value!r}: {exc.reason}") from None
        dupefilter.prepare()
        crawler.signals.connect(dupefilter.response_received, signal=signals.response_received)
        return dupefilter

    # -- what the scheduler asks ----------------------------------------------------------

    def request_seen(self, request: Request) -> bool:
        """True if the request was seen (this run, or fetched by a run this one continues)."""
        answer = self.store.answers(request)
        if answer is not None:
            return answer
        fp = self._asked[request] = self._fingerprint(request)
        return self.seen.seen_or_add(fp)

    def _fingerprint(self, request: Request) -> bytes:
        """The crawl's fingerprint of ``request``; a lane request's from its template when that is exact.

        With Scrapy's own fingerprinter, a GET without body (and without ``verbatim_url``) whose URL
        is its target's template with the id put in gets the same bytes from
        :class:`idcrawl.core.laneprint.TemplatePrint`, without canonicalising the URL again.
        """
        meta = request.meta
        lane = meta.get(META_KEY)
        if lane is not None and self._prints is not None and request.method == "GET" and not request.body \
                and not meta.get("verbatim_url"):
            name = lane.get("target")
            if name in self._prints:
                printer = self._prints[name]
            else:
                printer = self._prints[name] = self._template_print(name)
            if printer is not None:
                fp = printer.of(request.url)
                if fp is not None:
                    return fp
        return bytes(self.fingerprinter.fingerprint(request))

    def _template_print(self, name: str) -> TemplatePrint | None:
        runtime = runtime_of(self.crawler)
        target = runtime.frontier.targets.get(name) if runtime is not None else None
        if target is None:
            return None

        def scrapys(url: str) -> bytes | None:
            request = Request(url)
            return self.fingerprinter.fingerprint(request) if request.url == url else None

        if target.url not in self._template_prints:
            self._template_prints[target.url] = template_print(target.url, scrapys)
        return self._template_prints[target.url]

    @property
    def backend(self) -> FingerprintSet:
        return self.seen.backend

    # -- lifecycle -----------------------------------------------------------------------

    def prepare(self) -> None:
        """The fingerprints a run continues, read by the store (:meth:`SeenStore.prepare`) from
        :meth:`from_crawler`, before the engine opens anything."""
        self.seen = self.store.prepare(self.seen)

    def open(self) -> None:
        self._opened = True
        self._set_stats()
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value(f"{STATS_PREFIX}/backend", self.backend_name)
            stats.set_value(f"{STATS_PREFIX}/loaded", self.seen.loaded)

    def close(self, reason: str) -> None:
        super().close(reason)
        if not self._opened:
            return
        self.store.close(self.seen)
        self._set_stats()
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value(f"{STATS_PREFIX}/unfetched", len(self.seen.pending))
        self._opened = False

    # -- responses -----------------------------------------------------------------------

    def response_received(self, response: Response, request: Request, spider: Spider) -> None:
        """A pending request got its final answer: remember it (unless the answer asks for a retry)."""
        if response.status in self._retry_codes or not self.seen.pending:
            return
        fp = self._asked.get(request)
        if fp is None:
            # a request the scheduler never asked about cannot be pending, unless it is a copy of one:
            # a retry (Scrapy's carry dont_filter and retry_times, a lane id's its attempt) or one read
            # back from JOBDIR
            if (
                request.dont_filter and not request.meta.get("retry_times")
                and (request.meta.get(META_KEY) or {}).get("attempt", 1) <= 1
            ):
                return
            fp = self._fingerprint(request)
        if self.seen.is_pending(fp):
            self._record(fp)

    def _record(self, fp: bytes) -> None:
        if self.store.fetched(self.seen, fp):
            self._set_stats()

    def _set_stats(self) -> None:
        stats = self.crawler.stats
        if stats is None:
            return
        backend = self.seen.backend
        stats.set_value(f"{STATS_PREFIX}/size", len(backend))
        stats.set_value(f"{STATS_PREFIX}/capacity", backend.capacity)
        stats.set_value(f"{STATS_PREFIX}/error_rate", backend.estimated_error_rate())
