"""The Scrapy internals idcrawl relies on, in one place, for every Scrapy that ``pyproject.toml`` admits.

Each is one small function; where Scrapy versions differ the difference is handled here, by testing
for the feature. What each relies on, by version: docs/development.md, "The Scrapy internals used".
"""

from __future__ import annotations

import asyncio
import json
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import scrapy.core.downloader as _downloader
from scrapy.core.downloader import Slot
from scrapy.exceptions import DownloadCancelledError, IgnoreRequest
from scrapy.extensions.feedexport import FeedExporter
from scrapy.statscollectors import StatsCollector
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from scrapy.utils.defer import _schedule_coro, deferred_from_coro
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import IO

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    from scrapy.robotstxt import RobotParser

__all__ = [
    "SLOT_CLOCK",
    "SLOT_HAS_JITTER",
    "TOO_LARGE_ERRORS",
    "CancelledAtShutdown",
    "DecompressionTooLarge",
    "FeedSlotView",
    "before_download",
    "cancel_downloads_on_shutdown",
    "close_spider",
    "command_crawler",
    "contract_testcase",
    "download_slot",
    "downloader_crowded",
    "downloader_middlewares",
    "engine_busy",
    "feed_slots",
    "has_feed_exporter",
    "new_slot_concurrency",
    "new_slot_delay",
    "offline_crawler",
    "open_download_engine",
    "repair_jobdir",
    "robots_parser",
    "sequential_host",
    "set_slot_delay",
    "shutdown_signals",
    "slot_has_room",
    "slot_jitter",
    "slot_key",
    "slot_ready_at",
    "slot_wait",
    "slots_sequential",
    "spider_closing",
    "total_concurrency",
    "wake_engine",
]

#: Scrapy >= 2.19: ``Slot.jitter`` (a float); before, ``Slot.randomize_delay`` (a bool meaning +-50%).
SLOT_HAS_JITTER: bool = hasattr(Slot, "jitter")
_OLD_JITTER = 0.5  # what randomize_delay=True meant before 2.19
#: The clock of a slot's ``lastseen`` (monotonic since 2.19, ``time()`` before).
SLOT_CLOCK: Callable[[], float] = getattr(_downloader, "monotonic", None) or _downloader.time  # type: ignore[attr-defined]


# -- stats ------------------------------------------------------------------------------------


def stats_incrementer(stats: StatsCollector | Any) -> Callable[..., None]:
    """``stats.inc_value(key, count)``, for the counters idcrawl bumps on every response.

    A collector that keeps Scrapy's own ``inc_value`` (``MemoryStatsCollector`` and
    subclasses that do not override it) gets a function that does what that method
    does, on the same dict, without Scrapy 2.19's per-call wrapping of stats methods
    (``__getattribute__`` and the deprecated ``spider`` argument's check: about three
    Python calls per increment). Values and keys are the same at every moment; any
    other collector (one that sends each increment somewhere) gets its own ``inc_value``.
    """
    if type(stats).inc_value is not StatsCollector.inc_value:
        return stats.inc_value
    fields: dict[str, Any] = object.__getattribute__(stats, "__dict__")
    if not isinstance(fields.get("_stats"), dict):
        return stats.inc_value

    def inc_value(key: str, count: int = 1) -> None:
        values = fields["_stats"]  # read each time: set_stats() may replace the dict
        values[key] = values.setdefault(key, 0) + count

    return inc_value


# -- the engine ---------------------------------------------------------------------------


