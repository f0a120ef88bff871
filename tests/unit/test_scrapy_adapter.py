"""The Scrapy versions idcrawl supports, and ``idcrawl/_scrapy.py``, the one place that touches Scrapy internals.

``make test`` runs this module and the crawl tests twice: in ``.venv`` (the
latest Scrapy) and in ``.venv-floor`` (the floor of ``constraints-floor.txt``),
with ``IDCRAWL_EXPECT_SCRAPY`` set to the version that tier must be testing.

Where the adapter's calls are exercised by real crawls:
``wake_engine`` by every crawl (lanes freed by late outcomes), ``close_spider``
by ``test_limits_crawl.py::test_a_job_limit_closes_the_spider_with_its_rule``
and ``test_distributed_crawl.py``'s idle timeout, the slot jitter by
``tests/crawl/test_politeness_crawl.py``, the slot key and room by every crawl of several hosts
(``tests/crawl/test_crawl_core.py``), ``engine_busy`` by ``tests/integration/test_distributed_outage.py``,
``robots_parser`` by the robots.txt tests, ``feed_slots`` by
``tests/crawl/test_kill_soak.py`` and the emit-once tests, ``cancel_downloads_on_shutdown`` and
``TOO_LARGE_ERRORS`` by ``tests/crawl/test_bounds_crawl.py``.
"""

from __future__ import annotations

import ast
import asyncio
import os
import random
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import scrapy
import yaml
from packaging.requirements import Requirement
from packaging.version import Version
from scrapy.core.downloader import Slot
from scrapy.settings import Settings

from idcrawl import _scrapy
from idcrawl.core.politeness import lengthen_only

REPO = Path(__file__).resolve().parents[2]


def floor_version() -> Version:
    """The floor Scrapy that ``make test`` installs in .venv-floor (constraints-floor.txt)."""
    lines = [line.split("#", 1)[0].strip() for line in (REPO / "constraints-floor.txt").read_text().splitlines()]
    (pin,) = [Requirement(line) for line in lines if line and Requirement(line).name.lower() == "scrapy"]
    (spec,) = pin.specifier
    assert spec.operator == "==", pin
    return Version(spec.version)


def pyproject_scrapy() -> Requirement:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (scrapy_requirement,) = [Requirement(d) for d in dependencies if Requirement(d).name.lower() == "scrapy"]
    return scrapy_requirement


# -- the versions -------------------------------------------------------------------------


def test_the_floor_in_pyproject_is_the_floor_make_test_checks() -> None:
    floor = floor_version()
    (spec,) = pyproject_scrapy().specifier
    assert (spec.operator, Version(spec.version)) == (">=", floor), (str(spec), str(floor))


def test_the_zyte_stack_is_the_floor_series() -> None:
    """scrapinghub.yml's stack brings a Scrapy of the floor's series (the series tag, or a dated one of it)."""
    config = yaml.safe_load((REPO / "scrapinghub.yml").read_text())
    match = re.fullmatch(r"scrapy:(\d+)\.(\d+)(?:-\d{8})?", str(config["stack"]))
    assert match, config["stack"]
    floor = floor_version()
    assert (int(match[1]), int(match[2])) == floor.release[:2], (config["stack"], str(floor))


def test_the_crawls_run_the_scrapy_of_this_tier() -> None:
    """The crawl tests start ``sys.executable -m scrapy``: the same Scrapy as this process, the expected one."""
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "version"], capture_output=True, text=True, timeout=120, check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == scrapy.__version__, proc.stdout
    print(f"Scrapy {scrapy.__version__} from {Path(scrapy.__file__).parent} (python {sys.executable})")
    expected = os.environ.get("IDCRAWL_EXPECT_SCRAPY")
    if expected:
        assert scrapy.__version__ == expected
    assert pyproject_scrapy().specifier.contains(scrapy.__version__)


# -- the adapter --------------------------------------------------------------------------


