"""Pages recorded by Scrapy itself: a real engine (download handlers, Scrapy's redirect and retry
middlewares, the project's settings) run in a daemon thread, as ``scrapy shell`` runs its, and a
downloader middleware next to the download handler that writes each answer into the cassette.

:class:`RecordingEngine`, used by :class:`idcrawl.recorded.RecordedCrawl` when its cassette may be
written; cassette entries are vcrpy's format (:func:`wire_request`, :func:`cassette_response`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import Request, Spider
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes
from scrapy.settings import Settings
from scrapy.utils.misc import load_object
from scrapy.utils.project import get_project_settings

from idcrawl._scrapy import open_download_engine

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = [
    "CASSETTE_ORDER", "CassetteMiddleware", "RecordingEngine", "cassette_response", "missing_answer",
    "wire_request",
]

T = TypeVar("T")

#: The cassette middleware's order: after every other downloader middleware, next to the download handler,
#: so it sees the request as sent and the answer as received (before decompression, cookies, redirects).
CASSETTE_ORDER = 1000
#: A header that describes the wire, not the body handed on (the handler has already de-chunked it).
_WIRE_HEADERS = frozenset({b"transfer-encoding"})
#: Components a recording engine leaves out: idcrawl's own (they keep a crawl's state: the frontier,
#: attempts with cool-downs, politeness, the HTTP cache, WARC output) and robots.txt, which a replay has no
#: engine for.
OFFLINE_SKIPPED = frozenset({
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
    "scrapy.downloadermiddlewares.httpcache.HttpCacheMiddleware",
    "idcrawl.downloadermiddlewares.attempts.IdAttemptsMiddleware",
    "idcrawl.downloadermiddlewares.redirects.IdRedirectsMiddleware",
    "idcrawl.distributed.politeness.FleetPoliteness",
    "idcrawl.archive.middleware.IdWarcMiddleware",
})


def skipped(component: Any) -> bool:
    """Whether a downloader middleware (a class, its path or an instance) is one of :data:`OFFLINE_SKIPPED`."""
    cls = load_object(component) if isinstance(component, str) else component
    if not isinstance(cls, type):
        cls = type(cls)
    return any(f"{base.__module__}.{base.__qualname__}" in OFFLINE_SKIPPED for base in cls.__mro__)


# -- the cassette's entries (vcrpy's format) ----------------------------------------------------


def wire_request(request: Request) -> Any:
    """``request`` as a vcrpy request (method, URL, body, headers as sent), to match or to record."""
    from vcr.request import Request as VcrRequest

    headers = {key.decode("latin-1"): b", ".join(values).decode("latin-1") for key, values in request.headers.items()}
    return VcrRequest(request.method, request.url, request.body or None, headers)


def wire_answer(response: Response) -> dict[str, Any]:
    """A response as the download handler gave it, as a vcrpy cassette's response."""
    try:
        message = HTTPStatus(response.status).phrase
    except ValueError:
        message = ""
    headers = {key.decode("latin-1"): [value.decode("latin-1") for value in values]
               for key, values in response.headers.items() if key.lower() not in _WIRE_HEADERS}
    return {"status": {"code": response.status, "message": message}, "headers": headers,
            "body": {"string": response.body}}


def cassette_response(request: Request, answer: Mapping[str, Any]) -> Response:
    """A cassette's response (recorded by idcrawl, or by vcrpy below ``requests`` before 0.2.0) as the
    download handler would give it to ``request``: status, headers (repeated ones kept), body as sent."""
    headers = Headers()
    for key, values in (answer.get("headers") or {}).items():
        if key.lower().encode("latin-1") in _WIRE_HEADERS:
            continue
        for value in values if isinstance(values, list) else [values]:
            headers.appendlist(key, value)
    body = (answer.get("body") or {}).get("string") or b""
    if isinstance(body, str):
        body = body.encode("utf-8")
    cls = responsetypes.from_args(headers=headers, url=request.url, body=body)
    return cls(url=request.url, status=int(answer["status"]["code"]), headers=headers, body=body, request=request)


