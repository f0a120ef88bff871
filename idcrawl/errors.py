"""Bad input reaches the user as one line, not a traceback.

A spider that refuses its arguments can only do so by raising from
``from_crawler``; Scrapy's crawler then lets asyncio report the exception
("Task exception was never retrieved") with a full traceback. An error raised
while the engine opens the spider (the dupefilter refusing its file) makes the
crawler's clean-up fail too ("Engine slot not assigned"), and that second
error is reported with the first as its context. For :class:`BadInputError`
all that is noise: the message already names the field and the value.

:func:`install_log_filter` attaches one filter to the loggers that report a
failed crawl (``asyncio``, ``scrapy.crawler``, ``twisted``). It is called when
a crawl starts, never at import time: by the ``idseq`` spider's
``update_settings`` (the crawler is being made) and by the ``IdCrawl``
add-on (for any spider), both before anything can raise a
:class:`BadInputError`. The filter touches only records whose exception is
a :class:`BadInputError`, or was raised while handling one: such a record
becomes the error's message alone (the exit status stays non-zero: Scrapy
marks the crawl as failed to bootstrap). Every other record passes unchanged.
"""

from __future__ import annotations

import logging

from scrapy.exceptions import UsageError

__all__ = ["BadInputError", "install_log_filter"]

#: The loggers that report a crawl that failed to start (asyncio with Scrapy 2.18 and 2.19).
_LOGGERS = ("asyncio", "scrapy.crawler", "twisted")
#: How far along ``__cause__`` / ``__context__`` a BadInputError is looked for.
_MAX_HOPS = 8


class BadInputError(UsageError):
    """Invalid spider arguments, job file or settings; the message is the whole story."""


def _bad_input(exc: BaseException | None) -> BadInputError | None:
    """``exc`` if it is a BadInputError, else the one it was raised while handling (or from), if any."""
    hops = 0
    while exc is not None and not isinstance(exc, BadInputError) and hops < _MAX_HOPS:
        exc, hops = exc.__cause__ or exc.__context__, hops + 1
    return exc if isinstance(exc, BadInputError) else None


class _OneLine(logging.Filter):
    """A record carrying a :class:`BadInputError` becomes its message; any other passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        cause = _bad_input(record.exc_info[1] if record.exc_info else None)
        if cause is not None:
            record.msg, record.args = str(cause), ()
            record.exc_info, record.exc_text = None, None
        return True


_FILTER = _OneLine()


def install_log_filter() -> None:
    """Idempotent: attach the one-line filter to the loggers that report crawl failures."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