def make_slot(delay: float, jitter: float) -> Slot:
    """A download slot of the installed Scrapy, as its downloader builds one."""
    if _scrapy.SLOT_HAS_JITTER:
        return Slot(1, delay, jitter)
    assert jitter in (0.0, 0.5)
    return Slot(1, delay, bool(jitter))


def test_the_feature_test_matches_the_installed_slot() -> None:
    assert (Version(scrapy.__version__) >= Version("2.19")) == _scrapy.SLOT_HAS_JITTER


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_slot_jitter_reads_what_the_downloader_set(jitter: float) -> None:
    assert _scrapy.slot_jitter(make_slot(2.0, jitter)) == jitter


@pytest.mark.parametrize("jitter", [0.0, 0.2, 0.5, 1.0])
def test_a_slot_set_to_lengthen_only_never_waits_less_than_the_gap(jitter: float) -> None:
    gap = 1.0
    slot = make_slot(0.0, 0.5)
    _scrapy.set_slot_delay(slot, *lengthen_only(gap, jitter))
    random.seed(12)  # Scrapy draws with the random module
    draws = [slot.download_delay() for _ in range(2000)]
    assert min(draws) >= gap - 1e-9
    assert max(draws) <= gap * (1 + jitter) + 1e-9
    assert sum(draws) / len(draws) == pytest.approx(gap * (1 + jitter / 2), rel=0.05)
    if _scrapy.SLOT_HAS_JITTER and jitter:
        assert max(draws) - min(draws) > jitter * gap / 2  # the spread is kept where Scrapy has one
    elif not _scrapy.SLOT_HAS_JITTER:
        assert set(draws) == {gap * (1 + jitter / 2)}  # before 2.19: the mean, every time


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_set_slot_delay_round_trips_the_jitters_every_version_has(jitter: float) -> None:
    slot = make_slot(1.0, 0.5 - jitter)
    _scrapy.set_slot_delay(slot, 3.0, jitter)
    assert (slot.delay, _scrapy.slot_jitter(slot)) == (3.0, jitter)


def test_wake_engine_schedules_the_engines_next_call() -> None:
    calls: list[str] = []
    nextcall = SimpleNamespace(schedule=lambda: calls.append("schedule"))
    _scrapy.wake_engine(SimpleNamespace(engine=SimpleNamespace(_slot=SimpleNamespace(nextcall=nextcall))))
    assert calls == ["schedule"]
    _scrapy.wake_engine(SimpleNamespace(engine=None))  # before the spider opens, after it closes
    _scrapy.wake_engine(SimpleNamespace(engine=SimpleNamespace(_slot=None)))
    assert calls == ["schedule"]


def test_the_engine_names_wake_engine_relies_on_exist() -> None:
    """``engine._slot.nextcall`` of the installed Scrapy (the fakes above would pass on any version)."""
    import inspect

    from scrapy.core import engine

    assert "self._slot" in inspect.getsource(engine.ExecutionEngine.__init__)
    assert "nextcall" in inspect.signature(engine._Slot.__init__).parameters
    assert callable(getattr(engine.CallLaterOnce, "schedule", None))


# -- stats --------------------------------------------------------------------------------


def test_stats_incrementer_gives_what_inc_value_gives_at_every_step() -> None:
    """The direct increment of a collector with Scrapy's own ``inc_value`` (the memory collector, a
    subclass such as the benchmarks') leaves the same keys and values as ``inc_value`` after each call."""
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    class Subclass(MemoryStatsCollector):
        pass

    rng = random.Random(18)
    for cls in (MemoryStatsCollector, Subclass):
        direct, reference = cls(get_crawler()), cls(get_crawler())
        inc = _scrapy.stats_incrementer(direct)
        assert inc is not direct.inc_value
        direct.set_value("a", 5)
        reference.set_value("a", 5)
        for _ in range(200):
            key, count = rng.choice("abc"), rng.randint(-2, 3)
            inc(key, count)
            reference.inc_value(key, count)
            assert direct.get_stats() == reference.get_stats()
        direct.set_stats({"b": 1})  # a new dict: the increments follow it
        inc("b")
        assert direct.get_stats() == {"b": 2}


