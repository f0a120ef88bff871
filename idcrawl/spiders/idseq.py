"""The ``idseq`` spider: walk numeric ids of URL templates.

Site spiders subclass :class:`IdSeqSpider` and override :meth:`~IdSeqSpider.parse_found`
to extract fields (see ``idcrawl/spiders/demo.py``); the class docstring lists
every hook. Which ids to fetch, outcomes, margins and emitting items in a
concurrency-proof way stay in the runtime and the core; the lane request is
built by :mod:`idcrawl.requests`, a response read by :mod:`idcrawl.responses`, and
the soft-404 probe is :mod:`idcrawl.spidermiddlewares.soft404`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import Request, Spider, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.spider import iterate_spider_output

from idcrawl.archive.middleware import CAPTURE_KEY
from idcrawl.config import config_from, config_of
from idcrawl.core.fingerprints import ITEM_SIGNATURE_KEY
from idcrawl.core.frontier import Dispatch
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import JobFile, read_job
from idcrawl.core.lanes import Outcome
from idcrawl.core.pagebook import PageEvent, PageVisit
from idcrawl.core.recrawl import DEFAULT_POLICY, Fetch
from idcrawl.core.recrawl import Outcome as PageOutcome
from idcrawl.core.scope import PageRead, UrlRecord, has_news, url_body_due
from idcrawl.core.targets import TARGET_KEYS, Target, parse_run_options, parse_targets
from idcrawl.core.watch import parse_watch, watch_targets
from idcrawl.errors import BadInputError, install_log_filter
from idcrawl.pipelines import signatures_wanted
from idcrawl.requests import CONDITIONAL_KEY, failure_outcome, failure_reason, lane_request, outlink_request
from idcrawl.responses import change_signature, rule_decision
from idcrawl.responses import page_signature as minhash_signature
from idcrawl.runtime import META_KEY, PROFILE_STATS, READ_KEY, STATS_PREFIX, IdRuntime, start_runtime
from idcrawl.settings_profiles import apply_profile
from idcrawl.spidermiddlewares.soft404 import IdSoft404Middleware
from idcrawl.validation import validate_settings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

__all__ = ["ID_CONCURRENT_ITEMS", "IdSeqSpider"]

# CONCURRENT_ITEMS of an id crawl unless the project or -s sets it: a response's outputs one after another
ID_CONCURRENT_ITEMS = 1

#: ``response.meta`` key of the page visit of a new or changed page (its item's revision).
_VISIT_KEY = "idcrawl_page_visit"
#: ``response.meta`` key of a found page's signature (:meth:`IdSeqSpider.page_signature`), computed once.
_SIGNATURE_KEY = "idcrawl_page_signature"
#: What each fetch of a found id meant for its page, counted (recrawl of found pages).
_PAGE_STATS = {
    PageEvent.NEW: f"{STATS_PREFIX}/pages/new",
    PageEvent.CHANGED: f"{STATS_PREFIX}/pages/changed",
    PageEvent.UNCHANGED: f"{STATS_PREFIX}/pages/unchanged",
    PageEvent.NOT_MODIFIED: f"{STATS_PREFIX}/pages/not_modified",
    PageEvent.GONE: f"{STATS_PREFIX}/pages/gone",
    PageEvent.LEFT: f"{STATS_PREFIX}/pages/left_schedule",
}


class IdSeqSpider(Spider):
    """Crawl ``url`` templates id by id; one item per found id.

    Arguments (strings, as ``-a`` and scrapyd deliver them): ``url``, ``start``,
    ``min``, ``max``, ``direction``, ``margin``, ``window``, ``rate``,
    ``attempts``, ``cooldown``, ``backoff``, ``name`` (the target's name; also
    ``target_name``, which scrapyd can pass), or ``job`` (a TOML file of many targets).

    What a site spider subclasses (all of it; docs/spiders.md):

    - ``name``, and ``extra_arguments``: spider arguments it accepts besides the target keys and ``job``;
    - :meth:`parse_found` ``(response, item)``: fill the item of a found page; yield it, follow-up
      requests, more items;
    - :meth:`classify` ``(response)``: the id's outcome; ``super().classify(response)`` is the target's rule;
    - :meth:`base_item` ``(response)``: the fields every item has, before ``parse_found``;
    - :meth:`page_signature` ``(response)``: what a revisit of a found page compares (its ``checksum``);
    - :meth:`make_id_request` ``(dispatch)``: the request of one id, to add headers, cookies, meta;
    - ``start()``: requests or items of its own at start (the soft-404 probes go first anyway);
    - what any Scrapy spider has (``custom_settings``; ``__init__``, ``from_crawler`` and
      ``update_settings`` calling ``super()``).

    The underscored methods are the id crawl's own: the callbacks of lane and
    probe requests and the idle and close handlers.
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
        self._watch_arg: Any = kwargs.pop("watch", None)  # watch mode (idcrawl.extensions.watch)
        unknown = sorted(k for k in kwargs if not k.startswith("_") and k not in self.extra_arguments)
        self._unknown_args = {k: kwargs[k] for k in unknown}
        super().__init__(*args, **kwargs)
        # after Spider.__init__, which sets every other keyword as an attribute (scrapyd passes _job=JOBID)
        self._job_file: JobFile | None = None  # the job file, once read (its profile: settings_profiles.JobProfile)
        self._watch: Any = None  # watch mode's IdWatch (idcrawl.extensions.watch), when watching

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        """What an id crawl cannot run without, with or without the ``idcrawl.addon.IdCrawl`` add-on.

        The profile (``IDCRAWL_PROFILE``) is applied here, before the spider reads its settings; the
        rest comes from add-ons listed here, which run after the spider is made:
        :class:`~idcrawl.addon.IdSeqNeeds` (scheduler, attempts, redirects, soft-404 probe, bounds),
        :class:`~idcrawl.settings_profiles.JobProfile` (a job file's ``profile`` key) and two that
        read their own switch: Spidermon (``IDCRAWL_SPIDERMON``) and the distributed layer
        (:class:`idcrawl.distributed.addon.Distributed`).
        """
        install_log_filter()  # a crawl starts: its refusals of bad input are one line (idcrawl.errors)
        super().update_settings(settings)
        from idcrawl.addon import IdSeqNeeds
        from idcrawl.components import setdefault_component
        from idcrawl.distributed.addon import Distributed
        from idcrawl.extensions.state import STATE_LOADER_ORDER
        from idcrawl.spidermon.addon import Monitoring

        # Scrapy 2.19 starts CONCURRENT_ITEMS asyncio tasks per response (default 100); an id page yields one
        # item, so 100 cost more CPU per page for nothing (docs/benchmarks.md). Set only when the project,
        # the command line and the spider left Scrapy's default; a profile still applies on top.
        if (settings.getpriority("CONCURRENT_ITEMS") or 0) < SETTINGS_PRIORITIES["project"]:
            settings.set("CONCURRENT_ITEMS", ID_CONCURRENT_ITEMS, priority="addon")
        apply_profile(settings)
        IdSeqNeeds.add_to(settings)
        Monitoring.add_to(settings)
        Distributed.add_to(settings)
        setdefault_component(settings, "ADDONS", "idcrawl.settings_profiles.JobProfile", -1, priority="spider")
        # the state is read after the other extensions (one may bring the file in: DotScrapy Persistence).
        # Kept here: with -s EXTENSIONS scrapy crawl's second merge drops it (the worker is then built
        # lazily); from an add-on it would stay, which changes when a Redis worker registers.
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
        job = spider._job_file
        scope = job.scope() if job is not None and job.has_scope else None  # crawl scope: page targets, outlinks
        watching = spider._watching(crawler, targets)
        if watching is not None:
            targets = watching
        IdRuntime(crawler, targets, missing_targets=missing, scope=scope,
                  sitemaps=job.id_sitemaps if job is not None else None)
        crawler.signals.connect(spider._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(spider._spider_closed, signal=signals.spider_closed)
        if watching is not None:  # after the idle handler above: a wave is over when the spider has nothing left
            from idcrawl.extensions.watch import IdWatch

            spider._watch = IdWatch.install(crawler)  # held here: signals keep weak references
        return spider

    def _watching(self, crawler: Crawler, targets: list[Target]) -> list[Target] | None:
        """Watch mode (``-a watch=true``, or ``IDCRAWL_WATCH``): the targets, every one's waves
        ``resume=due`` (:func:`idcrawl.core.watch.watch_targets`); None: not watching."""
        try:
            watch = parse_watch(self._watch_arg) if self._watch_arg is not None else config_of(crawler).watch
            if not watch:
                return None
            watched = watch_targets(targets)
        except TargetError as exc:
            raise BadInputError(f"{self.name}: bad input: {exc}") from None
        crawler.settings.set("IDCRAWL_WATCH", True, priority="cmdline")
        return watched

    @property
    def runtime(self) -> IdRuntime:
        """The crawl's runtime (:func:`idcrawl.runtime.start_runtime`): its frontier, ``record()``."""
        runtime: IdRuntime | None = self.__dict__.get("_runtime")  # looked up once: asked for per response
        if runtime is None:
            runtime = start_runtime(self.crawler)
            assert runtime is not None, "an IdSeqSpider made without from_crawler()"
            self.__dict__["_runtime"] = runtime
        return runtime

    def targets_from_arguments(self, settings: BaseSettings) -> list[Target]:
        """Validate the arguments into targets (one place for -a, scrapyd and job files)."""
        if self._unknown_args:
            key = next(iter(self._unknown_args))
            raise TargetError(
                key, self._unknown_args[key],
                f"unknown spider argument (known: job, watch, {', '.join(sorted(TARGET_KEYS))})",
            )
        config = config_from(settings)
        defaults = config.target_defaults()
        if self._job_path is not None:
            args = dict(self._target_args)
            # -a resume= / -a holes= apply to every target of the job
            overrides: dict[str, Any] = dict(parse_run_options(args))
            others = sorted(set(args) - set(overrides))
            if others:
                raise TargetError(others[0], args[others[0]], "give target keys in the job file, not with -a job=")
            self._job_file = read_job(self._job_path, defaults, max_targets=config.max_targets)
            targets = self._job_file.targets
            return [replace(target, **overrides) for target in targets] if overrides else targets
        if not self._target_args:
            raise TargetError("url", "", "give -a url=TEMPLATE -a start=N, or -a job=FILE.toml")
        try:
            return parse_targets([self._target_args], defaults)
        except TargetError as exc:
            # a single target from -a: the "targets[0]" location only confuses
            raise TargetError(exc.field, exc.value, exc.reason) from None

    async def start(self) -> AsyncIterator[Any]:
        """No start requests: the scheduler dispenses ids lazily (``IdSoft404Middleware`` sends the
        soft-404 probes before anything this yields). A site spider may yield its own here."""
        return
        yield  # an async generator that yields nothing

    # -- the hooks a site spider overrides ---------------------------------------------

    def make_id_request(self, dispatch: Dispatch) -> Request:
        """The request for one id; override to add headers, cookies or meta to ``super().make_id_request(dispatch)``
        (``request.replace(...)``, keeping its callbacks and its ``request.meta["idcrawl"]``).

        A revisit of a found page carries the validators of its last fetch (``If-None-Match``,
        ``If-Modified-Since``): a conditional request, whose 304 means "not modified"."""
        pages = self.runtime.pages
        validators = pages.validators(dispatch.target.name, dispatch.id) if pages is not None else None
        if validators:
            self.crawler.stats.inc_value(f"{STATS_PREFIX}/pages/conditional")
        elif pages is not None and pages.forced(dispatch.target.name, dispatch.id):
            self.crawler.stats.inc_value(f"{STATS_PREFIX}/pages/refetched")
        callback, errback = self._lane_callbacks
        return lane_request(dispatch, callback=callback, errback=errback, validators=validators)

    def make_outlink_request(self, record: UrlRecord) -> Request:
        """The request for a crawl-scope URL the queue hands out (``record``); override as
        :meth:`make_id_request`. Found before, it is conditional on the validators of its last 200, unless
        that body is older than ``IDCRAWL_RECRAWL_REFETCH_AFTER`` (a forced unconditional refetch)."""
        refetch = url_body_due(record, self.runtime.clock.now(), config_of(self.crawler).recrawl_refetch_after)
        request = outlink_request(record, callback=self.outlink_response, errback=self.outlink_failure,
                                  refetch=refetch)
        counted = "conditional" if request.meta.get(CONDITIONAL_KEY) else "refetched" if refetch else None
        if counted is not None:
            for name in record.crawl_profiles:
                self.crawler.stats.inc_value(f"{PROFILE_STATS}/{name}/{counted}")
        return request

    def classify(self, response: Response) -> Outcome:
        """Decide an id's outcome from its final response by its target's outcome rule.

        The rule is built from the target's ``missing_statuses`` and soft-404 keys
        (``idcrawl.core.outcomes``); a found page like the target's learned soft-404
        page (``soft404_probe``) is missing. Override to decide in code;
        ``super().classify(response)`` gives the rule's verdict. A 2xx the rule judges missing is
        counted by the test that judged it (``idcrawl/soft404/<test>``: docs/reference/stats.md).
        """
        target = self.runtime.frontier.targets[response.meta[META_KEY]["target"]]
        outcome, test = rule_decision(target.rule, response)
        if test is not None:
            self.crawler.stats.inc_value(f"{STATS_PREFIX}/soft404/{test}")
        if outcome is Outcome.FOUND and self._soft404 is not None and self._soft404.is_soft404(response, target):
            return Outcome.MISSING
        return outcome

    def base_item(self, response: Response) -> dict[str, Any]:
        """The fields every item of a found id has (``target``, ``id``, ``url``, ``status``,
        ``fetched_at``, ``attempts``, ``checksum`` (:meth:`page_signature`), ``revision``,
        ``previous_checksum``; ``final_url`` when a redirect was followed); ``parse_found`` gets it to fill in."""
        info = response.meta[META_KEY]
        redirected = response.meta.get("redirect_urls")
        url = redirected[0] if redirected else response.url  # the id's URL, as its template renders it
        item: dict[str, Any] = {
            "target": info["target"],
            "id": info["id"],
            "url": url,
            "status": response.status,
            "fetched_at": self.runtime.clock.stamp(),
            "attempts": info.get("attempt", 1),
            "checksum": self._signature(response),
        }
        if response.url != url:
            item["final_url"] = response.url  # a redirect was followed
        visit = response.meta.get(_VISIT_KEY)
        item["revision"] = visit.revision if isinstance(visit, PageVisit) else 1
        item["previous_checksum"] = visit.previous_checksum if isinstance(visit, PageVisit) else None
        if self._signatures_wanted:
            # near-duplicates: the pipeline needs the page's MinHash, and items do not carry the body
            minhash = minhash_signature(response)
            if minhash is not None:
                item[ITEM_SIGNATURE_KEY] = minhash
        return item

    def page_signature(self, response: Response) -> str:
        """What a revisit of a found page compares with the stored one (news when it differs; the
        item's ``checksum``): by the target's ``signature`` and ``signature_drop`` keys, the SHA-1 of
        the body or of its visible text. Override to compute your own (any string; the same string
        for the same content), e.g. from the fields ``parse_found`` extracts."""
        target = self.runtime.frontier.targets[response.meta[META_KEY]["target"]]
        return change_signature(response, target.policy)

    def _signature(self, response: Response) -> str:
        """:meth:`page_signature`, computed once per response."""
        signature = response.meta.get(_SIGNATURE_KEY)
        if signature is None:
            signature = response.meta[_SIGNATURE_KEY] = self.page_signature(response)
        return str(signature)

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        """Extract fields of a found page: yield the item, follow-up requests, more items."""
        yield item

    def parse_outlink(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        """A page of the crawl scope (a page target's page or an outlink followed in a crawl profile's
        scope, ``idcrawl.spidermiddlewares.scope``): yield the item (``target``: its owner, ``url``,
        ``status``, ``hops``, ``offsite_hops``, ``crawl_profiles``, ``fetched_at``, ``checksum``; ``final_url``
        when a redirect was followed), or
        other items. Its links are followed by the middleware: do not yield requests for them."""
        yield item

    def outlink_response(self, response: Response) -> Iterable[Any]:
        """A crawl-scope page's response: :meth:`parse_outlink` with its item when it has news (a signature,
        :meth:`outlink_signature`, other than its stored one: a first harvest, or a change); none for a
        304 or the same signature (``idcrawl/crawl_profiles/<name>/unchanged``), as for an id page."""
        from idcrawl.spidermiddlewares.scope import SCOPE_KEY

        info = response.meta[SCOPE_KEY]
        if response.status == 304 and response.meta.get(CONDITIONAL_KEY):
            return []  # not modified: no item (the scope middleware harvests it with its stored links)
        checksum = self.outlink_signature(response)
        response.meta[READ_KEY] = PageRead(checksum, _header(response, b"ETag"), _header(response, b"Last-Modified"),
                                           response.meta.get(CAPTURE_KEY), self.runtime.clock.now())
        if not has_news(info.get("checksum"), checksum):
            for name in info.get("crawl_profiles") or ():
                self.crawler.stats.inc_value(f"{PROFILE_STATS}/{name}/unchanged")
            return []  # the same signature as its last found harvest: no item
        redirected = response.meta.get("redirect_urls")
        url = redirected[0] if redirected else response.url  # the URL asked for, as for an id's item
        item: dict[str, Any] = {
            "target": info.get("owner"),
            "url": url,
            "status": response.status,
            "hops": info.get("hops"),
            "offsite_hops": info.get("offsite_hops"),
            "crawl_profiles": info.get("crawl_profiles"),
            "fetched_at": self.runtime.clock.stamp(),
            "checksum": checksum,
        }
        if response.url != url:
            item["final_url"] = response.url  # a redirect was followed (docs/scope.md, "Redirects")
        return iterate_spider_output(self.parse_outlink(response, item))

    def outlink_signature(self, response: Response) -> str:
        """A crawl-scope page's item ``checksum``: by the ``signature`` and ``signature_drop`` keys of its
        crawl profiles (the first that sets any), the SHA-1 of the body or of its visible text, as
        :meth:`page_signature` for an id target's page. Override to compute your own."""
        from idcrawl.spidermiddlewares.scope import SCOPE_KEY

        signature, drop = self.runtime.scope.signature_of(response.meta[SCOPE_KEY].get("crawl_profiles") or ())
        return change_signature(response, replace(DEFAULT_POLICY, signature=signature, signature_drop=drop))

    def outlink_failure(self, failure: Failure) -> None:
        """An outlink that failed (an error, or a non-2xx status): nothing to follow; the scope
        middleware counts it in the URL's not-found or error counter."""
        from idcrawl.spidermiddlewares.scope import IdScopeMiddleware

        middleware = self.crawler.get_spider_middleware(IdScopeMiddleware)
        if middleware is not None:
            middleware.failed(failure)

    # -- callbacks (spider methods: requests are serialised with their callbacks by name) --

    def _id_response(self, response: Response) -> Iterator[Any]:
        if self._soft404 is not None and self._soft404.hold(response):
            return  # judged when the target's soft-404 probe is settled
        info = response.meta[META_KEY]
        pages = self.runtime.pages
        if response.status == 304 and response.meta.get(CONDITIONAL_KEY) and pages is not None:
            # not modified: the id is still found; no body to parse, no item
            fetch = Fetch(PageOutcome.NOT_MODIFIED, last_modified=_header(response, b"Last-Modified"))
            self._page_stat(pages.visit(info["target"], info["id"], fetch).event)
            yield from self.runtime.record(info["lane"], info["id"], Outcome.FOUND, [], attempt=info.get("attempt", 1))
            return
        outcome = self.classify(response)
        payload = None
        if outcome is Outcome.FOUND:
            visit = None
            if pages is not None:
                fetch = Fetch(PageOutcome.OK, self._signature(response), etag=_header(response, b"ETag"),
                              last_modified=_header(response, b"Last-Modified"),
                              capture=response.meta.get(CAPTURE_KEY))
                visit = pages.visit(info["target"], info["id"], fetch)
                self._page_stat(visit.event)
            if visit is None or visit.emits:  # a new id or a changed page: an item
                if visit is not None:
                    response.meta[_VISIT_KEY] = visit  # base_item's revision and previous_checksum
                payload = list(iterate_spider_output(self.parse_found(response, self.base_item(response))))
            else:  # unchanged since the last fetch: nothing to emit
                payload = []
        elif outcome is Outcome.MISSING and pages is not None:
            self._page_stat(pages.visit(info["target"], info["id"], Fetch(PageOutcome.MISSING)).event)
        yield from self.runtime.record(info["lane"], info["id"], outcome, payload, attempt=info.get("attempt", 1))

    def _page_stat(self, event: PageEvent) -> None:
        key = _PAGE_STATS.get(event)
        if key is not None:
            self.runtime.inc_stat(key)

    def _id_failure(self, failure: Failure) -> Iterator[Any]:
        info = failure.request.meta[META_KEY]  # type: ignore[attr-defined]
        outcome = failure_outcome(failure)
        reason = failure_reason(failure)
        if reason is not None:
            self.runtime.inc_stat(f"{STATS_PREFIX}/outcome/{reason}")
        if outcome is None:  # cancelled at shutdown: undecided, fetched again when the job resumes
            return
        yield from self.runtime.record(info["lane"], info["id"], outcome, attempt=info.get("attempt", 1))

    def probe_response(self, response: Response) -> Iterator[Any]:
        """A soft-404 probe answered (IdSoft404Middleware); the lane responses that waited are judged."""
        assert self._soft404 is not None  # it sent the probe
        yield from self._soft404.answered(response, self._id_response)

    def probe_failure(self, failure: Failure) -> Iterator[Any]:
        """A soft-404 probe failed (its callbacks are spider methods: Scrapy stores them by name in JOBDIR)."""
        assert self._soft404 is not None
        yield from self._soft404.failed(failure, self._id_response)

    # The names these callbacks had before 0.2: a JOBDIR request queue written then names them (Scrapy
    # stores a request's callback by name), and it must still load.
    _probe_response = probe_response
    _probe_failure = probe_failure
    _outlink_response = outlink_response
    _outlink_failure = outlink_failure

    @cached_property
    def _lane_callbacks(self) -> tuple[Any, Any]:
        """The lane requests' callback and errback, bound once: every request holds the same two
        objects. Scrapy checks each callback for a generator's ``return value`` by parsing its source
        (``warn_on_generator_with_return_value``), cached under a weak reference to the bound method;
        a new bound method per request dies with its request, and the source was parsed again about
        once per ``CONCURRENT_REQUESTS`` responses (4% of a ``fast`` crawl's profiled CPU)."""
        return self._id_response, self._id_failure

    @cached_property
    def _soft404(self) -> IdSoft404Middleware | None:
        """The soft-404 probe (None when a project turned the middleware off); looked up once."""
        return self.crawler.get_spider_middleware(IdSoft404Middleware)

    @cached_property
    def _signatures_wanted(self) -> bool:
        """Near-duplicates on and the ContentDuplicates pipeline enabled (read once)."""
        return signatures_wanted(self.crawler.settings)

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


def _header(response: Response, name: bytes) -> str | None:
    """A response header as text (validators are ASCII), or None."""
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None
