"""Bad input reaches the user as one line, not a traceback; every log record is made safe to print.

:class:`BadInputError`, the log filter :func:`install_log_filter` and the record factory
:class:`SafeRecords`. Why and when they are installed: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
import re
from typing import Any

from scrapy.exceptions import UsageError

from idcrawl.core.safetext import escape_text, mask_secrets, safe

__all__ = ["REFUSAL_LOGGER", "BadInputError", "SafeRecords", "install_log_filter"]

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


#: The logger name a refusal is shown under, whichever logger reported the failed start.
REFUSAL_LOGGER = "idcrawl"


class _OneLine(logging.Filter):
    """A record carrying a :class:`BadInputError` becomes its message, shown under idcrawl's logger
    (asyncio's "Task exception was never retrieved" reports it otherwise); any other passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        cause = _bad_input(record.exc_info[1] if record.exc_info else None)
        if cause is not None:
            record.msg, record.args = safe(cause), ()
            record.name = REFUSAL_LOGGER
            record.exc_info, record.exc_text = None, None
        return True


_FILTER = _OneLine()


def _multiline_safe(text: str) -> str:
    """``text`` with secrets masked and unprintable characters escaped, line breaks and tabs kept."""
    text = mask_secrets(text)
    if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return "".join(part if part in ("\n", "\t") else escape_text(part) for part in re.split(r"(\n|\t)", text))


class SafeRecords:
    """A log record factory that wraps another and makes each record safe to print.

    The message of an ``idcrawl`` logger becomes one printable line (its templates have no line
    break, so one can only come from a value: a name, a URL, site text); any other logger's keeps
    its line breaks (Scrapy's stats dump, an item) and has the rest escaped. Passwords of URLs are
    masked in every message and traceback. A record left as it was keeps its ``msg`` and ``args``.
    """

    def __init__(self, factory: Any) -> None:
        self.factory = factory

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = self.factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format: logging reports it as it always does
            return record
        one_line = record.name == "idcrawl" or record.name.startswith("idcrawl.")
        shown = safe(message) if one_line else _multiline_safe(message)
        if shown != message:
            record.msg, record.args = shown, ()
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            try:
                text = logging.Formatter().formatException(record.exc_info)
            except Exception:  # the handler's formatter meets it as it always did
                return record
            shown = _multiline_safe(text)
            if shown != text:
                record.exc_text = shown  # the traceback a formatter would write, made safe
        return record


def install_log_filter() -> None:
    """Idempotent: attach the one-line filter to the loggers that report crawl failures, and make
    every log record safe to print (:class:`SafeRecords`)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, SafeRecords):
        logging.setLogRecordFactory(SafeRecords(factory))
