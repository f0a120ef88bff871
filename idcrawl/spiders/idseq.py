"""The ``idseq`` spider: walk numeric ids of URL templates.

Site spiders subclass :class:`IdSeqSpider` and override :meth:`parse_found`
to extract fields (see ``idcrawl/spiders/demo.py``). Everything about which
ids to fetch, outcomes, margins and emitting items in a concurrency-proof way
stays here and in the core.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import Request, Spider, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.misc import load_object
from scrapy.utils.spider import iterate_spider_output

from idcrawl import default_settings
from idcrawl.core.fingerprints import ITEM_SIGNATURE_KEY, SoftPage, shingles, signature, visible_text, words
from idcrawl.core.frontier import Dispatch
from idcrawl.core.lanes import Outcome
from idcrawl.core.targets import (
    TARGET_KEYS,
    Target,
    TargetError,
    parse_job,
    parse_run_options,
    parse_targets,
)
from idcrawl.errors import BadInputError, install_log_filter
from idcrawl.runtime import META_KEY, STATS_PREFIX, IdRuntime, runtime_of
from idcrawl.settings_profiles import apply_profile
from idcrawl.validation import validate_settings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

__all__ = ["IdSeqSpider"]

logger = logging.getLogger(__name__)
install_log_filter()

#: Statuses handed to the callback instead of being dropped by HttpErrorMiddleware
#: (3xx stay out so that redirects are still followed).
_HANDLED_STATUSES = list(range(400, 600))
#: The message of the IgnoreRequest raised by Scrapy's RobotsTxtMiddleware.
_ROBOTS_FORBIDDEN = "Forbidden by robots.txt"
_ATTEMPTS_MIDDLEWARE = "idcrawl.downloadermiddlewares.attempts.IdAttemptsMiddleware"
#: ``request.meta`` key of a soft-404 probe request: the target's name.
PROBE_KEY = "idcrawl_soft404_probe"
#: ``request.meta`` key of a probe's try (1 = first).
_PROBE_TRY = "idcrawl_soft404_probe_try"


class IdSeqSpider(Spider):
    """Crawl ``url`` templates id by id; one item per found id.

    Arguments (strings, as ``-a`` and scrapyd deliver them): ``url``, ``start``,
    ``min``, ``max``, ``direction``, ``margin``, ``window``, ``rate``,
    ``attempts``, ``cooldown``, ``backoff``, ``name`` (the target's name; also
    ``target_name``, which scrapyd can pass), or ``job`` (a TOML file of many targets).
    """

    name = "idseq"
    #: Spider arguments a subclass accepts besides the target keys and ``job``.
    extra_arguments: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # ``-a name=`` names the target; Spider.__init__ would rename the spider.
        self._target_args = {k: kwargs.pop(k) for k in list(kwargs) if k in TARGET_KEYS}
        if "target_name" in kwargs:  # scrapyd's schedule.json cannot pass ``name`` (its queue's own field)
            self._target_args.setdefault("name", kwargs.pop("target_name"))
        self._job_path: str | None = kwargs.pop("job", None)
        unknown = sorted(k for k in kwargs if not k.startswith("_") and k not in self.extra_arguments)
        self._unknown_args = {k: kwargs[k] for k in unknown}
        super().__init__(*args, **kwargs)

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        """What an id crawl cannot run without, with or without the ``idcrawl.addon.IdCrawl`` add-on.

        The add-on wires every idcrawl piece at ``addon`` priority for a whole
        project; a project that only uses this spider (no add-on) keeps working
        because the spider sets its three needs itself: the profile
        (``IDCRAWL_PROFILE``, and the :class:`~idcrawl.settings_profiles.JobProfile` add-on
        for a job file's ``profile`` key), an ``IdScheduler`` (forced: a project's
        other scheduler would never dispense an id) and the attempts middleware
        (lane requests carry ``dont_retry``; without it they get no attempts).
        Two add-ons that read their own switch are listed too: Spidermon
        (``IDCRAWL_SPIDERMON``) and the distributed layer
        (:class:`idcrawl.distributed.addon.Distributed`).
        """
        super().update_settings(settings)
        from idcrawl.addon import ATTEMPTS_MIDDLEWARE, ATTEMPTS_ORDER, SCHEDULER, setdefault_component
        from idcrawl.extensions.state import STATE_LOADER_ORDER
        from idcrawl.scheduler import IdScheduler

        apply_profile(settings)
        # IDCRAWL_SPIDERMON is read by an add-on: add-ons run later, after a job file's profile too
        from idcrawl.spidermon.addon import Monitoring

        Monitoring.add_to(settings)
        # the distributed layer is an add-on with its own switch: it swaps in the Redis classes
        from idcrawl.distributed.addon import Distributed

        Distributed.add_to(settings)
        setdefault_component(settings, "ADDONS", "idcrawl.settings_profiles.JobProfile", -1, priority="spider")

        current = settings.get("SCHEDULER")
        scheduler = load_object(current) if current else None
        # the MRO, not issubclass(): Scrapy's BaseSchedulerMeta makes every scheduler a "subclass" of any other
        if not (isinstance(scheduler, type) and IdScheduler in scheduler.__mro__):
            settings.set("SCHEDULER", SCHEDULER, priority="spider")
        # a project may move it or turn it off (None) by listing it; otherwise it is added
        setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", ATTEMPTS_MIDDLEWARE, ATTEMPTS_ORDER, priority="spider")
        # the state is read after the other extensions (one may bring the file in: DotScrapy Persistence)
        setdefault_component(settings, "EXTENSIONS", "idcrawl.extensions.state.IdStateLoader", STATE_LOADER_ORDER,
                             priority="spider")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> IdSeqSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        assert isinstance(spider, IdSeqSpider)
        validate_settings(crawler.settings)  # every IDCRAWL_* setting, before anything reads one
        missing = None
        try:
            targets = spider.targets_from_arguments(crawler.settings)
        except TargetError as exc:
            error = BadInputError(f"{spider.name}: bad input: {exc}")
            if spider._target_args or spider._job_path is not None or spider._unknown_args:
                raise error from None
            # none given: bad input for a crawl of its own; a distributed worker waits for pushed targets
            targets, missing = [], error
        # the crawler's runtime (runtime_of); its worker, with the state, is built after the extensions
        IdRuntime(crawler, targets, missing_targets=missing)
        crawler.signals.connect(spider._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(spider._spider_closed, signal=signals.spider_closed)
        return spider

    @property
    def runtime(self) -> IdRuntime:
        """The crawl's runtime (:func:`idcrawl.runtime.runtime_of`): its frontier, ``record()``."""
        runtime: IdRuntime | None = self.__dict__.get("_runtime")  # looked up once: asked for per response
        if runtime is None:
            runtime = runtime_of(self.crawler)
            assert runtime is not None, "an IdSeqSpider made without from_crawler()"
            self.__dict__["_runtime"] = runtime
        return runtime

    def targets_from_arguments(self, settings: BaseSettings) -> list[Target]:
        """Validate the arguments into targets (one place for -a, scrapyd and job files)."""
        if self._unknown_args:
            key = next(iter(self._unknown_args))
            raise TargetError(
                key, self._unknown_args[key],
                f"unknown spider argument (known: job, {', '.join(sorted(TARGET_KEYS))})",
            )
        defaults = {
            "margin": settings.getint("IDCRAWL_MARGIN", default_settings.IDCRAWL_MARGIN),
            "window": settings.getint("IDCRAWL_WINDOW", default_settings.IDCRAWL_WINDOW),
            "missing_statuses": settings.getlist(
                "IDCRAWL_MISSING_STATUSES", default_settings.IDCRAWL_MISSING_STATUSES
            ),
        }
        if self._job_path is not None:
            args = dict(self._target_args)
            # -a resume= / -a holes= apply to every target of the job
            overrides: dict[str, Any] = dict(parse_run_options(args))
            others = sorted(set(args) - set(overrides))
            if others:
                raise TargetError(others[0], args[others[0]], "give target keys in the job file, not with -a job=")
            limit = settings.getint("IDCRAWL_MAX_TARGETS", default_settings.IDCRAWL_MAX_TARGETS)
            targets = parse_job(self._job_path, defaults, max_targets=limit)
            return [replace(target, **overrides) for target in targets] if overrides else targets
        if not self._target_args:
            raise TargetError("url", "", "give -a url=TEMPLATE -a start=N, or -a job=FILE.toml")
        try:
            return parse_targets([self._target_args], defaults)
        except TargetError as exc:
            # a single target from -a: the "targets[0]" location only confuses
            raise TargetError(exc.field, exc.value, exc.reason) from None

    async def start(self) -> Any:
        """No start requests: the scheduler dispenses ids lazily. Targets with a
        ``soft404_probe`` fetch it first (a subclass overriding this must yield
        from ``super().start()``, or their responses wait for a probe forever)."""
        for request in self._probe_requests():
            yield request

    # -- requests --------------------------------------------------------------

    def make_id_request(self, dispatch: Dispatch) -> Request:
        """The request for one id (override to add headers, cookies, meta)."""
        return Request(
            dispatch.target.url_for(dispatch.id),
            callback=self._id_response,
            errback=self._id_failure,
            dont_filter=True,
            meta={
                META_KEY: {"lane": dispatch.lane, "id": dispatch.id, "target": dispatch.target.name, "attempt": 1},
                "handle_httpstatus_list": _HANDLED_STATUSES,
                "dont_retry": True,  # IdAttemptsMiddleware retries lane requests, with a cool-down
            },
        )

    # -- outcomes ----------------------------------------------------------------

    def classify(self, response: Response) -> Outcome:
        """Decide an id's outcome from its final response by its target's outcome rule.

        The rule is built from the target's ``missing_statuses`` and soft-404 keys
        (``idcrawl.core.outcomes``). Override to decide in code; ``super().classify(response)``
        gives the rule's verdict.
        """
        target = self.runtime.frontier.targets[response.meta[META_KEY]["target"]]
        rule = target.rule
        if isinstance(response, HtmlResponse):  # selector tests reuse the tree that parse_found's css() uses
            outcome = rule.evaluate(
                response.status, response.body, text=lambda: response.text, root=lambda: response.selector.root
            )
        elif isinstance(response, TextResponse):
            outcome = rule.evaluate(
                response.status, response.body, text=lambda: response.text, encoding=response.encoding
            )
        else:
            outcome = rule.evaluate(response.status, response.body)
        if outcome is Outcome.FOUND and target.soft404_probe is not None and self._learned_soft404(response, target):
            return Outcome.MISSING
        return outcome

    def base_item(self, response: Response) -> dict[str, Any]:
        info = response.meta[META_KEY]
        item: dict[str, Any] = {
            "target": info["target"],
            "id": info["id"],
            "url": response.url,
            "status": response.status,
            "fetched_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "attempts": info.get("attempt", 1),
            "checksum": hashlib.sha1(response.body).hexdigest(),  # noqa: S324 - a fingerprint, not security
        }
        if self._signatures_wanted():
            # near-duplicates: the pipeline needs the page's MinHash, and items do not carry the body
            text = self._page_text(response)
            if text is not None:
                item[ITEM_SIGNATURE_KEY] = signature(shingles(words(text)))
        return item

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        """Extract fields of a found page: yield the item, follow-up requests, more items."""
        yield item

    def _id_response(self, response: Response) -> Iterator[Any]:
        if self._held_for_probe(response):
            return  # judged when the target's soft-404 probe is settled
        info = response.meta[META_KEY]
        outcome = self.classify(response)
        payload = None
        if outcome is Outcome.FOUND:
            payload = list(iterate_spider_output(self.parse_found(response, self.base_item(response))))
        yield from self.runtime.record(info["lane"], info["id"], outcome, payload, attempt=info.get("attempt", 1))

    def _id_failure(self, failure: Failure) -> Iterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        info = request.meta[META_KEY]
        if isinstance(failure.value, IgnoreRequest) and str(failure.value) == _ROBOTS_FORBIDDEN:
            outcome = Outcome.DISALLOWED
        else:
            outcome = Outcome.FAILED
            logger.debug("idcrawl: %s failed: %r", request.url, failure.value)
        yield from self.runtime.record(info["lane"], info["id"], outcome, attempt=info.get("attempt", 1))

    # -- learned soft 404s and content signatures --------------------------------
    #
    # A target with ``soft404_probe`` fetches that page (an id known not to
    # exist) before any of its ids is judged: its lane responses that arrive
    # first are held (at most the lanes' windows) and judged when the probe is
    # settled, so every id is classified against the same knowledge whatever
    # the concurrency. Nothing in the scheduler or the frontier waits.

    def _probe_requests(self) -> list[Request]:
        """One request per target with a probe; the targets' lane responses wait for it."""
        waiting: dict[str, list[Response]] = {}
        self.__dict__["_soft404_waiting"] = waiting
        self.__dict__["_soft404_pages"] = {}
        requests = []
        for target in self.runtime.frontier.targets.values():
            if target.soft404_probe is None:
                continue
            waiting[target.name] = []
            requests.append(Request(
                target.soft404_probe, callback=self._probe_response, errback=self._probe_failure,
                dont_filter=True, priority=1000,  # queued requests go before lane ids anyway
                # 4xx/5xx reach the callback (a 404 tells us the site has real 404s); redirects are followed;
                # retried here (_retry_probe), so that a probe that fails is one warning, not Scrapy's error too
                meta={PROBE_KEY: target.name, "handle_httpstatus_list": _HANDLED_STATUSES, "dont_retry": True},
            ))
        return requests

    def _held_for_probe(self, response: Response) -> bool:
        """Hold a lane response whose target's probe is not settled yet."""
        waiting: dict[str, list[Response]] | None = self.__dict__.get("_soft404_waiting")
        if not waiting:
            return False
        held = waiting.get(response.meta[META_KEY]["target"])
        if held is None:
            return False
        held.append(response)
        return True

    def _probe_response(self, response: Response) -> Iterator[Any]:
        name = response.meta[PROBE_KEY]
        target = self.runtime.frontier.targets[name]
        if response.status in self._retry_statuses() and response.status not in target.rule.missing_statuses:
            retry = self._retry_probe(response.request, f"status {response.status}")
            if retry is not None:
                yield retry
                return
        if response.status in target.rule.missing_statuses:
            logger.info("idcrawl: target %r: the soft-404 probe %s answered %d: the site has real 404s, "
                        "nothing to learn", name, response.url, response.status)
            result = "real_404"
        elif not 200 <= response.status < 300:
            logger.warning("idcrawl: target %r: the soft-404 probe %s answered %d: nothing learned, "
                           "soft 404s will be items", name, response.url, response.status)
            result = "failed"
        else:
            text = self._page_text(response)
            page = SoftPage.learn(text) if text is not None else None
            if page is None:
                logger.warning("idcrawl: target %r: the soft-404 probe %s has no text to learn from: nothing "
                               "learned, soft 404s will be items", name, response.url)
                result = "failed"
            else:
                self.__dict__["_soft404_pages"][name] = page
                logger.info("idcrawl: target %r: learned its soft-404 page from %s (%d shingles); pages at "
                            "least %g similar are missing", name, response.url, len(page.shingles),
                            target.soft404_similarity)
                result = "learned"
        self._stats().set_value(f"{STATS_PREFIX}/soft404/probes/{name}", result)
        yield from self._release_held(name)

    def _probe_failure(self, failure: Failure) -> Iterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        name = request.meta[PROBE_KEY]
        if not isinstance(failure.value, IgnoreRequest):  # robots.txt forbids it: no use trying again
            retry = self._retry_probe(request, failure.value)
            if retry is not None:
                yield retry
                return
        reason = " ".join(str(failure.value).split()) or type(failure.value).__name__
        logger.warning("idcrawl: target %r: the soft-404 probe %s failed (%s): nothing learned, "
                       "soft 404s will be items", name, request.url, reason)
        self._stats().set_value(f"{STATS_PREFIX}/soft404/probes/{name}", "failed")
        yield from self._release_held(name)

    def _retry_statuses(self) -> frozenset[int]:
        return frozenset(int(code) for code in self.crawler.settings.getlist("RETRY_HTTP_CODES"))

    def _retry_probe(self, request: Request | None, reason: Any) -> Request | None:
        """The probe's next try, or None when ``RETRY_TIMES`` retries are used up.

        Not Scrapy's RetryMiddleware: it logs giving up as an ERROR, and the
        one warning of :meth:`_probe_response` / :meth:`_probe_failure` says it all.
        """
        if request is None:
            return None
        tries = int(request.meta.get(_PROBE_TRY, 1))
        if tries > self.crawler.settings.getint("RETRY_TIMES"):
            return None
        logger.debug("idcrawl: retrying the soft-404 probe %s (%s)", request.url, reason)
        meta = {key: request.meta[key] for key in (PROBE_KEY, "handle_httpstatus_list", "dont_retry")}
        return request.replace(meta={**meta, _PROBE_TRY: tries + 1}, dont_filter=True)

    def _release_held(self, name: str) -> Iterator[Any]:
        """Judge the lane responses that waited for the probe (in arrival order)."""
        waiting: dict[str, list[Response]] = self.__dict__.get("_soft404_waiting", {})
        for response in waiting.pop(name, []):
            yield from self._id_response(response)

    def _learned_soft404(self, response: Response, target: Target) -> bool:
        """Whether a 2xx page is similar enough to the target's learned soft-404 page."""
        pages: dict[str, SoftPage] = self.__dict__.get("_soft404_pages", {})
        page = pages.get(target.name)
        text = self._page_text(response) if page is not None else None
        if page is None or text is None:
            return False
        similarity = page.similarity(text)
        if similarity < target.soft404_similarity:
            return False
        self._stats().inc_value(f"{STATS_PREFIX}/soft404/learned_missing")
        logger.debug("idcrawl: %s is missing: %.3f similar to the soft-404 page of %r", response.url, similarity,
                     target.name)
        return True

    def _page_text(self, response: Response) -> str | None:
        """The visible text of an HTML page (the decoded text of other text); None for binary bodies.

        The last response's text is kept: classify and base_item both ask for it.
        """
        cached = self.__dict__.get("_text_cache")
        if cached is not None and cached[0] is response:
            text: str | None = cached[1]
            return text
        if isinstance(response, HtmlResponse):
            text = visible_text(response.selector.root)  # the tree parse_found's css() uses
        elif isinstance(response, TextResponse):
            text = response.text
        else:
            text = None
        self.__dict__["_text_cache"] = (response, text)
        return text

    def _signatures_wanted(self) -> bool:
        """Near-duplicates on and the ContentDuplicates pipeline enabled (read once)."""
        wanted: bool | None = self.__dict__.get("_signatures")
        if wanted is None:
            from idcrawl.pipelines import signatures_wanted

            wanted = self.__dict__["_signatures"] = signatures_wanted(self.crawler.settings)
        return wanted

    def _stats(self) -> Any:
        stats = self.crawler.stats
        assert stats is not None
        return stats

    # -- lifecycle ---------------------------------------------------------------

    def _spider_idle(self) -> None:
        """The engine is idle: ids still without an outcome were lost on the way."""
        runtime = self.runtime
        if runtime.frontier.finished:
            outputs = runtime.take_orphans()  # released while dispensing an id an overlapping target fetched
            if not outputs:
                return
        else:
            outputs = runtime.abandon_lost()
        if outputs:
            # no callback is running to carry them: a data: request does
            self.crawler.engine.crawl(
                Request("data:,", callback=self._emit, cb_kwargs={"outputs": outputs}, dont_filter=True,
                        meta={"dont_obey_robotstxt": True})
            )
        if outputs or runtime.frontier.can_dispense():
            runtime.wake_engine()
            raise DontCloseSpider

    def _emit(self, response: Response, outputs: list[Any]) -> list[Any]:
        return outputs

    def _spider_closed(self, reason: str) -> None:
        self.runtime.close(reason)
