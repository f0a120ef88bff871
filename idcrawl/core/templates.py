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
    "url_origin",
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


#: a letters-only scheme, ``://`` and the host part, followed by a ``/``, ``?`` or ``#``
_ORIGIN = re.compile(r"[A-Za-z]+://[^/?#]*(?=[/?#])")
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


def template_host(template: str, id_: int) -> str:
    """The host name of a template's URL for ``id_`` (asked once per lane request: parsed once).

    When the template's fields come after its host (``http://host/...{id}``, the usual case) the
    host is the same for every id: parsed once per origin (:func:`url_origin`), not once per template.
    """
    origin = url_origin(template)
    if origin is not None and "{" not in origin and "}" not in origin:
        return _origin_hostname(origin)
    return _any_template_host(template, id_)


def url_origin(url: str) -> str | None:
    """``scheme://host[:port]``, the start of ``url`` that decides its scheme, host and port, when it can be
    cut without a parse (a letters-only scheme, printable ASCII without spaces, a ``/``, ``?`` or ``#`` after
    the host); None otherwise. ``urlsplit`` gives it the same scheme, netloc, host and port as ``url``."""
    match = _ORIGIN.match(url)
    if match is None:
        return None
    origin = match.group()
    return origin if origin.isascii() and origin.isprintable() and " " not in origin else None


@functools.lru_cache(maxsize=4096)
def _origin_hostname(origin: str) -> str:
    return urlsplit(origin).hostname or ""


@functools.lru_cache(maxsize=4096)
def _any_template_host(template: str, id_: int) -> str:
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
