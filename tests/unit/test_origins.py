"""A URL's origin cut without a parse (idcrawl.core.templates.url_origin) gives what a parse of the URL does."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from idcrawl.core.inputs import TargetError, check_url
from idcrawl.core.targets import parse_target
from idcrawl.core.templates import template_host, url_origin

URLS = ["http://Example.COM:80/1", "https://a.b/x?y=1", "http://u:p@[::1]:8/1", "HTTP://X.y#1", "http://x.y",
        "//x/1", "ht+tp://x/1", "http://\tx/1", "1http://x/1", "http://a/b://c/1", "ftp://x/1", "http://:80/1",
        "http://x:99999/1", "http://x:port/1", "http://a..b/1", "http://" + "a" * 64 + ".b/1", "http://[::1/1",
        "http://h\u00e9.x/1", "http://x y/1"]


@pytest.mark.parametrize("url", URLS)
def test_an_origin_has_the_scheme_and_host_of_its_url(url: str) -> None:
    origin = url_origin(url)
    if origin is not None:
        assert url.startswith(origin)
        assert _split(origin) == _split(url)


def _split(url: str) -> tuple[str, ...]:
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.netloc, parts.hostname or "", str(parts.port)
    except ValueError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("url", URLS)
def test_check_url_says_the_same_of_a_url_twice(url: str) -> None:
    problems = []
    for _ in range(2):  # the second answer comes from the origin's cache
        try:
            check_url("url", url, url)
            problems.append(None)
        except TargetError as exc:
            problems.append(str(exc))
    assert problems[0] == problems[1]


def test_templates_of_one_origin_have_its_host_and_others_their_own() -> None:
    assert url_origin("http://Example.COM:80/{id}") == "http://Example.COM:80"
    assert template_host("http://Example.COM:80/a/{id}", 5) == "example.com"
    assert template_host("http://h{id}.x/", 7) == "h7.x"  # the id in the host: per id
    assert template_host("http://h{{/{id}", 7) == "h{"


def test_targets_sharing_options_still_refuse_their_own_bad_keys() -> None:
    parse_target({"url": "http://a/{id}", "start": 1, "margin": 0, "max": 9})
    with pytest.raises(TargetError, match=r"margin.*needs max"):
        parse_target({"url": "http://b/{id}", "start": 1, "margin": 0})
    with pytest.raises(TargetError, match=r"start.*above max"):
        parse_target({"url": "http://c/{id}", "start": 10, "margin": 0, "max": 9})
