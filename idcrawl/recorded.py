"""A site spider's callbacks run on recorded pages, outside a crawl: the fields it yields, the outcomes it gives.

:class:`RecordedCrawl`, what :mod:`idcrawl.testing` hands to a test; single process, no state.
How: docs/architecture.md, "Module notes" and docs/testing.md.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.project import get_project_settings
from scrapy.utils.spider import iterate_spider_output

from idcrawl._scrapy import downloader_middlewares, offline_crawler
from idcrawl.core.frontier import Dispatch
from idcrawl.core.lanes import Outcome
from idcrawl.core.templates import id_in_template, url_template
from idcrawl.runtime import start_runtime
from idcrawl.spidermiddlewares.soft404 import IdSoft404Middleware

if TYPE_CHECKING:
    import requests
    from scrapy.http import Response

    from idcrawl.core.targets import Target
    from idcrawl.spiders.idseq import IdSeqSpider

__all__ = ["RecordedCrawl", "RecordedPage", "page_arguments"]

#: What a recorded crawl sets whatever the project says: one process, no state file read or written.
FORCED_SETTINGS: dict[str, Any] = {
    "IDCRAWL_STATE": False,
    "IDCRAWL_WORKER_CLASS": "idcrawl.local.worker.LocalWorker",
}
#: A header that describes the wire, not the body handed on (``http.client`` has already de-chunked it).
_WIRE_HEADERS = frozenset({b"transfer-encoding"})
#: Downloader middlewares a recorded crawl leaves out (and their subclasses): robots.txt is fetched through
#: the engine, which a recorded crawl has not; a page is judged on one attempt (no retries) and redirects
#: are followed by ``requests``; the HTTP cache and the fleet's politeness keep state of their own.
OFFLINE_SKIPPED = frozenset({
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
    "scrapy.downloadermiddlewares.retry.RetryMiddleware",
    "scrapy.downloadermiddlewares.redirect.BaseRedirectMiddleware",
    "scrapy.downloadermiddlewares.httpcache.HttpCacheMiddleware",
    "idcrawl.downloadermiddlewares.attempts.IdAttemptsMiddleware",
    "idcrawl.downloadermiddlewares.redirects.IdRedirectsMiddleware",
    "idcrawl.distributed.politeness.FleetPoliteness",
})
#: ``requests`` gives up on a site that does not answer (only when recording: a cassette answers at once).
FETCH_TIMEOUT = 60.0


@dataclass
class RecordedPage:
    """One id's recorded page and what the spider made of it."""

    request: Request
    response: Response
    outcome: Outcome
    #: what ``parse_found`` yielded (items, follow-up requests); empty unless found
    output: list[Any] = field(default_factory=list)

    @property
    def items(self) -> list[Any]:
        """The items of :attr:`output` (follow-up requests left out)."""
        return [thing for thing in self.output if ItemAdapter.is_item(thing)]

    @property
    def item(self) -> dict[str, Any]:
        """The one item of a found page, as a dict (an error unless there is exactly one)."""
        items = self.items
        if len(items) != 1:
            raise AssertionError(f"{self.request.url}: {self.outcome} with {len(items)} items, not one")
        return ItemAdapter(items[0]).asdict()


def project_settings() -> dict[str, Any]:
    """The settings the project sets (its settings module, ``SCRAPY_*`` variables), without Scrapy's defaults."""
    settings = get_project_settings()
    values = settings.copy_to_dict()
    return {name: values[name] for name in values if (settings.getpriority(name) or 0) > SETTINGS_PRIORITIES["default"]}


