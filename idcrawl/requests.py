"""The lane request: what is sent for one id, and what its failure means.

:meth:`idcrawl.spiders.idseq.IdSeqSpider.make_id_request` builds it with
:func:`lane_request`, passing its own callbacks (spider methods: requests are
serialised with their callbacks by name, into ``JOBDIR`` and, for retries,
into Redis). A site spider that needs headers, cookies or more meta overrides
that hook and changes what ``super().make_id_request(dispatch)`` returns.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from idcrawl._scrapy import TOO_LARGE_ERRORS, CancelledAtShutdown
from idcrawl.core.lanes import Outcome
from idcrawl.runtime import META_KEY, SCOPE_KEY

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from twisted.python.failure import Failure

    from idcrawl.core.frontier import Dispatch
    from idcrawl.core.scope import UrlRecord

__all__ = [
    "CONDITIONAL_KEY", "HANDLED_STATUSES", "RedirectedAsLink", "RedirectedOffsite", "failure_outcome",
    "failure_reason", "lane_request", "outlink_request",
]

logger = logging.getLogger(__name__)

#: Statuses handed to the callback instead of being dropped by HttpErrorMiddleware
#: (3xx stay out so that redirects are still followed).
HANDLED_STATUSES = list(range(400, 600))
#: ``request.meta`` key of a conditional revisit of a found page (its validators were sent): a 304
#: answering it means "not modified" (:mod:`idcrawl.core.pagebook`).
CONDITIONAL_KEY = "idcrawl_conditional"
#: The message of the IgnoreRequest raised by Scrapy's RobotsTxtMiddleware.
_ROBOTS_FORBIDDEN = "Forbidden by robots.txt"


class RedirectedAsLink(IgnoreRequest):
    """A crawl-scope page's redirect not followed (``IdRedirectsMiddleware``): its target was offered to
    the URL queue as a link, and is out of scope or fetched once by the queue (docs/scope.md)."""


class RedirectedOffsite(IgnoreRequest):
    """An id page redirected to another host, not followed (``IdRedirectsMiddleware``): the id is ``missing``."""


def lane_request(
    dispatch: Dispatch, *, callback: Callable[..., Any], errback: Callable[..., Any],
    validators: Mapping[str, str] | None = None,
) -> Request:
    """The request for one dispatched id: never filtered, every status to ``callback``, no Scrapy retries.

    ``request.meta[META_KEY]`` carries the lane, id, target and attempt that the
    outcome is recorded under. ``validators``: the conditional headers of a revisit of a found page
    (``If-None-Match``, ``If-Modified-Since``); its 304 goes to ``callback`` too, and Scrapy's HTTP
    cache stays out of it (``dont_cache``: its own validators would answer instead of the site).
    """
    meta: dict[str, Any] = {
        META_KEY: {"lane": dispatch.lane, "id": dispatch.id, "target": dispatch.target.name, "attempt": 1},
        "handle_httpstatus_list": HANDLED_STATUSES,
        "dont_retry": True,  # IdAttemptsMiddleware retries lane requests, with a cool-down
    }
    if validators:
        meta[CONDITIONAL_KEY] = True
        meta["handle_httpstatus_list"] = [304, *HANDLED_STATUSES]
        meta["dont_cache"] = True
    return Request(
        dispatch.target.url_for(dispatch.id),
        callback=callback,
        errback=errback,
        dont_filter=True,
        headers=dict(validators) if validators else None,
        meta=meta,
    )


def outlink_request(record: UrlRecord, *, callback: Callable[..., Any], errback: Callable[..., Any],
                    refetch: bool = False) -> Request:
    """The request for a crawl-scope URL taken from the queue (``record``). ``request.meta[SCOPE_KEY]``
    names its URL and, found before, its stored signature (``checksum``: a 200 with the same one is no
    news) and WARC capture (``capture``: what a revisit record refers to); the validators of its last
    200 make it conditional (``If-None-Match``, ``If-Modified-Since``): a 304 goes to ``callback`` and
    means "not modified" (the stored signature stays), Scrapy's HTTP cache out of it as for id pages;
    ``refetch``: a forced unconditional refetch (:func:`idcrawl.core.scope.url_body_due`), no validators."""
    info: dict[str, Any] = {"url": record.url}
    meta: dict[str, Any] = {SCOPE_KEY: info}
    headers: dict[str, str] = {}
    if record.checksum is not None:
        info["checksum"] = record.checksum
        if record.capture is not None:
            info["capture"] = list(record.capture)
        if record.etag and not refetch:
            headers["If-None-Match"] = record.etag
        if record.last_modified and not refetch:
            headers["If-Modified-Since"] = record.last_modified
    if headers:
        meta[CONDITIONAL_KEY] = True
        meta["handle_httpstatus_list"] = [304]
        meta["dont_cache"] = True
    return Request(record.url, callback=callback, errback=errback, dont_filter=True, headers=headers or None,
                   meta=meta)


def failure_outcome(failure: Failure) -> Outcome | None:
    """The outcome of a lane request that got no response: ``disallowed`` by robots.txt, ``missing`` when
    redirected to another host, None (undecided: fetched again on resume) when cancelled at shutdown,
    else ``failed`` (a body over ``DOWNLOAD_MAXSIZE`` among them)."""
    exc = failure.value
    if isinstance(exc, CancelledAtShutdown):
        return None
    if isinstance(exc, RedirectedOffsite):
        return Outcome.MISSING
    if isinstance(exc, IgnoreRequest) and str(exc) == _ROBOTS_FORBIDDEN:
        return Outcome.DISALLOWED
    logger.debug("idcrawl: %s failed: %r", failure.request.url, exc)  # type: ignore[attr-defined]
    return Outcome.FAILED


def failure_reason(failure: Failure) -> str | None:
    """Why a lane request's failure has its outcome, for the stat ``idcrawl/outcome/<reason>``; None: no
    reason of its own (a download error, robots.txt)."""
    exc = failure.value
    if isinstance(exc, RedirectedOffsite):
        return "redirected_offsite"
    if isinstance(exc, CancelledAtShutdown):
        return "cancelled_at_shutdown"
    if isinstance(exc, TOO_LARGE_ERRORS):
        return "too_large"
    return None
