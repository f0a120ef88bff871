"""URL template arithmetic: a target's ``{id}`` template against URLs (the id in a URL, the literal
text around the field, a page's template from its last number) and hosts compared."""

from __future__ import annotations

import functools
import re
import string
from urllib.parse import urlsplit

from idcrawl.core.lanes import MAX_ID

__all__ = [
    "id_in_template",
    "same_host",
    "template_digits",
    "template_ends",
    "template_host",
    "url_template",
]


_LAST_NUMBER = re.compile(r"[0-9]+(?=[^0-9]*$)")


def url_template(url: str) -> tuple[str, int] | None:
    """A template and an id for one page's ``url``: its last run of ASCII digits becomes ``{id}`` (braces
    around it escaped), or None when the URL has no digits (``scrapy parse``/``check`` of an id spider
    given a page without ``-a url=``)."""
    match = _LAST_NUMBER.search(url)
    if match is None or len(match.group()) > 20 or int(match.group()) > MAX_ID:
        return None
    before, after = (text.replace("{", "{{").replace("}", "}}") for text in (url[:match.start()], url[match.end():]))
    return before + "{id}" + after, int(match.group())


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_host(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    host = host.removeprefix("www.")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        port = None  # a scheme's own port: http <-> https on one host is the same host
    return host, port


def same_host(a: str, b: str) -> bool:
    """Do two URLs point at the same host: equal host names once a leading ``www.`` is dropped (``www.x`` and
    ``x`` are one site), and equal ports where a port other than the scheme's own is given."""
    return _origin_host(a) == _origin_host(b)


def id_in_template(template: str, url: str) -> int | None:
    """The id (<= MAX_ID) whose URL under ``template`` is exactly ``url``, or None; bounds aside."""
    middle = template_digits(url, *template_ends(template))
    if middle is None or len(middle) > 20:
        return None
    id_ = int(middle)
    if id_ > MAX_ID:
        return None
    return id_ if template.format(id=id_) == url else None


@functools.lru_cache(maxsize=4096)
def template_host(template: str, id_: int) -> str:
    """The host name of a template's URL for ``id_`` (asked once per lane request: parsed once)."""
    return urlsplit(template.format(id=id_)).hostname or ""


def template_digits(url: str, before: str, after: str) -> str | None:
    """The ASCII digits ``url`` has between a template's literal text ``before`` and ``after``
    (:func:`template_ends`), or None when it is not ``before + digits + after``."""
    if len(url) <= len(before) + len(after) or not (url.startswith(before) and url.endswith(after)):
        return None
    digits = url[len(before):len(url) - len(after)]
    return digits if digits.isascii() and digits.isdigit() else None


@functools.lru_cache(maxsize=4096)
def template_ends(template: str) -> tuple[str, str]:
    """The literal text before and after a template's one ``{id}`` field, as ``str.format``
    renders it (``{{`` and ``}}`` are one brace)."""
    before: list[str] = []
    after: list[str] = []
    seen_field = False
    for literal, field_name, _, _ in string.Formatter().parse(template):
        (after if seen_field else before).append(literal)
        seen_field = seen_field or field_name is not None
    return "".join(before), "".join(after)
