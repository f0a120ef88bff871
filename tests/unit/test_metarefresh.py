"""IdMetaRefreshMiddleware decides as Scrapy's MetaRefreshMiddleware, for any page in any encoding."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

from idcrawl.downloadermiddlewares.metarefresh import IdMetaRefreshMiddleware, may_refresh

URL = "http://example.com/notice/7"

#: Pieces of pages: refreshes in every spelling Scrapy reads, refresh-like text that is no refresh,
#: and text outside ASCII (U+017F, the long s, case-folds to "s" in a case-insensitive regex).
FRAGMENTS = [
    "<meta http-equiv='refresh' content='0;url=/front'>",
    '<META HTTP-EQUIV="Refresh" CONTENT="5; URL=http://example.com/other">',
    "<meta http-equiv=REFRESH content='200; url=/later'>",  # longer than METAREFRESH_MAXDELAY
    "<meta content='0;url=/x' http-equiv='refresh'>",
    "<meta http-equiv='refre\u017fh' content='0;url=/long-s'>",
    "<meta charset='utf-8'>",
    "<meta name='description' content='refresh your memory'>",
    "<script>var refresh = '<meta http-equiv=refresh content=0;url=/in-script>';</script>",
    "<noscript><meta http-equiv='refresh' content='0;url=/noscript'></noscript>",
    "<base href='http://example.com/base/'>",
    "<p>Ça coûte 5 € — żółć, 東京, Привет</p>",
    "<p>the page</p>",
    " " * 4100,  # pushes what follows past the first 4,096 characters Scrapy reads
]
ENCODINGS = ["utf-8", "cp1252", "iso-8859-2", "koi8-r", "utf-16", "utf-16-le", "shift_jis", "gb18030", "utf-7"]
BOMS = {"utf-8": b"\xef\xbb\xbf", "utf-16-le": b"\xff\xfe"}


_BUILT: dict[tuple[type, str], MetaRefreshMiddleware] = {}


def middleware(cls: type[MetaRefreshMiddleware], **values: Any) -> MetaRefreshMiddleware:
    key = (cls, repr(sorted(values.items())))  # a crawler per settings, built once: they are slow to make
    if key not in _BUILT:
        _BUILT[key] = cls.from_crawler(get_crawler(Spider, values))
    return _BUILT[key]


def decision(result: Response | Request, response: Response) -> Any:
    """What a middleware decided: pass the response on, or a redirect (its URL, reasons and meta)."""
    if result is response:
        return "response"
    assert isinstance(result, Request)
    return result.url, result.meta.get("redirect_reasons"), result.meta.get("redirect_times")


def both(response: Response, request: Request | None = None, **values: Any) -> tuple[Any, Any]:
    request = request or Request(URL)
    ours = middleware(IdMetaRefreshMiddleware, **values).process_response(request, response)
    scrapys = middleware(MetaRefreshMiddleware, **values).process_response(request, response)
    return decision(ours, response), decision(scrapys, response)


@st.composite
def pages(draw: st.DrawFn) -> tuple[bytes, str | None]:
    """A page's body and the charset of its Content-Type header (None: not given)."""
    text = "<html><head>" + "".join(draw(st.lists(st.sampled_from(FRAGMENTS), max_size=6))) + "</head></html>"
    encoding = draw(st.sampled_from(ENCODINGS))
    body = text.encode(encoding, errors="replace")
    if draw(st.booleans()) and encoding in BOMS:
        body = BOMS[encoding] + body
    header = draw(st.sampled_from([encoding, None, "utf-8"]))  # right, absent, or wrong
    return body, header


@settings(max_examples=600, derandomize=True, deadline=None)
@given(pages(), st.sampled_from([{}, {"METAREFRESH_IGNORE_TAGS": []}, {"METAREFRESH_MAXDELAY": 300}]))
def test_it_decides_every_page_as_scrapys_middleware(page: tuple[bytes, str | None], values: dict[str, Any]) -> None:
    body, charset = page
    headers = {"Content-Type": f"text/html; charset={charset}" if charset else "text/html"}
    ours, scrapys = both(HtmlResponse(URL, body=body, headers=headers), **values)
    assert ours == scrapys


def test_a_refresh_still_redirects() -> None:
    response = HtmlResponse(URL, body=b"<html><head><meta http-equiv='refresh' content='0;url=/front'></head></html>",
                            headers={"Content-Type": "text/html; charset=utf-8"})
    ours, scrapys = both(response)
    assert ours == scrapys == ("http://example.com/front", ["meta refresh"], 1)


def test_a_page_without_the_bytes_of_a_refresh_is_not_decoded() -> None:
    # the benchmark site's page: a <meta charset>, no refresh
    response = HtmlResponse(URL, body=b"<!doctype html><html><head><meta charset='utf-8'><title>7</title></head></html>",
                            headers={"Content-Type": "text/html; charset=utf-8"})
    assert not may_refresh(response)
    assert middleware(IdMetaRefreshMiddleware).process_response(Request(URL), response) is response
    assert response._cached_ubody is None
    assert both(response) == ("response", "response")


def test_other_codecs_and_byte_order_marks_go_through_scrapys_check() -> None:
    utf16 = "<html><meta http-equiv='refresh' content='0;url=/front'></html>".encode("utf-16")  # with its BOM
    assert may_refresh(HtmlResponse(URL, body=utf16))  # no ASCII "refre" in the bytes, yet a refresh
    assert both(HtmlResponse(URL, body=utf16)) == (("http://example.com/front", ["meta refresh"], 1),) * 2
    # UTF-7 ("+AHI-" is "r"): Scrapy does not decode a page as UTF-7, so there is no refresh either way
    plus = b"<html><meta http-equiv='+AHI-efresh' content='0;url=/front'></html>"
    response = HtmlResponse(URL, body=plus, headers={"Content-Type": "text/html; charset=utf-7"})
    assert both(response) == ("response", "response")


def test_requests_and_responses_scrapy_skips_are_skipped_alike() -> None:
    refresh = b"<meta http-equiv='refresh' content='0;url=/front'>"
    text = TextResponse(URL, body=refresh, headers={"Content-Type": "text/plain; charset=utf-8"})
    assert both(text) == ("response", "response")  # not HTML
    html = HtmlResponse(URL, body=refresh, headers={"Content-Type": "text/html; charset=utf-8"})
    assert both(html, Request(URL, meta={"dont_redirect": True})) == ("response", "response")
    assert both(html, Request(URL, method="HEAD")) == ("response", "response")
    assert both(html, METAREFRESH_ENABLED=True) == (("http://example.com/front", ["meta refresh"], 1),) * 2
