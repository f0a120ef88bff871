"""``IdMetaRefreshMiddleware``: Scrapy's MetaRefreshMiddleware, without decoding pages that cannot refresh.

Scrapy's middleware decodes every HTML response (``response.text``), finds its
base URL and scans the first 4,096 characters for ``<meta http-equiv="refresh">``:
about 2.5% of the CPU of a ``fast`` id crawl, whose callbacks read the body as
bytes and never decode it. A refresh is found only in a ``<meta>`` tag whose
attributes, lower-cased, contain ``refresh`` (w3lib's ``get_meta_refresh``; older
w3lib versions match ``refresh`` with a case-insensitive regex). No character
outside ASCII lower-cases to, or case-folds to, any of ``r``, ``e``, ``f``, so the
decoded text can only have it where the body's bytes have ``refre`` (any case),
as long as the page's codec writes ASCII characters as their own bytes and
makes no ASCII character out of other bytes (:data:`ASCII_TRANSPARENT`: UTF-8
and the single-byte ISO-8859 and Windows code pages, the ones real pages use).
A body without those bytes in such a codec is passed on as it is, which is what
Scrapy's middleware would decide after decoding it; every other response (one
with those bytes, a byte-order mark of UTF-16 or UTF-32, another codec) goes
through Scrapy's middleware unchanged. Same decisions, same redirects, same
settings (``METAREFRESH_ENABLED``, ``METAREFRESH_IGNORE_TAGS``,
``METAREFRESH_MAXDELAY``).

The add-on swaps it in for Scrapy's at Scrapy's order (580), unless the project
lists either of them in ``DOWNLOADER_MIDDLEWARES``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import HtmlResponse
from w3lib.encoding import read_bom, resolve_encoding

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

__all__ = ["ASCII_TRANSPARENT", "IdMetaRefreshMiddleware", "may_refresh"]

#: ``refre`` in any ASCII case: the bytes every ``refresh`` of the decoded text comes from.
_REFRE = re.compile(rb"refre", re.IGNORECASE)

#: Codecs (as ``w3lib.encoding.resolve_encoding`` names them, which is how Scrapy decodes a page)
#: that write each ASCII character as its own byte and decode no other byte sequence to one.
ASCII_TRANSPARENT = frozenset(
    {"utf-8", "ascii", "latin-1", "koi8-r", "koi8-u"}
    | {f"cp125{n}" for n in range(9)}
    | {f"iso8859-{n}" for n in (*range(1, 12), *range(13, 17))}
)


def may_refresh(response: HtmlResponse) -> bool:
    """False if the response certainly has no meta refresh (see the module's docstring), True if it may."""
    body = response.body
    if _REFRE.search(body) is not None:
        return True
    # Scrapy decodes with the codec of a byte-order mark, else the response's encoding
    encoding = read_bom(body)[0] or response.encoding
    return resolve_encoding(encoding) not in ASCII_TRANSPARENT


class IdMetaRefreshMiddleware(MetaRefreshMiddleware):
    """Scrapy's MetaRefreshMiddleware that skips pages without the bytes of a refresh (:func:`may_refresh`)."""

    def process_response(  # Scrapy 2.18 passes ``spider``, 2.19 does not
        self, request: Request, response: Response, spider: Any = None
    ) -> Request | Response:
        if isinstance(response, HtmlResponse) and not may_refresh(response):
            return response
        if spider is None:
            return super().process_response(request, response)
        return super().process_response(request, response, spider)