def test_stats_incrementer_keeps_a_collectors_own_inc_value() -> None:
    """A collector that overrides ``inc_value`` (sends each increment somewhere, or drops it) gets it."""
    from scrapy.statscollectors import DummyStatsCollector, MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    sent: list[tuple[str, int]] = []

    class Sending(MemoryStatsCollector):
        def inc_value(self, key: str, count: int = 1, start: int = 0, spider: Any = None) -> None:
            sent.append((key, count))

    _scrapy.stats_incrementer(Sending(get_crawler()))("k", 2)
    assert sent == [("k", 2)]
    dummy = DummyStatsCollector(get_crawler())
    _scrapy.stats_incrementer(dummy)("k", 2)
    assert dummy.get_stats() == {}


# -- closing the spider -------------------------------------------------------------------


def test_close_spider_runs_the_engines_close_as_a_task() -> None:
    reasons: list[str] = []

    async def close_spider_async(*, reason: str = "cancelled") -> None:
        reasons.append(reason)

    crawler = SimpleNamespace(engine=SimpleNamespace(close_spider_async=close_spider_async))

    async def component() -> bool:
        scheduled = _scrapy.close_spider(crawler, "idcrawl_limit_PLmax")
        assert reasons == []  # not awaited: the caller goes on
        await asyncio.sleep(0)
        return scheduled

    assert asyncio.run(component()) is True
    assert reasons == ["idcrawl_limit_PLmax"]
    assert _scrapy.close_spider(SimpleNamespace(engine=None), "x") is False  # before open, after close


def test_the_engine_names_close_spider_relies_on_exist() -> None:
    import inspect

    from scrapy.core.engine import ExecutionEngine
    from scrapy.utils import defer

    assert inspect.iscoroutinefunction(ExecutionEngine.close_spider_async)
    assert "reason" in inspect.signature(ExecutionEngine.close_spider_async).parameters
    assert callable(defer._schedule_coro)


# -- engine idleness ----------------------------------------------------------------------


def fake_engine(
    *, active: int = 0, scraping: bool = False, inprogress: int = 0, queued: int = 0, delayed: int = 0
) -> SimpleNamespace:
    scheduler = type("Scheduler", (), {"__len__": lambda self: queued, "_delayed": [object()] * delayed})()
    return SimpleNamespace(
        downloader=SimpleNamespace(active={object() for _ in range(active)}),
        scraper=SimpleNamespace(slot=SimpleNamespace(is_idle=lambda: not scraping)),
        _slot=SimpleNamespace(inprogress={object() for _ in range(inprogress)}, scheduler=scheduler),
    )


@pytest.mark.parametrize(
    ("held", "busy"),
    [
        ({}, False),
        ({"active": 1}, True),
        ({"scraping": True}, True),
        ({"inprogress": 1}, True),
        ({"queued": 1}, True),
        ({"delayed": 1}, True),
    ],
)
def test_engine_busy_sees_a_request_wherever_the_engine_holds_it(held: dict[str, Any], busy: bool) -> None:
    assert _scrapy.engine_busy(SimpleNamespace(engine=fake_engine(**held))) is busy


def test_engine_busy_without_an_engine_or_a_slot() -> None:
    assert _scrapy.engine_busy(SimpleNamespace(engine=None)) is False
    engine = fake_engine()
    engine._slot = None
    engine.scraper.slot = None
    assert _scrapy.engine_busy(SimpleNamespace(engine=engine)) is False


