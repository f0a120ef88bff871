"""A lane URL's fingerprint from its template equals Scrapy's request fingerprint, byte for byte."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler

from idcrawl.core.laneprint import PROBES, template_print
from idcrawl.dupefilters import IdDupeFilter
from idcrawl.requests import lane_request
from idcrawl.runtime import META_KEY

FINGERPRINTER = RequestFingerprinter()


def scrapys(url: str) -> bytes | None:
    request = Request(url)
    return FINGERPRINTER.fingerprint(request) if request.url == url else None


#: Pieces of templates around the id: escapes (complete, cut, of '/' and '?'), dot segments,
#: parameters, queries with the id's key once or twice (also as an escape or with '+'),
#: fragments, characters Scrapy escapes, digits.
HOSTS = ["http://example.com", "https://Example.COM:8443", "http://127.0.0.1:8080", "http://b\u00fccher.de"]
PATH = ["/", "/notice", "/a%41", "/%2f", "/%2F", "%", "%4", "/r%C3%A9", "/r\u00e9", "/.", "/..", "/./", "/../",
        ";p=1", ";", "/x y", "/7", "/00", "-", ".html", "/~u", "//", "/%7E"]
QUERY = ["?", "?id=", "?q=", "&id=", "&x=5", "&x=55555", "&id=9", "&%69d=3", "&i+d=1", "&a=b", "&a", "=", "+", "&",
         "%20", "%3"]
TAIL = ["", "/", "/view", ".html", "?x=1", "?b=2&a=1", "&z=1", "#top", "#", "/..", "/.", "%41", "?id=2", "&id=1",
        "?q=%E9", ";x"]


@st.composite
def templates(draw: st.DrawFn) -> str:
    host = draw(st.sampled_from(HOSTS))
    path = "".join(draw(st.lists(st.sampled_from(PATH), max_size=4)))
    query = "".join(draw(st.lists(st.sampled_from(QUERY), max_size=3)))
    field = draw(st.sampled_from(["{id}", "{id}", "{id:06d}", "{id:d}"]))
    tail = "".join(draw(st.lists(st.sampled_from(TAIL), max_size=3)))
    return host + path + query + field + tail


@settings(max_examples=1500, derandomize=True, deadline=None)
@given(template=templates(), ids=st.lists(st.integers(min_value=0, max_value=10**20), min_size=1, max_size=8))
def test_an_accepted_template_fingerprints_every_id_as_scrapy_does(template: str, ids: list[int]) -> None:
    made = template_print(template, scrapys)
    if made is None:
        return
    for id_ in ids:
        url = template.format(id=id_)
        assert made.of(url) == scrapys(url), (template, id_)


def test_the_usual_templates_are_accepted() -> None:
    for template in ("http://example.com/notice/{id}", "https://example.com/a/{id}/view?lang=en",
                     "http://example.com/show.php?id={id}&lang=en", "http://example.com/p/{id:08d}.html",
                     "http://127.0.0.1:8080/notice/{id}#main", "http://example.com/b?z=1&a={id}&c=%41"):
        made = template_print(template, scrapys)
        assert made is not None, template
        for id_ in (*PROBES, 5, 77, 31337):
            assert made.of(template.format(id=id_)) == scrapys(template.format(id=id_))


def test_templates_whose_canonical_url_depends_on_more_than_the_digits_are_refused() -> None:
    for template in (
        "http://example.com/a%{id}",  # the id's first digits would be an escape
        "http://example.com/a%4{id}",
        "http://example.com/?x={id}&x=5",  # the key twice: sorting by value moves the id
        "http://example.com/?x={id}&%78=5",  # the same key, escaped
        "http://example.com/?{id}=a",  # the id in a key
        "http://example.com/{id}/..",  # the id's segment resolved away
        "http://example.com/#{id}",  # the fragment: not part of the fingerprint
        "http://example{id}.com/",  # the host
        "http://example.com/{id}/{id}",  # two ids
        "http://example.com/{id:x}",  # not decimal digits
    ):
        assert template_print(template, scrapys) is None, template


def test_urls_that_are_not_the_templates_digits_are_not_fingerprinted() -> None:
    made = template_print("http://example.com/n/{id}.html", scrapys)
    assert made is not None
    for url in ("http://example.com/n/.html", "http://example.com/n/12a.html", "http://example.com/n/\u0661.html",
                "http://example.com/n/12.htm", "http://example.com/m/12.html"):
        assert made.of(url) is None


def test_a_fingerprint_that_disagrees_on_any_probe_refuses_the_template() -> None:
    def off_by_one(url: str) -> bytes | None:
        fp = scrapys(url)
        return b"x" * 20 if url.endswith("/99999") else fp

    assert template_print("http://example.com/n/{id}", off_by_one) is None
    assert template_print("http://example.com/n/{id}", scrapys) is not None


# -- in the filter --------------------------------------------------------------------------


class _Target:
    def __init__(self, name: str, url: str) -> None:
        self.name, self.url = name, url

    def url_for(self, id_: int) -> str:
        return self.url.format(id=id_)


class _Frontier:
    def __init__(self, *targets: _Target) -> None:
        self.targets = {target.name: target for target in targets}


class _Runtime:
    def __init__(self, *targets: _Target) -> None:
        self.frontier = _Frontier(*targets)


class _Dispatch:
    def __init__(self, target: _Target, id_: int) -> None:
        self.lane, self.id, self.target = f"{target.name}:asc", id_, target


def _filter(monkeypatch, *targets: _Target, **settings: object) -> IdDupeFilter:
    crawler = get_crawler(settings_dict=settings)
    runtime = _Runtime(*targets)
    monkeypatch.setattr("idcrawl.dupefilters.runtime_of", lambda _crawler: runtime)
    return IdDupeFilter(crawler, "set")


def _request(target: _Target, id_: int, **replace: object) -> Request:
    request = lane_request(_Dispatch(target, id_), callback=lambda r: None, errback=lambda f: None)  # type: ignore[arg-type]
    return request.replace(**replace) if replace else request


def test_the_filter_gives_lane_requests_scrapys_fingerprints(monkeypatch) -> None:
    notice = _Target("notice", "http://example.com/notice/{id}")
    query = _Target("query", "http://example.com/show?id={id}&a=1")
    odd = _Target("odd", "http://example.com/?x={id}&x=5")  # refused: Scrapy's fingerprinter for each
    dupefilter = _filter(monkeypatch, notice, query, odd)
    for target in (notice, query, odd):
        for id_ in (1, 2, 5, 10, 999, 123456):
            for request in (_request(target, id_), _request(target, id_, method="POST"),
                            _request(target, id_, body=b"x"), _request(target, id_, url=target.url_for(id_) + "?v=1"),
                            _request(target, id_, meta={META_KEY: {"target": target.name}, "verbatim_url": True})):
                assert dupefilter._fingerprint(request) == FINGERPRINTER.fingerprint(request), (request, request.meta)
    assert dupefilter._prints is not None
    assert dupefilter._prints["notice"] is not None and dupefilter._prints["query"] is not None
    assert dupefilter._prints["odd"] is None


class _OtherFingerprinter(RequestFingerprinter):
    def fingerprint(self, request: Request) -> bytes:
        return b"o" * 20


def test_another_fingerprinter_is_asked_for_every_request(monkeypatch) -> None:
    notice = _Target("notice", "http://example.com/notice/{id}")
    dupefilter = _filter(monkeypatch, notice, REQUEST_FINGERPRINTER_CLASS=_OtherFingerprinter)
    assert dupefilter._prints is None
    assert dupefilter._fingerprint(_request(notice, 7)) == b"o" * 20