def wake_engine(crawler: Crawler | Any) -> None:
    """Ask the engine to call ``next_request()`` soon (no-op when no spider is open).

    Without it a lane freed by a late outcome, or a retry that fell due,
    would wait for the engine's 5 s heartbeat.
    """
    engine = getattr(crawler, "engine", None)
    slot = getattr(engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def close_spider(crawler: Crawler | Any, reason: str) -> bool:
    """Close the spider with ``reason``, from a component that cannot await it (a signal handler, a timer).

    The close runs as a task of the running loop; False (nothing done) when
    the crawler has no engine (before the spider opens, after it closed).
    """
    engine = getattr(crawler, "engine", None)
    if engine is None:
        return False
    _schedule_coro(engine.close_spider_async(reason=reason))
    return True


def spider_closing(crawler: Crawler | Any) -> bool:
    """Is the spider closing or closed (or not open yet): a close asked now would change nothing?"""
    engine = getattr(crawler, "engine", None)
    slot = getattr(engine, "_slot", None)
    return getattr(engine, "spider", None) is None or slot is None or getattr(slot, "closing", None) is not None


def offline_crawler(spidercls: type[Any], settings: dict[str, Any]) -> Crawler:
    """A crawler of ``spidercls`` with ``settings`` applied (project priority) and its stats, but no engine:
    what a spider's callbacks need to run outside a crawl (``idcrawl.recorded``)."""
    from scrapy.utils.test import get_crawler

    return get_crawler(spidercls, settings)


async def open_download_engine(spidercls: type[Any], settings: Any, spider: Any) -> Crawler:
    """A crawler of ``spidercls`` with ``settings`` whose engine runs with ``spider`` open and takes
    requests through ``engine.download_async()`` only (no start requests, never closed when idle), as
    ``scrapy shell`` opens its; run on the crawler's event loop (``idcrawl.recording``)."""
    from scrapy.crawler import Crawler

    crawler = Crawler(spidercls, settings)
    crawler._apply_settings()
    crawler.spider = spider
    engine = crawler.engine = crawler._create_engine()
    _schedule_coro(engine.start_async(_start_request_processing=False))
    await engine.open_spider_async(close_if_idle=False)
    return crawler


def downloader_middlewares(crawler: Crawler) -> list[Any]:
    """The crawler's downloader middlewares, made and ordered as its downloader makes them
    (``DOWNLOADER_MIDDLEWARES`` over ``DOWNLOADER_MIDDLEWARES_BASE``), first to last for requests."""
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager

    return list(DownloaderMiddlewareManager.from_crawler(crawler).middlewares)


def contract_testcase(method: Callable[..., Any], desc: str) -> Any:
    """The test case ``scrapy check`` reports an error of a spider's contract method under (``desc``:
    ``contract``, ``callback``, ``errback``)."""
    from scrapy.contracts import _create_testcase

    return _create_testcase(method, desc)


def command_crawler(command: Any, spidercls: Any) -> Crawler:
    """The crawler a ``scrapy crawl`` command makes for ``spidercls`` (a spider name or class)."""
    create = getattr(command, "_create_crawler", None)
    if create is None:
        return command.crawler_process.create_crawler(spidercls)  # type: ignore[no-any-return]
    return create(spidercls)  # type: ignore[no-any-return]


def shutdown_signals(process: Any) -> list[int]:
    """The signals (numbers) that asked ``process`` (a ``CrawlerProcess``) for a graceful shutdown, filled in
    as they arrive; call before ``process.start()``."""
    received: list[int] = []
    log_shutdown = getattr(process, "_log_shutdown", None)
    if log_shutdown is None:
        return received

    def logged(signum: int) -> None:
        received.append(signum)
        log_shutdown(signum)

    process._log_shutdown = logged
    return received


def engine_busy(crawler: Crawler | Any) -> bool:
    """Does the engine hold a request: downloading, being scraped, on its way from the scheduler
    to the downloader, or queued in the scheduler (its queues, and idcrawl's delay queue)?

    Not Scrapy's ``engine.spider_is_idle()``: that one also asks the scheduler's
    ``has_pending_requests()``, which for idcrawl's scheduler includes ids the
    frontier could still hand out, and it raises before the spider opened.
    False when the crawler has no engine.
    """
    engine = getattr(crawler, "engine", None)
    if engine is None:
        return False
    slot = getattr(engine, "_slot", None)
    scheduler = getattr(slot, "scheduler", None)
    scraper = engine.scraper.slot
    return bool(
        engine.downloader.active
        or (scraper is not None and not scraper.is_idle())
        or (slot is not None and slot.inprogress)
        or (scheduler is not None and (len(scheduler) or getattr(scheduler, "_delayed", None)))
    )


# -- download slots -----------------------------------------------------------------------


def slot_key(crawler: Crawler | Any, request: Request) -> str:
    """The key of the download slot that serves ``request``: its ``download_slot`` meta if set, else
    the downloader's choice (hostname, or IP with ``CONCURRENT_REQUESTS_PER_IP``). Needs the engine."""
    key: str = crawler.engine.downloader.get_slot_key(request)
    return key


def download_slot(crawler: Crawler | Any, key: str) -> Slot | None:
    """The downloader's slot of that key; None before the engine exists, or until the slot's first
    request (and again after Scrapy's slot GC dropped it while idle)."""
    engine = getattr(crawler, "engine", None)
    if engine is None:
        return None
    slot: Slot | None = engine.downloader.slots.get(key)
    return slot


def new_slot_delay(crawler: Crawler | Any, key: str) -> float:
    """The delay the downloader will give slot ``key`` when its first request makes it. Needs the engine."""
    downloader = crawler.engine.downloader
    entry = getattr(downloader, "per_slot_settings", {}).get(key, {})
    if "delay" in entry:
        return float(entry["delay"])
    default = getattr(downloader, "_delay", None)
    return float(default) if default is not None else crawler.settings.getfloat("DOWNLOAD_DELAY")


def sequential_host(settings: Any, host: str) -> bool:
    """Whether the download slot of ``host`` takes one request at a time, from the settings alone (no
    engine needed): ``CONCURRENT_REQUESTS = 1``, or the slot's concurrency is 1 (its ``DOWNLOAD_SLOTS``
    entry, else ``CONCURRENT_REQUESTS_PER_IP`` when set, else ``CONCURRENT_REQUESTS_PER_DOMAIN``), as
    Scrapy's downloader gives it (``Downloader._get_slot``)."""
    return sequential_hosts(settings)(host)


def sequential_hosts(settings: Any) -> Callable[[str], bool]:
    """:func:`sequential_host` of any host, the settings read once (a job of 100,000 targets asks for each)."""
    if settings.getint("CONCURRENT_REQUESTS") == 1:
        return lambda host: True
    concurrency = settings.getint("CONCURRENT_REQUESTS_PER_IP") or settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
    slots = settings.getdict("DOWNLOAD_SLOTS")
    return lambda host: int(slots.get(host, {}).get("concurrency", concurrency)) == 1


def slot_has_room(crawler: Crawler | Any, key: str, entering: int = 0) -> bool:
    """May one more request go to slot ``key`` now, without waiting on it?

    ``entering`` counts requests on their way to that slot (in the downloader
    middlewares, not in the slot yet). A slot with a delay has room only when
    nothing waits on it; otherwise while its active requests plus ``entering``
    stay under its concurrency (``CONCURRENT_REQUESTS_PER_DOMAIN`` for a slot
    not made yet).
    """
    downloader = crawler.engine.downloader
    slot = downloader.slots.get(key)
    if slot is None:
        return entering < downloader.domain_concurrency
    if slot.delay and (slot.queue or entering):
        return False
    return len(slot.active) + entering < slot.concurrency


def slot_wait(crawler: Crawler | Any, key: str) -> float:
    """Seconds until slot ``key``'s delay since its last request has run (its shortest draw, jitter
    included); 0 or less: a request would leave at once. 0 for a slot not made yet."""
    ready = slot_ready_at(crawler, key)
    return 0.0 if ready is None else ready - SLOT_CLOCK()


def slot_ready_at(crawler: Crawler | Any, key: str) -> float | None:
    """When (:data:`SLOT_CLOCK`) slot ``key``'s delay since its last request has run (its shortest draw,
    jitter included): the same number until the slot sends again. None: no delay or no request yet."""
    slot = crawler.engine.downloader.slots.get(key)
    if slot is None or not slot.delay or not slot.lastseen:
        return None
    return float(slot.lastseen + slot.delay * (1.0 - slot_jitter(slot)))


def downloader_crowded(crawler: Crawler | Any) -> bool:
    """Whether the downloader holds half of ``CONCURRENT_REQUESTS`` or more (requests waiting in slot
    queues count, as in Scrapy's own back-out)."""
    downloader = crawler.engine.downloader
    return 2 * len(downloader.active) >= downloader.total_concurrency


def slots_sequential(crawler: Crawler | Any) -> None:
    """Slots the downloader makes from now on take one request at a time (their concurrency is 1, as
    :func:`slot_has_room` reads it for a slot not made yet). Needs the engine."""
    downloader = crawler.engine.downloader
    downloader.domain_concurrency = 1
    if downloader.ip_concurrency:
        downloader.ip_concurrency = 1


def before_download(crawler: Crawler | Any, hook: Callable[[Request], Awaitable[None]],
                    after: Callable[[Request], None] | None = None) -> None:
    """Await ``hook(request)`` as each request leaves its slot's queue for the download handler (the
    moment Scrapy's slot delay runs from), before the handler sends it; call ``after(request)`` once
    the handler is done with it (a response or an error: the slot's transfer ends). Needs the engine;
    call once."""
    handlers = crawler.engine.downloader.handlers
    download = handlers.download_request_async

    async def hooked(request: Request) -> Any:
        await hook(request)
        try:
            return await download(request)
        finally:
            if after is not None:
                after(request)

    handlers.download_request_async = hooked  # type: ignore[method-assign]


def new_slot_concurrency(crawler: Crawler | Any, key: str) -> int:
    """The concurrency the downloader will give slot ``key`` when its first request makes it (its
    ``DOWNLOAD_SLOTS`` entry, else ``CONCURRENT_REQUESTS_PER_IP`` when set, else ``_PER_DOMAIN``)."""
    downloader = crawler.engine.downloader
    entry = getattr(downloader, "per_slot_settings", {}).get(key, {})
    return int(entry.get("concurrency", downloader.ip_concurrency or downloader.domain_concurrency))


def total_concurrency(crawler: Crawler | Any) -> int:
    """The downloader's ``CONCURRENT_REQUESTS`` (0: no limit)."""
    return int(crawler.engine.downloader.total_concurrency)


class CancelledAtShutdown(IgnoreRequest):
    """A download cancelled because the crawl is shutting down (SIGTERM, SIGINT): its id stays undecided."""


#: What the errback of a download over ``DOWNLOAD_MAXSIZE`` gets (the download was cancelled at the limit).
TOO_LARGE_ERRORS: tuple[type[BaseException], ...] = (DownloadCancelledError,)
#: What ``scrapy.utils.gz.gunzip(data, max_size=...)`` raises past ``max_size`` (as ``SitemapSpider`` catches it).
DecompressionTooLarge: type[BaseException] = _DecompressionMaxSizeExceeded


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running asyncio loop
        return None


def cancel_downloads_on_shutdown(crawler: Crawler | Any) -> bool:
    """From now on a graceful stop (``engine.stop_async()``: the first SIGTERM or SIGINT) cancels every
    download in flight instead of waiting for it, drops the requests waiting in download slots, and refuses
    those that start later: their errbacks get :class:`CancelledAtShutdown`. Needs the engine; a second call
    changes nothing. False (nothing done) without an engine."""
    engine: Any = getattr(crawler, "engine", None)
    handlers = getattr(getattr(engine, "downloader", None), "handlers", None)
    if handlers is None or not hasattr(engine, "close_spider_async"):
        return False
    if getattr(engine.close_spider_async, "idcrawl_cancels", False):
        return True  # installed already
    download = handlers.download_request_async
    close = engine.close_spider_async
    inflight: set[Any] = set()
    cancelled: set[Any] = set()
    stopping = False

    async def cancellable(request: Request) -> Any:
        if stopping:
            raise CancelledAtShutdown("idcrawl: download cancelled at shutdown")
        # asyncio: each download runs in a task of its own (``Downloader._wait_for_download``), cancelled as
        # it is; another Twisted reactor (no running loop): the download is wrapped in a Deferred, cancelled
        task = _current_task()
        handle: Any = task if task is not None else deferred_from_coro(download(request))
        inflight.add(handle)
        try:
            return await (download(request) if task is not None else handle)
        except BaseException:
            # whatever a cancelled download ends with (CancelledError, or the handler's DownloadFailedError
            # for a request cancelled before its response)
            if handle in cancelled:
                if task is not None:
                    task.uncancel()  # the task goes on: Scrapy hands the errback its failure
                raise CancelledAtShutdown("idcrawl: download cancelled at shutdown") from None
            raise
        finally:
            inflight.discard(handle)
            cancelled.discard(handle)

    async def closing(*, reason: str = "cancelled") -> None:
        nonlocal stopping
        if reason == "shutdown" and not stopping:
            stopping = True
            for handle in list(inflight):
                cancelled.add(handle)
                handle.cancel()
            # requests waiting in a download slot (its delay, its concurrency) are not sent either
            for slot in list(getattr(engine.downloader, "slots", {}).values()):
                while slot.queue:
                    _, queued = slot.queue.popleft()
                    queued.errback(CancelledAtShutdown("idcrawl: download cancelled at shutdown"))
        await close(reason=reason)

    closing.idcrawl_cancels = True  # type: ignore[attr-defined]
    handlers.download_request_async = cancellable
    engine.close_spider_async = closing
    return True


def slot_jitter(slot: Any) -> float:
    """A download slot's jitter: its waits are drawn from ``delay * (1 +- jitter)``."""
    if SLOT_HAS_JITTER:
        return float(slot.jitter)
    return _OLD_JITTER if slot.randomize_delay else 0.0


def set_slot_delay(slot: Any, delay: float, jitter: float) -> None:
    """Make a download slot wait ``delay * (1 +- jitter)`` between requests.

    Before Scrapy 2.19 only a jitter of 0 or 0.5 exists; for any other the
    slot waits the mean, ``delay``, every time (never shorter than the
    shortest draw asked for).
    """
    slot.delay = delay
    if SLOT_HAS_JITTER:
        slot.jitter = jitter
    else:
        slot.randomize_delay = jitter == _OLD_JITTER


# -- robots.txt ---------------------------------------------------------------------------


def robots_parser(middleware: RobotsTxtMiddleware, netloc: str) -> RobotParser | None:
    """The parser the robots.txt middleware holds for ``netloc``: None while its robots.txt is still
    downloading, when the download failed, or when it was never asked for."""
    stored = middleware._parsers.get(netloc)
    return None if isinstance(stored, Deferred) else stored


# -- JOBDIR ---------------------------------------------------------------------------------


def repair_jobdir(jobdir: str | Path) -> list[str]:
    """Rebuild the files Scrapy keeps in ``jobdir`` that a failed write or a kill left unreadable, before
    Scrapy reads them; what was rebuilt, one phrase each (nothing: every file was sound or absent).

    - ``requests.queue``: its ``active.json`` empty or cut: removed, the queue starts empty (its
      follow-up requests are lost; lane ids come from idcrawl's state).
    - ``spider.state``: not a whole pickle: removed (``spider.state`` starts as ``{}``).
    - ``requests.seen``: a last line cut short: ended (the next fingerprint is not glued to it).
    """
    root = Path(jobdir)
    done: list[str] = []
    queue = root / "requests.queue"
    active = queue / "active.json"
    if active.is_file():
        try:
            json.loads(active.read_text(encoding="utf-8"))
        except ValueError:
            shutil.rmtree(queue)
            done.append("requests.queue (its active.json empty or cut: the queue starts empty)")
    state = root / "spider.state"
    if state.is_file():
        try:
            with state.open("rb") as file:
                pickle.load(file)  # noqa: S301 - the job's own file, as Scrapy's SpiderState loads it
        except Exception:
            state.unlink()
            done.append("spider.state (empty or cut: starts empty)")
    seen = root / "requests.seen"
    if seen.is_file():
        data = seen.read_bytes()
        if data and not data.endswith(b"\n"):
            with seen.open("ab") as file:
                file.write(b"\n")
            done.append("requests.seen (its last line, cut short, ended)")
    return done


# -- feed exports -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedSlotView:
    """One feed of Scrapy's feed exporter, as it is when read (its ``file`` opens and closes later)."""

    storage: Any  #: the feed storage (``FileFeedStorage``, ``StdoutFeedStorage``, ...)
    file: IO[bytes] | None  #: the file written to, None before the feed opened it
    exporter_class: Any  #: the item exporter class of the feed's format (None if unknown)
    options: dict[str, Any]  #: the feed's options (``FEEDS`` entry with defaults filled in)


def _feed_exporters(crawler: Crawler | Any) -> list[FeedExporter]:
    extensions = getattr(crawler, "extensions", None)
    return [c for c in getattr(extensions, "middlewares", ()) if isinstance(c, FeedExporter)]


def has_feed_exporter(crawler: Crawler | Any) -> bool:
    """Is Scrapy's feed exporter enabled in this crawl (it closes its feeds after the spider)?"""
    return bool(_feed_exporters(crawler))


def feed_slots(crawler: Crawler | Any) -> list[FeedSlotView]:
    """Every feed the feed exporter writes in this crawl (none before ``spider_opened``, when it makes them)."""
    return [
        FeedSlotView(
            storage=slot.storage,
            file=slot.file,
            exporter_class=exporter.exporters.get(slot.format),
            options=exporter.feeds.get(slot.uri_template, {}),
        )
        for exporter in _feed_exporters(crawler)
        for slot in exporter.slots
    ]