def test_the_engine_names_engine_busy_relies_on_exist() -> None:
    import inspect

    from scrapy.core import engine, scraper
    from scrapy.core.downloader import Downloader

    assert "self.inprogress" in inspect.getsource(engine._Slot.__init__)
    assert "scheduler" in inspect.signature(engine._Slot.__init__).parameters
    assert "self.scraper" in inspect.getsource(engine.ExecutionEngine.__init__)
    assert "self.slot" in inspect.getsource(scraper.Scraper.__init__)
    assert callable(getattr(scraper.Slot, "is_idle", None))
    assert "self.active" in inspect.getsource(Downloader.__init__)


# -- download slots -----------------------------------------------------------------------


def fake_downloader(slots: dict[str, Slot], domain_concurrency: int = 8) -> SimpleNamespace:
    """A downloader with the installed Scrapy's own ``get_slot_key`` (hostname; meta first)."""
    from scrapy.core.downloader import Downloader

    downloader = SimpleNamespace(
        slots=slots, domain_concurrency=domain_concurrency, DOWNLOAD_SLOT=Downloader.DOWNLOAD_SLOT, ip_concurrency=0,
    )
    downloader.get_slot_key = lambda request: Downloader.get_slot_key(downloader, request)  # type: ignore[arg-type]
    return downloader


def test_slot_key_is_the_meta_slot_else_the_host() -> None:
    from scrapy import Request

    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=fake_downloader({})))
    assert _scrapy.slot_key(crawler, Request("http://a.example:8080/1")) == "a.example"
    assert _scrapy.slot_key(crawler, Request("http://a.example/1", meta={"download_slot": "mine"})) == "mine"


def test_download_slot_finds_the_downloaders_slot() -> None:
    slot = make_slot(1.0, 0.0)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=fake_downloader({"a.example": slot})))
    assert _scrapy.download_slot(crawler, "a.example") is slot
    assert _scrapy.download_slot(crawler, "b.example") is None
    assert _scrapy.download_slot(SimpleNamespace(engine=None), "a.example") is None


def test_slot_has_room_by_concurrency_delay_and_requests_on_their_way() -> None:
    from scrapy import Request

    free = make_slot(0.0, 0.0)
    free.concurrency = 2
    delayed = make_slot(1.0, 0.0)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=fake_downloader({"f": free, "d": delayed}, 3)))
    # a slot not made yet: the per-domain concurrency
    assert [_scrapy.slot_has_room(crawler, "new", n) for n in range(4)] == [True, True, True, False]
    # a free slot: its concurrency, counting active requests and those on their way
    assert [_scrapy.slot_has_room(crawler, "f", n) for n in range(3)] == [True, True, False]
    free.active.add(Request("http://f/1"))
    assert [_scrapy.slot_has_room(crawler, "f", n) for n in range(2)] == [True, False]
    # a slot with a delay: only while nothing waits on it
    assert _scrapy.slot_has_room(crawler, "d") is True
    assert _scrapy.slot_has_room(crawler, "d", 1) is False
    delayed.queue.append((Request("http://d/1"), None))
    assert _scrapy.slot_has_room(crawler, "d") is False


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_slot_wait_is_what_is_left_of_the_slots_shortest_delay(jitter: float) -> None:
    delayed, free = make_slot(2.0, jitter), make_slot(0.0, 0.0)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=fake_downloader({"d": delayed, "f": free})))
    assert _scrapy.slot_wait(crawler, "new") == 0.0  # not made yet
    assert _scrapy.slot_wait(crawler, "d") == 0.0  # no request yet
    assert _scrapy.slot_wait(crawler, "f") == 0.0  # no delay
    delayed.lastseen = _scrapy.SLOT_CLOCK() - 0.5  # a request left half a second ago, on the slot's clock
    shortest = 2.0 * (1 - _scrapy.slot_jitter(delayed))
    assert shortest - 0.5 - 0.2 < _scrapy.slot_wait(crawler, "d") <= shortest - 0.5
    delayed.lastseen -= 10
    assert _scrapy.slot_wait(crawler, "d") < 0