def page_arguments(url: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Spider arguments for one page ``url`` (``scrapy parse``/``check``): ``arguments`` as given when they
    name targets (``url`` or ``job``), else one target whose template is ``url`` with its last number as
    the id (:func:`idcrawl.core.templates.url_template`)."""
    if "url" in arguments or "job" in arguments:
        return dict(arguments)
    made = url_template(url)
    if made is None:
        raise ValueError(f"{url}: no number in it to take as the id: give -a url=TEMPLATE with {{id}}")
    template, id_ = made
    return {**arguments, "url": template, "start": id_}


class RecordedCrawl:
    """``spidercls`` made as ``scrapy crawl`` makes it with ``arguments`` (its ``-a`` arguments: ``url``,
    ``start``, ``soft404_regex``, ... or ``job``), its callbacks run on fetched pages.

    ``settings`` go over the project's (``IDCRAWL_MISSING_STATUSES``, ...);
    ``session``: the ``requests`` session to fetch with (a new one by default).
    """

    def __init__(
        self,
        spidercls: type[IdSeqSpider],
        *,
        settings: Mapping[str, Any] | None = None,
        session: requests.Session | None = None,
        **arguments: Any,
    ) -> None:
        import requests

        crawler = offline_crawler(spidercls, {**project_settings(), **(settings or {}), **FORCED_SETTINGS})
        spider = spidercls.from_crawler(crawler, **{key: str(value) for key, value in arguments.items()})
        crawler.spider = spider
        # the spider finds its probe middleware through the engine, which a crawl outside the engine lacks
        spider.__dict__["_soft404"] = self.soft404 = IdSoft404Middleware.from_crawler(crawler)
        runtime = start_runtime(crawler)
        assert runtime is not None  # from_crawler made it
        self.crawler, self.spider, self.runtime = crawler, spider, runtime
        self.session = session if session is not None else requests.Session()
        self._probed = False
        self._middlewares: list[Any] | None = None

    def close(self) -> None:
        """Let the crawler go: the runtime registry keeps a crawler until its engine stops, which never starts
        here. Only the runtime is told: Scrapy's extensions (MemoryUsage, ...) never saw the engine start."""
        self.runtime.release()

    def __enter__(self) -> RecordedCrawl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def targets(self) -> Mapping[str, Target]:
        """The crawl's targets by name (one, named after the spider, for ``-a`` arguments without ``name``)."""
        return self.runtime.frontier.targets

    def target(self, name: str | None = None) -> Target:
        targets = self.targets
        if name is None:
            if len(targets) != 1:
                raise ValueError(f"this crawl has {len(targets)} targets ({', '.join(targets)}): name one")
            return next(iter(targets.values()))
        try:
            return targets[name]
        except KeyError:
            raise ValueError(f"target={name!r}: no such target (known: {', '.join(targets)})") from None

    def request(self, id_: int, target: str | None = None) -> Request:
        """The request the spider makes for ``id_`` of the target (its ``make_id_request``)."""
        chosen = self.target(target)
        lane = next(key for key, lane_target in self.runtime.frontier.lane_target.items()
                    if lane_target.name == chosen.name)
        return self.spider.make_id_request(Dispatch(chosen, lane, id_))

    def fetch(self, id_: int, target: str | None = None) -> RecordedPage:
        """Fetch the page of ``id_`` (the cassette in use answers) and judge it as the crawl's callback does."""
        self.settle_probes()
        request = self.request(id_, target)
        return self.judge(request, self.fetch_response(request))

    def judge(self, request: Request, response: Response) -> RecordedPage:
        """What the crawl's callback makes of ``response`` to the id ``request``: its outcome and, when found,
        what ``parse_found`` yields (no state recorded, nothing emitted)."""
        if not self._reaches_callback(response):
            # HttpErrorMiddleware hands it to the errback: failure_outcome() of a response that is not wanted
            return RecordedPage(request, response, Outcome.FAILED)
        outcome = self.spider.classify(response)
        output: list[Any] = []
        if outcome is Outcome.FOUND:
            output = list(iterate_spider_output(self.spider.parse_found(response, self.spider.base_item(response))))
        return RecordedPage(request, response, outcome, output)

    def locate(self, url: str) -> tuple[Target, int]:
        """The target whose template renders ``url`` for an id, and that id; ValueError (one line) when none does."""
        for target in self.targets.values():
            id_ = id_in_template(target.url, url)
            if id_ is not None:
                return target, id_
        templates = ", ".join(target.url for target in self.targets.values())
        raise ValueError(f"{url}: no target's url template renders it (templates: {templates})")

    def outcome(self, id_: int, target: str | None = None) -> Outcome:
        """The outcome of ``id_``'s recorded page: found, missing or failed."""
        return self.fetch(id_, target).outcome

    def settle_probes(self) -> None:
        """Fetch each target's ``soft404_probe`` page and learn from it, once (a crawl does it first)."""
        if self._probed:
            return
        self._probed = True
        for request in self.soft404.probe_requests():
            current: Request | None = request
            while current is not None:
                outputs = list(self.spider.probe_response(self.fetch_response(current)))
                current = next((out for out in outputs if isinstance(out, Request)), None)  # a retry of the probe

    def middlewares(self) -> list[Any]:
        """The crawl's downloader middlewares a recorded crawl runs, in the crawl's order (those of
        :data:`OFFLINE_SKIPPED` left out): the project's ``USER_AGENT``, ``DEFAULT_REQUEST_HEADERS``,
        cookies, compression and its own middlewares shape the request and the response as in a crawl."""
        if self._middlewares is None:
            self._middlewares = [mw for mw in downloader_middlewares(self.crawler) if not _skipped(mw)]
        return self._middlewares

    def fetch_response(self, request: Request) -> Response:
        """``request`` through the crawl's downloader middlewares (:meth:`middlewares`), sent with ``requests``
        as they left it (no header of ``requests``'s own), its answer back through them as Scrapy's
        response: the request a cassette holds is the one the spider sends."""
        middlewares = self.middlewares()
        for index, middleware in enumerate(middlewares):
            method = getattr(middleware, "process_request", None)
            result = _call(method, request=request) if method is not None else None
            if isinstance(result, Request):  # a middleware replaced it: the crawl would schedule that one
                return self.fetch_response(result)
            if result is not None:  # a middleware answered: the later ones never see the request
                return self._through_responses(middlewares[:index + 1], request, result)
        return self._through_responses(middlewares, request, self._send(request))

    def _through_responses(self, middlewares: list[Any], request: Request, response: Response) -> Response:
        for middleware in reversed(middlewares):
            method = getattr(middleware, "process_response", None)
            if method is None:
                continue
            result = _call(method, request=request, response=response)
            if isinstance(result, Request):  # no retry or redirect middleware runs here: only a project's
                return self.fetch_response(result)
            response = result
        return response

    def _send(self, request: Request) -> Response:
        headers: dict[str, Any] = {key: None for key in self.session.headers}  # None: none of requests's own
        headers.update({key.decode("latin-1"): b", ".join(values).decode("latin-1")
                        for key, values in request.headers.items()})
        self.session.cookies.clear()  # cookies are the crawl's (its cookies middleware), not the session's
        try:
            reply = self.session.request(
                request.method, request.url, headers=headers, data=request.body or None,
                allow_redirects=True, timeout=FETCH_TIMEOUT, stream=True,
            )
            body = reply.raw.read(decode_content=False)  # as sent: the compression middleware decodes it
        except Exception as exc:
            exc.add_note(f"idcrawl: fetching {request.url} for a recorded page (no cassette recorded it? "
                         "record it outside CI: docs/testing.md)")
            raise
        return self._response(request, reply, body)

    @staticmethod
    def _response(request: Request, reply: requests.Response, body: bytes) -> Response:
        raw = Headers()
        for key, value in _header_pairs(reply):
            if key.lower().encode("latin-1") not in _WIRE_HEADERS:
                raw.appendlist(key, value)
        if reply.url != request.url:  # redirected: Scrapy's response is the last request's, meta carried over
            request = request.replace(url=reply.url)
        cls = responsetypes.from_args(headers=raw, url=reply.url, body=body)
        return cls(url=reply.url, status=reply.status_code, headers=raw, body=body, request=request)

    @staticmethod
    def _reaches_callback(response: Response) -> bool:
        """Whether Scrapy's HttpErrorMiddleware lets the response through to the callback."""
        meta = response.meta
        return (200 <= response.status < 300 or bool(meta.get("handle_httpstatus_all"))
                or response.status in meta.get("handle_httpstatus_list", ()))


def _skipped(middleware: Any) -> bool:
    return any(f"{cls.__module__}.{cls.__qualname__}" in OFFLINE_SKIPPED for cls in type(middleware).__mro__)


def _call(method: Any, **kwargs: Any) -> Any:
    """A middleware method's result; a coroutine's (an ``async def`` method) run to its end."""
    result = method(**kwargs)
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _header_pairs(reply: requests.Response) -> Iterator[tuple[str, str]]:
    """The reply's headers, a repeated one (``Set-Cookie``) as several pairs when the raw reply keeps them."""
    raw: Any = getattr(getattr(reply, "raw", None), "headers", None)
    getlist = getattr(raw, "getlist", None)
    if getlist is None:
        yield from reply.headers.items()
        return
    for key in dict.fromkeys(raw.keys()):
        for value in getlist(key):
            yield key, value

