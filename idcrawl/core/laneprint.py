"""Scrapy's request fingerprint of an id URL, from its template, without canonicalising each URL.

Why that is exact, and how each template is checked against Scrapy's own fingerprint:
docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urlsplit

from w3lib.url import canonicalize_url

from idcrawl.core.templates import template_digits, template_ends

__all__ = ["PROBES", "TemplatePrint", "template_print"]

#: Ids every template is checked on: each leading digit, 1 to 20 digits.
PROBES: tuple[int, ...] = (
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 19, 42, 99, 100, 1000, 12345, 99999, 100000, 999999, 123456789,
    9999999999, 2**31, 2**53, 10**18, 99999999999999999999, 18446744073709551615, 98765432109876543210,
)


@dataclass(frozen=True, slots=True)
class TemplatePrint:
    """The fingerprint of a template's URLs: ``sha1(head + digits + tail)``."""

    before: str
    after: str
    head: bytes
    tail: bytes

    def of(self, url: str) -> bytes | None:
        """The fingerprint of ``url`` if it is ``before + ASCII digits + after``, else None."""
        digits = template_digits(url, self.before, self.after)
        if digits is None:
            return None
        return hashlib.sha1(self.head + digits.encode() + self.tail).digest()  # noqa: S324 (Scrapy's)


def template_print(template: str, fingerprint: Callable[[str], bytes | None]) -> TemplatePrint | None:
    """The :class:`TemplatePrint` of ``template`` (a ``str.format`` template with one ``{id}``),
    or None where its URLs must be fingerprinted one by one.

    ``fingerprint(url)``: the fingerprint the crawl's filter would compute for a GET of ``url``
    without body, or None if that request would not be ``url`` as given (Scrapy escaped it).
    """
    if sum(name is not None for _, name, _, _ in string.Formatter().parse(template)) != 1:
        return None
    before, after = template_ends(template)
    if not _id_in_place(before, after):
        return None
    urls = [template.format(id=probe) for probe in PROBES]
    digits = [template_digits(url, before, after) for url in urls]
    rendered = [r for r in digits if r is not None]
    if len(rendered) != len(urls):
        return None
    try:
        canonical = [canonicalize_url(url) for url in urls]
    except ValueError:
        return None
    # the canonical text around the digits: of ids 1 and 2, whose renderings differ in the last digit
    one, two = canonical[PROBES.index(1)], canonical[PROBES.index(2)]
    tail_len = len(_common_suffix(one, two))
    c_after = one[len(one) - tail_len:] if tail_len else ""
    c_before = one[:len(one) - tail_len - len(rendered[PROBES.index(1)])]
    if any(c != c_before + r + c_after for c, r in zip(canonical, rendered, strict=True)):
        return None
    head = ('{"body": "", "headers": {}, "method": "GET", "url": ' + json.dumps(c_before)[:-1]).encode()
    tail = (json.dumps(c_after)[1:] + "}").encode()
    made = TemplatePrint(before, after, head, tail)
    for url in urls:
        fp = made.of(url)
        if fp is None or fp != fingerprint(url):
            return None
    return made


def _id_in_place(before: str, after: str) -> bool:
    """The id in the path, or in the value of a query key used once; no ``%`` just before it."""
    if "%" in before[-2:] or "#" in before:
        return False
    parts = urlsplit(before + "1" + after)
    authority = f"{parts.scheme}://{parts.netloc}"
    if not parts.scheme or not parts.netloc or not before.startswith(authority):
        return False
    if "?" not in before:
        return True
    pair = before[before.rindex("?") + 1:].rsplit("&", 1)[-1]
    if "=" not in pair:
        return False  # the id is in a key
    # as canonicalize_url compares them: '+' is a space, escapes decoded
    keys = [_key(p) for p in parts.query.split("&")]
    return keys.count(_key(pair)) == 1


def _key(pair: str) -> bytes:
    return unquote_to_bytes(pair.split("=", 1)[0].replace("+", " "))


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    return a[len(a) - n:]