def test_the_slot_clock_is_the_downloaders() -> None:
    import inspect

    from scrapy.core.downloader import Downloader

    source = inspect.getsource(Downloader._process_queue)
    assert f"now = {_scrapy.SLOT_CLOCK.__name__}()" in source and "slot.lastseen = now" in source


def test_downloader_crowded_from_half_of_the_total_concurrency() -> None:
    from scrapy import Request

    downloader = fake_downloader({})
    downloader.active, downloader.total_concurrency = set(), 4
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=downloader))
    crowded = []
    for i in range(4):
        crowded.append(_scrapy.downloader_crowded(crawler))
        downloader.active.add(Request(f"http://a/{i}"))
    assert crowded == [False, False, True, True]


def test_slots_sequential_makes_new_slots_take_one_request() -> None:
    downloader = fake_downloader({}, 8)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=downloader))
    _scrapy.slots_sequential(crawler)
    assert (downloader.domain_concurrency, downloader.ip_concurrency) == (1, 0)  # per-IP stays off
    assert [_scrapy.slot_has_room(crawler, "new", n) for n in range(2)] == [True, False]
    downloader.ip_concurrency = 4
    _scrapy.slots_sequential(crawler)
    assert downloader.ip_concurrency == 1


def test_new_slot_delay_is_the_slots_entry_else_the_downloaders_delay() -> None:
    downloader = fake_downloader({})
    downloader.per_slot_settings = {"a.example": {"delay": 0.7}, "b.example": {"concurrency": 2}}
    downloader._delay = 0.2
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=downloader), settings=Settings({"DOWNLOAD_DELAY": 9}))
    assert _scrapy.new_slot_delay(crawler, "a.example") == 0.7
    assert _scrapy.new_slot_delay(crawler, "b.example") == 0.2
    assert _scrapy.new_slot_delay(crawler, "c.example") == 0.2
    del downloader._delay  # a Scrapy without it: DOWNLOAD_DELAY
    assert _scrapy.new_slot_delay(crawler, "c.example") == 9.0


def test_the_downloader_names_new_slot_delay_relies_on_exist() -> None:
    import inspect

    from scrapy.core.downloader import Downloader

    assert "self.per_slot_settings" in inspect.getsource(Downloader.__init__)
    source = inspect.getsource(Downloader)
    assert 'slot_settings.get("delay", self._delay)' in source or "self._delay" not in source


def test_the_downloader_names_the_slot_functions_rely_on_exist() -> None:
    import inspect

    from scrapy.core.downloader import Downloader

    source = inspect.getsource(Downloader.__init__)
    assert "self.slots" in source and "self.domain_concurrency" in source and "self.ip_concurrency" in source
    assert "self.active" in source and "self.total_concurrency" in source
    assert callable(getattr(Downloader, "get_slot_key", None))
    slot = make_slot(1.0, 0.0)
    assert (slot.active, len(slot.queue), slot.concurrency, slot.delay) == (set(), 0, 1, 1.0)


def test_before_download_awaits_the_hook_then_the_handler() -> None:
    import asyncio

    from scrapy import Request

    calls: list[str] = []

    async def handler_call(request: Request) -> str:
        calls.append(f"handler {request.url}")
        return "response"

    async def hook(request: Request) -> None:
        await asyncio.sleep(0)  # a hook that waits: the handler is called after it
        calls.append(f"hook {request.url}")

    handlers = SimpleNamespace(download_request_async=handler_call)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=SimpleNamespace(handlers=handlers)))
    _scrapy.before_download(crawler, hook)
    assert asyncio.run(handlers.download_request_async(Request("http://a.example/1"))) == "response"
    assert calls == ["hook http://a.example/1", "handler http://a.example/1"]


