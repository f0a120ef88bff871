"""A site spider's callbacks run on recorded pages, outside a crawl: the fields it yields, the outcomes it gives.

:class:`RecordedCrawl`, what :mod:`idcrawl.testing` hands to a test; single process, no state.
How: docs/architecture.md, "Module notes" and docs/testing.md.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.project import get_project_settings
from scrapy.utils.spider import iterate_spider_output

from idcrawl._scrapy import downloader_middlewares, offline_crawler
from idcrawl.core.frontier import Dispatch
from idcrawl.core.lanes import Outcome
from idcrawl.core.safetext import safe
from idcrawl.core.templates import id_in_template, url_template
from idcrawl.recording import RecordingEngine, cassette_response, missing_answer, skipped, wire_request
from idcrawl.runtime import start_runtime
from idcrawl.spidermiddlewares.soft404 import IdSoft404Middleware

if TYPE_CHECKING:
    from scrapy.http import Response

    from idcrawl.core.targets import Target
    from idcrawl.spiders.idseq import IdSeqSpider

__all__ = ["FetchFailed", "RecordedCrawl", "RecordedPage", "page_arguments"]

#: What a recorded crawl sets whatever the project says: one process, no state file read or written.
FORCED_SETTINGS: dict[str, Any] = {
    "IDCRAWL_STATE": False,
    "IDCRAWL_WORKER_CLASS": "idcrawl.local.worker.LocalWorker",
}
class FetchFailed(OSError):
    """A page the recording engine could not download (refused, timed out, ...): one line, the URL and why."""


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
    ``start``, ``soft404_regex``, ... or ``job``), its callbacks run on recorded pages.

    ``settings`` go over the project's (``IDCRAWL_MISSING_STATUSES``, ...). ``cassette``: a vcrpy cassette
    (``vcr.VCR(...).use_cassette(path)``'s). While it may be written (vcrpy's record modes: ``once`` with no
    file yet, ``new_episodes``, ``all``), pages are fetched by a real Scrapy engine (:mod:`idcrawl.recording`)
    and what its download handler received is recorded; once it is written (``once``, ``none``), pages are
    answered from it through the crawl's downloader middlewares, without an engine. None: fetched by
    the engine, nothing recorded.
    """

    def __init__(
        self,
        spidercls: type[IdSeqSpider],
        *,
        settings: Mapping[str, Any] | None = None,
        cassette: Any = None,
        **arguments: Any,
    ) -> None:
        self.overrides = {**(settings or {}), **FORCED_SETTINGS}
        crawler = offline_crawler(spidercls, {**project_settings(), **self.overrides})
        spider = spidercls.from_crawler(crawler, **{key: str(value) for key, value in arguments.items()})
        crawler.spider = spider
        # the spider finds its probe middleware through the engine, which a crawl outside the engine lacks
        spider.__dict__["_soft404"] = self.soft404 = IdSoft404Middleware.from_crawler(crawler)
        runtime = start_runtime(crawler)
        assert runtime is not None  # from_crawler made it
        self.crawler, self.spider, self.runtime = crawler, spider, runtime
        self.cassette = cassette
        self._engine: RecordingEngine | None = None
        self._probed = False
        self._middlewares: list[Any] | None = None

    @property
    def recording(self) -> bool:
        """Whether pages are fetched by a Scrapy engine (and recorded), rather than answered by the cassette."""
        return self.cassette is None or not self.cassette.write_protected

    def close(self) -> None:
        """Let the crawler go: the runtime registry keeps a crawler until its engine stops, which never starts
        here. Only the runtime is told: Scrapy's extensions (MemoryUsage, ...) never saw the engine start.
        A recording engine is closed."""
        engine, self._engine = self._engine, None
        try:
            if engine is not None:
                engine.close()
        finally:
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
        """The crawl's downloader middlewares a replay runs, in the crawl's order (those of
        :data:`idcrawl.recording.OFFLINE_SKIPPED` left out, as the recording engine leaves them out): the
        project's ``USER_AGENT``, ``DEFAULT_REQUEST_HEADERS``, cookies, compression, Scrapy's redirect and
        retry middlewares and its own shape the request and the response as in a crawl."""
        if self._middlewares is None:
            self._middlewares = [mw for mw in downloader_middlewares(self.crawler) if not skipped(mw)]
        return self._middlewares

    def fetch_response(self, request: Request) -> Response:
        """``request`` downloaded as a crawl downloads it: while recording, by the recording engine (its
        download handler, the cassette written from what it received); else through :meth:`middlewares`,
        the cassette answering in the download handler's place. A request a middleware returns (a
        redirect, a retry) is downloaded in its turn, as ``engine.download_async()`` does."""
        if self.recording:
            if self._engine is None:
                self._engine = RecordingEngine(self.spider, self.overrides, self.cassette)
            try:
                return self._engine.download(request)
            except Exception as exc:
                if type(exc).__name__ == "CannotOverwriteExistingCassetteException":
                    raise  # vcrpy's, as a replay raises it
                raise FetchFailed(f"{safe(request.url)}: {exc}") from exc
        while True:
            result = self._replay(request)
            if not isinstance(result, Request):
                return result
            request = result

    def _replay(self, request: Request) -> Response | Request:
        middlewares = self.middlewares()
        for middleware in middlewares:
            method = getattr(middleware, "process_request", None)
            result = _call(method, request=request) if method is not None else None
            if isinstance(result, Request):  # a middleware replaced it: the crawl would download that one
                return result
            if result is not None:  # a middleware answered: every process_response sees it, as in Scrapy
                return self._through_responses(middlewares, request, result)
        return self._through_responses(middlewares, request, self._answer(request))

    def _through_responses(self, middlewares: list[Any], request: Request, response: Response) -> Response | Request:
        for middleware in reversed(middlewares):
            method = getattr(middleware, "process_response", None)
            if method is None:
                continue
            result = _call(method, request=request, response=response)
            if isinstance(result, Request):  # a redirect or a retry
                return result
            response = result
        return response

    def _answer(self, request: Request) -> Response:
        """The cassette's next unplayed answer to ``request``, as the download handler gave it when recording."""
        wire = wire_request(request)
        if not self.cassette.can_play_response_for(wire):
            error = missing_answer(self.cassette, request)
            error.add_note(f"idcrawl: no recorded answer to {request.url} (record it outside CI: docs/testing.md)")
            raise error
        return cassette_response(request, self.cassette.play_response(wire))

    @staticmethod
    def _reaches_callback(response: Response) -> bool:
        """Whether Scrapy's HttpErrorMiddleware lets the response through to the callback."""
        meta = response.meta
        return (200 <= response.status < 300 or bool(meta.get("handle_httpstatus_all"))
                or response.status in meta.get("handle_httpstatus_list", ()))


def _call(method: Any, **kwargs: Any) -> Any:
    """A middleware method's result; a coroutine's (an ``async def`` method) run to its end."""
    result = method(**kwargs)
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
