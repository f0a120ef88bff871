"""``IdMetaRefreshMiddleware``: Scrapy's MetaRefreshMiddleware, without decoding pages that cannot refresh.

Same decisions and settings as Scrapy's; why skipping is exact: docs/architecture.md, "Module notes".
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