def test_before_download_calls_after_once_the_handler_is_done_even_when_it_fails() -> None:
    import asyncio

    import pytest
    from scrapy import Request

    calls: list[str] = []

    async def handler_call(request: Request) -> str:
        calls.append(f"handler {request.url}")
        if request.url.endswith("/2"):
            raise ConnectionError("refused")
        return "response"

    async def hook(request: Request) -> None:
        calls.append(f"hook {request.url}")

    handlers = SimpleNamespace(download_request_async=handler_call)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=SimpleNamespace(handlers=handlers)))
    _scrapy.before_download(crawler, hook, lambda request: calls.append(f"after {request.url}"))
    assert asyncio.run(handlers.download_request_async(Request("http://a.example/1"))) == "response"
    with pytest.raises(ConnectionError):
        asyncio.run(handlers.download_request_async(Request("http://a.example/2")))
    assert calls == ["hook http://a.example/1", "handler http://a.example/1", "after http://a.example/1",
                     "hook http://a.example/2", "handler http://a.example/2", "after http://a.example/2"]


def test_new_slot_concurrency_is_the_downloaders_choice() -> None:
    downloader = SimpleNamespace(per_slot_settings={"a": {"concurrency": 3}}, ip_concurrency=0,
                                 domain_concurrency=8, total_concurrency=16)
    crawler = SimpleNamespace(engine=SimpleNamespace(downloader=downloader))
    assert _scrapy.new_slot_concurrency(crawler, "a") == 3
    assert _scrapy.new_slot_concurrency(crawler, "b") == 8
    downloader.ip_concurrency = 2
    assert _scrapy.new_slot_concurrency(crawler, "b") == 2
    assert _scrapy.total_concurrency(crawler) == 16


def test_the_downloader_names_before_download_relies_on_exist() -> None:
    import inspect

    from scrapy.core.downloader import Downloader
    from scrapy.core.downloader.handlers import DownloadHandlers

    assert "self.handlers" in inspect.getsource(Downloader.__init__)
    for name in ("total_concurrency", "domain_concurrency", "ip_concurrency", "per_slot_settings"):
        assert f"self.{name}" in inspect.getsource(Downloader.__init__), name  # new_slot_concurrency's
    assert "self.handlers.download_request_async(request)" in inspect.getsource(Downloader._download)
    assert inspect.iscoroutinefunction(DownloadHandlers.download_request_async)


def shutdown_rig() -> tuple[Any, Any, list[str]]:
    """A crawler whose download handler waits until cancelled (or raises for ``/big``), and its engine's closes."""
    from scrapy.exceptions import DownloadCancelledError

    closed: list[str] = []

    async def handler_call(request: Any) -> str:
        if request.url.endswith("/big"):
            raise DownloadCancelledError("larger than download max size")
        await asyncio.Event().wait()  # a slow-loris answer: never done
        return "response"

    async def close_spider_async(*, reason: str = "cancelled") -> None:
        closed.append(reason)

    from collections import deque

    handlers = SimpleNamespace(download_request_async=handler_call)
    slots = {"a.example": SimpleNamespace(queue=deque())}
    downloader = SimpleNamespace(handlers=handlers, slots=slots)
    engine = SimpleNamespace(downloader=downloader, close_spider_async=close_spider_async)
    return SimpleNamespace(engine=engine), handlers, closed


def test_a_shutdown_cancels_the_downloads_in_flight_and_refuses_later_ones() -> None:
    from scrapy import Request

    crawler, handlers, closed = shutdown_rig()
    assert _scrapy.cancel_downloads_on_shutdown(crawler)
    assert _scrapy.cancel_downloads_on_shutdown(crawler)  # once: a second call changes nothing

    from twisted.internet.defer import Deferred

    queued: Deferred[Any] = Deferred()
    waiting: list[Any] = []
    queued.addErrback(waiting.append)
    crawler.engine.downloader.slots["a.example"].queue.append((Request("http://a.example/3"), queued))

    async def scenario() -> list[BaseException | str]:
        slow = asyncio.ensure_future(handlers.download_request_async(Request("http://a.example/1")))
        await asyncio.sleep(0.01)
        await crawler.engine.close_spider_async(reason="shutdown")
        later = handlers.download_request_async(Request("http://a.example/2"))
        return list(await asyncio.gather(slow, later, return_exceptions=True))

    results = asyncio.run(scenario())
    assert [type(result) for result in results] == [_scrapy.CancelledAtShutdown] * 2
    assert waiting[0].check(_scrapy.CancelledAtShutdown) and not crawler.engine.downloader.slots["a.example"].queue
    assert closed == ["shutdown"]