def missing_answer(cassette: Any, request: Request) -> Exception:
    """vcrpy's error for a request the cassette has no answer to and may not record."""
    from vcr.errors import CannotOverwriteExistingCassetteException

    error: Exception = CannotOverwriteExistingCassetteException(cassette=cassette,
                                                                failed_request=wire_request(request))
    return error


class CassetteMiddleware:
    """Answers a request the cassette has an unplayed answer to (vcrpy's record modes), else lets the
    download handler fetch it and appends what it received to the cassette (:attr:`cassette`, set by
    :class:`RecordingEngine`; None: nothing recorded)."""

    def __init__(self) -> None:
        self.cassette: Any = None
        self.recorded = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CassetteMiddleware:
        return cls()

    def process_request(self, request: Request, spider: Any = None) -> Response | None:
        cassette = self.cassette
        if cassette is None:
            return None
        wire = wire_request(request)
        if cassette.record_mode != "all" and cassette.can_play_response_for(wire):
            return cassette_response(request, cassette.play_response(wire)).replace(flags=["cassette"])
        if cassette.write_protected:
            raise missing_answer(cassette, request)
        return None

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if self.cassette is not None and "cassette" not in response.flags:
            self.cassette.append(wire_request(request), wire_answer(response))
            self.recorded += 1
        return response


# -- the engine ---------------------------------------------------------------------------------


class RecordingAddon:
    """Turns a project's settings into a recording engine's: the cassette middleware next to the
    handler, Scrapy's scheduler, no idcrawl component (:data:`OFFLINE_SKIPPED`), no spider middleware,
    extension (but stats), pipeline, feed or dupefilter file: the engine only downloads. Runs after every
    other add-on."""

    def update_settings(self, settings: Settings) -> None:
        middlewares = settings.getwithbase("DOWNLOADER_MIDDLEWARES")
        kept = {path: order for path, order in middlewares.items() if order is not None and not skipped(path)}
        kept[f"{CassetteMiddleware.__module__}.{CassetteMiddleware.__qualname__}"] = CASSETTE_ORDER
        forced = {
            "DOWNLOADER_MIDDLEWARES_BASE": {}, "DOWNLOADER_MIDDLEWARES": kept,
            "SCHEDULER": "scrapy.core.scheduler.Scheduler", "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",
            "SPIDER_MIDDLEWARES_BASE": {}, "SPIDER_MIDDLEWARES": {},
            "EXTENSIONS_BASE": {"scrapy.extensions.corestats.CoreStats": 0}, "EXTENSIONS": {},
            "ITEM_PIPELINES": {}, "FEEDS": {}, "JOBDIR": None, "TELNETCONSOLE_ENABLED": False,
        }
        for name, value in forced.items():
            settings.set(name, value, priority="cmdline")


