"""Bad input reaches the user as one line, not a traceback.

A spider that refuses its arguments can only do so by raising from
``from_crawler``; Scrapy's crawler then lets asyncio report the exception
with its task repr and a full traceback. For :class:`BadInputError` that is
noise: the message already names the field and the value. The filter below
rewrites exactly those records to the message alone (the exit status stays
non-zero: Scrapy marks the crawl as failed to bootstrap).
"""

from __future__ import annotations

import logging

from scrapy.exceptions import UsageError

__all__ = ["BadInputError", "install_log_filter"]


class BadInputError(UsageError):
    """Invalid spider arguments, job file or settings; the message is the whole story."""


class _OneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, BadInputError):
            record.msg, record.args = str(exc), ()
            record.exc_info, record.exc_text = None, None
        return True


_FILTER = _OneLine()


def install_log_filter() -> None:
    """Idempotent: attach the one-line filter to the loggers that report crawl failures."""
    for name in ("asyncio", "scrapy.crawler", "twisted"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