def test_other_closes_and_too_large_bodies_are_not_shutdown_cancels() -> None:
    from scrapy import Request

    crawler, handlers, closed = shutdown_rig()
    _scrapy.cancel_downloads_on_shutdown(crawler)

    async def scenario() -> BaseException | str:
        await crawler.engine.close_spider_async(reason="finished")  # a normal close waits for downloads as before
        (result,) = await asyncio.gather(handlers.download_request_async(Request("http://a.example/big")),
                                         return_exceptions=True)
        return result

    result = asyncio.run(scenario())
    assert isinstance(result, _scrapy.TOO_LARGE_ERRORS) and not isinstance(result, _scrapy.CancelledAtShutdown)
    assert closed == ["finished"]


def test_the_engine_names_cancel_downloads_on_shutdown_relies_on_exist() -> None:
    import inspect

    from scrapy.core.engine import ExecutionEngine
    from scrapy.exceptions import DownloadCancelledError

    assert 'self.close_spider_async(reason="shutdown")' in inspect.getsource(ExecutionEngine.stop_async)
    assert inspect.iscoroutinefunction(ExecutionEngine.close_spider_async)
    # what a body over DOWNLOAD_MAXSIZE raises in the HTTP/1.1 handler, whichever limit check cancels it
    from scrapy.core.downloader.handlers import http11

    source = inspect.getsource(http11)
    assert "raise DownloadCancelledError(warning_msg)" in source and "self._finished.cancel()" in source
    assert DownloadCancelledError in _scrapy.TOO_LARGE_ERRORS
    from scrapy.core.downloader import Downloader

    enqueue = inspect.getsource(Downloader._enqueue_request)
    assert "slot.queue.append((request, d))" in enqueue and "await maybe_deferred_to_future(d)" in enqueue


# -- robots.txt ---------------------------------------------------------------------------


def test_robots_parser_reads_the_middlewares_table() -> None:
    from scrapy import Spider
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import Deferred

    middleware = RobotsTxtMiddleware.from_crawler(get_crawler(Spider, {"ROBOTSTXT_OBEY": True}))
    parser = object()
    middleware._parsers.update({"done.example": parser, "failed.example": None, "pending.example": Deferred()})
    assert _scrapy.robots_parser(middleware, "done.example") is parser
    assert _scrapy.robots_parser(middleware, "failed.example") is None
    assert _scrapy.robots_parser(middleware, "pending.example") is None
    assert _scrapy.robots_parser(middleware, "never.example") is None


# -- feed exports -------------------------------------------------------------------------