class _LoopThread:
    """The process's one event loop for recordings, run in a daemon thread as ``scrapy shell`` runs its:
    the Twisted reactor (the project's ``TWISTED_REACTOR``; one already installed is run, or used when
    running), or an asyncio loop when the project turns the reactor off."""

    def __init__(self, settings: Settings) -> None:
        self.reactor = settings.getbool("TWISTED_REACTOR_ENABLED", True)
        self._loop: asyncio.AbstractEventLoop | None = None
        ready = threading.Event()
        failed: list[BaseException] = []
        if self.reactor and _running_reactor() is not None:
            return
        target = self._run_reactor if self.reactor else self._run_loop
        threading.Thread(target=target, args=(settings, ready, failed), daemon=True,
                         name="idcrawl-recording").start()
        ready.wait()
        if failed:
            raise RuntimeError(f"idcrawl: the recording engine's event loop did not start: {failed[0]}") from failed[0]

    @staticmethod
    def _run_reactor(settings: Settings, ready: threading.Event, failed: list[BaseException]) -> None:
        try:
            from scrapy.utils.reactor import install_reactor, is_reactor_installed

            if not is_reactor_installed():
                install_reactor(settings["TWISTED_REACTOR"] or "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
                                settings["ASYNCIO_EVENT_LOOP"])
            from twisted.internet import reactor

            running: Any = reactor
            running.callWhenRunning(ready.set)
            running.run(installSignalHandlers=False)
        except BaseException as exc:  # a reactor that ran and stopped cannot run again
            failed.append(exc)
            ready.set()

    def _run_loop(self, settings: Settings, ready: threading.Event, failed: list[BaseException]) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine ``make()`` on the loop and wait for its result (from another thread)."""
        if not self.reactor:
            assert self._loop is not None

            async def run() -> T:
                return await make()

            return asyncio.run_coroutine_threadsafe(run(), self._loop).result()
        from scrapy.utils.defer import deferred_from_coro
        from twisted.internet import reactor, threads
        from twisted.python import threadable

        if threadable.isInIOThread():  # type: ignore[no-untyped-call]
            raise RuntimeError("idcrawl: recording pages from the reactor's own thread (a test run by "
                               "pytest-twisted?): record them from a plain test")
        start: Callable[[], Any] = lambda: deferred_from_coro(make())  # noqa: E731
        result: T = threads.blockingCallFromThread(reactor, start)
        return result


def _running_reactor() -> Any:
    from scrapy.utils.reactor import is_reactor_installed

    if not is_reactor_installed():
        return None
    from twisted.internet import reactor

    installed: Any = reactor
    return installed if installed.running else None


_LOOPS: dict[bool, _LoopThread] = {}
_LOOPS_LOCK = threading.Lock()


def loop_thread(settings: Settings) -> _LoopThread:
    """The process's recording loop for those settings (started on first use, never stopped)."""
    with _LOOPS_LOCK:
        key = settings.getbool("TWISTED_REACTOR_ENABLED", True)
        if key not in _LOOPS:
            _LOOPS[key] = _LoopThread(settings)
        return _LOOPS[key]


def engine_settings(spidercls: type[Spider], overrides: Mapping[str, Any]) -> Settings:
    """The settings ``scrapy crawl`` gives the spider (the project's, ``overrides`` as ``-s``), with
    :class:`RecordingAddon` last among the add-ons."""
    settings = get_project_settings().copy()
    settings.setdict(dict(overrides), priority="cmdline")
    addons = dict(settings.getdict("ADDONS"))
    addons[f"{RecordingAddon.__module__}.{RecordingAddon.__qualname__}"] = 10**6
    settings.set("ADDONS", addons, priority="cmdline")
    from scrapy.utils.reactor import is_asyncio_reactor_installed, is_reactor_installed

    if is_reactor_installed() and not is_asyncio_reactor_installed():
        settings.set("TWISTED_REACTOR", None, priority="cmdline")  # run the one installed, as it is
    return settings


class RecordingEngine:
    """A Scrapy engine that downloads the requests it is given, through the project's downloader
    middlewares and download handlers, writing what the handler received into ``cassette``
    (a vcrpy cassette; None: nothing recorded). ``spider`` is the spider the middlewares see."""

    def __init__(self, spider: Spider, overrides: Mapping[str, Any], cassette: Any) -> None:
        settings = engine_settings(type(spider), overrides)
        self.loop = loop_thread(settings)
        self.crawler: Crawler = self.loop.call(lambda: open_download_engine(type(spider), settings, spider))
        middleware = self.crawler.get_downloader_middleware(CassetteMiddleware)
        assert middleware is not None  # RecordingAddon put it in
        middleware.cassette = cassette
        self.middleware = middleware

    def download(self, request: Request) -> Response:
        """``request`` downloaded as a crawl downloads it: redirects and retries followed by Scrapy's
        middlewares, the last response back through every middleware."""
        engine = self.crawler.engine
        assert engine is not None
        return self.loop.call(lambda: engine.download_async(request))

    def close(self) -> None:
        engine = self.crawler.engine
        if engine is not None:
            self.loop.call(lambda: engine.close_async(reason="finished"))
