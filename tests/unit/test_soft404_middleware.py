"""IdSoft404Middleware without a reactor: probes first, responses held until the probe is settled,
judged in arrival order, learned pages compared; and the lane request and page text it relies on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from types import SimpleNamespace
from typing import Any

from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from idcrawl.core.frontier import Dispatch
from idcrawl.core.targets import parse_target
from idcrawl.requests import HANDLED_STATUSES, lane_request
from idcrawl.responses import page_signature, page_text
from idcrawl.runtime import META_KEY
from idcrawl.spidermiddlewares.soft404 import PROBE_KEY, IdSoft404Middleware
from idcrawl.spiders.idseq import IdSeqSpider

NOT_FOUND = "<html><body><h1>Notice {id} could not be found</h1><p>Check the number and try again or search the register.</p></body></html>"
REAL = "<html><body><h1>Procurement notice {id}</h1><p>Road bridge maintenance for the school district and more words.</p></body></html>"


def middleware(**targets: str | None) -> tuple[IdSoft404Middleware, Any]:
    """A middleware over a stand-in spider whose runtime has ``targets`` (name -> soft404_probe id)."""
    parsed = {}
    for name, probe in targets.items():
        raw = {"name": name, "url": f"https://{name}.example/notice/{{id}}", "start": 1}
        if probe is not None:
            raw["soft404_probe"] = probe
        parsed[name] = parse_target(raw)
    spider = SimpleNamespace(
        runtime=SimpleNamespace(frontier=SimpleNamespace(targets=parsed)),
        probe_response=lambda response: None,
        probe_failure=lambda failure: None,
    )
    crawler = get_crawler(IdSeqSpider, {"RETRY_TIMES": 1})
    crawler.spider = spider  # type: ignore[assignment]
    mw = IdSoft404Middleware.from_crawler(crawler)
    # a stand-in runtime (the real one is found with runtime_of(crawler)): its targets are all the probe reads
    mw._runtime = lambda: getattr(spider, "runtime", None)  # type: ignore[method-assign]
    return mw, spider


def lane_response(target: str, id_: int, body: str) -> HtmlResponse:
    request = Request(f"https://{target}.example/notice/{id_}", meta={META_KEY: {"target": target, "id": id_}})
    return HtmlResponse(request.url, body=body.format(id=id_).encode(), encoding="utf-8", request=request)


def probe_response(request: Request, status: int = 200) -> HtmlResponse:
    return HtmlResponse(request.url, status=status, body=NOT_FOUND.format(id=999).encode(), encoding="utf-8",
                        request=request)


def started(mw: IdSoft404Middleware, own: list[Any]) -> list[Any]:
    async def spider_start() -> AsyncIterator[Any]:
        for thing in own:
            yield thing

    async def collect() -> list[Any]:
        return [thing async for thing in mw.process_start(spider_start())]

    return asyncio.run(collect())


def judged(seen: list[int]) -> Any:
    def judge(response: Response) -> Iterable[Any]:
        seen.append(response.meta[META_KEY]["id"])
        return [response.meta[META_KEY]["id"]]

    return judge


def test_probes_go_before_the_spiders_own_start_requests() -> None:
    mw, spider = middleware(reg="999", plain=None)
    own = Request("https://elsewhere.example/")
    out = started(mw, [own])
    assert [r.url for r in out] == ["https://reg.example/notice/999", own.url]
    probe = out[0]
    assert probe.meta[PROBE_KEY] == "reg" and probe.meta["dont_retry"] is True
    assert probe.callback == spider.probe_response and probe.errback == spider.probe_failure


def test_a_spider_that_is_not_an_id_crawl_passes_through() -> None:
    mw, spider = middleware()
    del spider.runtime
    own = Request("https://elsewhere.example/")
    assert started(mw, [own]) == [own]


def test_responses_wait_for_their_targets_probe_and_are_judged_in_arrival_order() -> None:
    mw, _ = middleware(reg="999", plain=None)
    probe = started(mw, [])[0]
    assert not mw.hold(lane_response("plain", 3, REAL))  # a target without a probe never waits
    for id_ in (5, 3, 4):
        assert mw.hold(lane_response("reg", id_, NOT_FOUND if id_ == 4 else REAL))
    seen: list[int] = []
    assert list(mw.answered(probe_response(probe), judged(seen))) == [5, 3, 4]
    assert seen == [5, 3, 4]
    assert not mw.hold(lane_response("reg", 6, REAL))  # settled: judged at once
    target = mw._runtime().frontier.targets["reg"]
    assert mw.is_soft404(lane_response("reg", 4, NOT_FOUND), target)
    assert not mw.is_soft404(lane_response("reg", 5, REAL), target)
    assert mw.stats.get_value("idcrawl/soft404/probes/reg") == "learned"
    assert mw.stats.get_value("idcrawl/soft404/learned_missing") == 1


def test_a_probe_answered_with_a_retryable_status_is_retried_then_given_up() -> None:
    mw, _ = middleware(reg="999")
    probe = started(mw, [])[0]
    assert mw.hold(lane_response("reg", 1, REAL))
    seen: list[int] = []
    retry = list(mw.answered(probe_response(probe, 503), judged(seen)))
    assert len(retry) == 1 and isinstance(retry[0], Request) and seen == []
    assert list(mw.answered(probe_response(retry[0], 503), judged(seen))) == [1]  # RETRY_TIMES = 1
    assert mw.stats.get_value("idcrawl/soft404/probes/reg") == "failed"
    assert not mw.is_soft404(lane_response("reg", 2, NOT_FOUND), mw._runtime().frontier.targets["reg"])


def test_the_lane_request_of_one_id() -> None:
    target = parse_target({"name": "reg", "url": "https://reg.example/notice/{id:05d}", "start": 1})

    def callback(response: Response) -> None: ...

    def errback(failure: Any) -> None: ...

    request = lane_request(Dispatch(target, "reg:asc", 42), callback=callback, errback=errback)
    assert request.url == "https://reg.example/notice/00042"
    assert request.dont_filter and request.callback is callback and request.errback is errback
    assert request.meta[META_KEY] == {"lane": "reg:asc", "id": 42, "target": "reg", "attempt": 1}
    assert request.meta["handle_httpstatus_list"] == HANDLED_STATUSES and request.meta["dont_retry"] is True


def test_page_text_is_the_visible_text_and_binary_bodies_have_none() -> None:
    html = lane_response("reg", 1, "<html><head><script>var x;</script></head><body><p>Hello there</p></body></html>")
    assert page_text(html) == "Hello there"
    assert page_text(html) is page_text(html)  # extracted once per response
    binary = Response("https://reg.example/notice/2", body=b"\x00\x01")
    assert page_text(binary) is None and page_signature(binary) is None
    assert page_signature(html) is not None
