"""The lane requests the idseq spider builds share one callback and one errback, which Scrapy checks once
and which still serialise by name (JOBDIR, a fleet's retries)."""

from __future__ import annotations

import warnings

import scrapy.utils.misc
from scrapy.utils.request import request_from_dict
from scrapy.utils.test import get_crawler

from idcrawl.core.frontier import Dispatch
from idcrawl.core.targets import parse_target
from idcrawl.spiders.idseq import IdSeqSpider


def spider() -> IdSeqSpider:
    crawler = get_crawler(IdSeqSpider, {"IDCRAWL_STATE": False})
    made = IdSeqSpider.from_crawler(crawler, url="https://reg.example/notice/{id}", start="1")
    assert isinstance(made, IdSeqSpider)
    return made


def test_every_lane_request_holds_the_same_bound_callbacks() -> None:
    made = spider()
    target = parse_target({"name": "reg", "url": "https://reg.example/notice/{id}", "start": 1})
    first, second = (made.make_id_request(Dispatch(target, "reg:asc", id_)) for id_ in (1, 2))
    assert first.callback is second.callback and first.errback is second.errback
    assert first.callback == made._id_response and first.errback == made._id_failure


def test_scrapys_generator_check_parses_the_callback_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    made = spider()
    target = parse_target({"name": "reg", "url": "https://reg.example/notice/{id}", "start": 1})
    parsed: list[str] = []
    real = scrapy.utils.misc.inspect.getsource

    def counting(obj: object) -> str:
        parsed.append(repr(obj))  # not obj: a reference would keep the bound method, and its cache entry, alive
        return real(obj)  # type: ignore[arg-type]

    monkeypatch.setattr(scrapy.utils.misc.inspect, "getsource", counting)
    for id_ in range(1, 201):  # each request dropped before the next: a per-request bound method would die too
        request = made.make_id_request(Dispatch(target, "reg:asc", id_))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and it warns of nothing
            scrapy.utils.misc.warn_on_generator_with_return_value(made, request.callback)  # what the scraper calls
        del request
    assert len(parsed) <= 1  # parsed once (none if an earlier test of this process parsed it already)


def test_a_lane_request_still_serialises_with_its_callbacks_by_name() -> None:
    made = spider()
    target = parse_target({"name": "reg", "url": "https://reg.example/notice/{id}", "start": 1})
    request = made.make_id_request(Dispatch(target, "reg:asc", 7))
    made.__dict__["_soft404"] = None  # looked up from the engine, which this test has not got
    data = request.to_dict(spider=made)
    assert (data["callback"], data["errback"]) == ("_id_response", "_id_failure")
    again = request_from_dict(data, spider=made)
    assert again.callback == made._id_response and again.errback == made._id_failure