def test_feed_slots_show_each_feed_with_its_storage_file_exporter_and_options(tmp_path: Path) -> None:
    from scrapy import Spider
    from scrapy.exporters import CsvItemExporter, JsonLinesItemExporter
    from scrapy.extensions.feedexport import FeedExporter, FileFeedStorage, StdoutFeedStorage
    from scrapy.utils.test import get_crawler

    path = str(tmp_path / "items.jsonl")
    feeds = {path: {"format": "jsonlines", "batch_item_count": 0}, "stdout:": {"format": "csv"}}
    crawler = get_crawler(Spider, {"FEEDS": feeds})
    exporter = FeedExporter.from_crawler(crawler)
    holder = SimpleNamespace(extensions=SimpleNamespace(middlewares=[object(), exporter]))
    assert _scrapy.has_feed_exporter(holder)
    assert _scrapy.feed_slots(holder) == []  # the exporter makes its slots when the spider opens
    exporter.open_spider(Spider("plain"))
    file_feed, stdout_feed = _scrapy.feed_slots(holder)
    assert isinstance(file_feed.storage, FileFeedStorage) and file_feed.storage.path == path
    assert isinstance(stdout_feed.storage, StdoutFeedStorage)
    assert (file_feed.exporter_class, stdout_feed.exporter_class) == (JsonLinesItemExporter, CsvItemExporter)
    assert file_feed.options["format"] == "jsonlines" and "batch_item_count" in file_feed.options
    assert file_feed.file is None  # opened with the first item


def test_no_feed_exporter_no_feed_slots() -> None:
    holder = SimpleNamespace(extensions=SimpleNamespace(middlewares=[object()]))
    assert not _scrapy.has_feed_exporter(holder)
    assert _scrapy.feed_slots(holder) == []
    assert _scrapy.feed_slots(SimpleNamespace(extensions=None)) == []


# -- one module -----------------------------------------------------------------------------


def scrapy_private_names() -> set[str]:
    """The Scrapy and Twisted private names the adapter relies on, read from its source: attributes
    (``engine._slot``), names read by ``getattr`` or as dict keys (``"_stats"``) and private imports
    (``from scrapy.utils.defer import _schedule_coro``), with the ones this test has always named."""
    tree = ast.parse((REPO / "idcrawl" / "_scrapy.py").read_text())
    own = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    names = {"_slot", "_Slot", "_parsers", "_schedule_coro", "_start"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("scrapy", "twisted"):
            names.update(alias.name for alias in node.names)
    return {name for name in names if re.fullmatch(r"_[A-Za-z]\w*", name) and name not in own}


def test_scrapy_private_names_appear_in_the_adapter_only() -> None:
    """The Scrapy private names idcrawl relies on (attributes, also read by ``getattr``) are used in ``_scrapy.py`` only:
    the ones named here anywhere in a line; those the adapter's source uses, as an attribute or a string, in a module
    that does not define that name itself; and no other module imports a private name or module of Scrapy or Twisted."""
    named = re.compile(r"\b_(?:slot|Slot|parsers|schedule_coro|start)\b")
    derived = scrapy_private_names()
    assert {"_slot", "_delay", "_log_shutdown", "_create_testcase", "_stats"} <= derived  # the walk read the adapter
    offenders = []
    for path in sorted((REPO / "idcrawl").rglob("*.py")):
        if path.name == "_scrapy.py":
            continue
        where = path.relative_to(REPO)
        source = path.read_text()
        offenders += [f"{where}:{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if named.search(line)]
        tree = ast.parse(source)
        own = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)}
        own |= {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
        for node in ast.walk(tree):
            if id(node) in in_fstrings:
                continue  # text of a stat name such as f"{STATS_PREFIX}_delayed"
            used = (node.attr if isinstance(node, ast.Attribute)
                    else node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
            if used in derived and used not in own:
                offenders.append(f"{where}:{node.lineno}: {used}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("scrapy", "twisted"):
                parts = [*(node.module or "").split("."), *(alias.name for alias in node.names)]
                if any(part.startswith("_") and not part.startswith("__") for part in parts):
                    offenders.append(f"{where}:{node.lineno}: from {node.module} import ...")
    assert offenders == []


def test_offline_crawler_has_its_settings_and_stats_and_no_engine() -> None:
    from scrapy import Spider

    crawler = _scrapy.offline_crawler(Spider, {"RETRY_TIMES": 7})
    assert crawler.settings.getint("RETRY_TIMES") == 7
    assert crawler.stats is not None
    crawler.stats.inc_value("x")
    assert crawler.stats.get_value("x") == 1
