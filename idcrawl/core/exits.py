"""The exit status of a crawl, from its finish reason: the one table (docs/reference/finish-reasons.md).

A normal completion (the job ran to its end or to a bound the user set) exits 0; every other
reason exits non-zero: the reasons idcrawl knows get a status of their own (``sysexits.h``
codes where one fits, ``128 + signal`` for a shutdown), any other reason :data:`OTHER`.
The Spidermon finish-reason check takes its default from :func:`is_normal` too.
"""

from __future__ import annotations

import signal
from typing import Final

__all__ = [
    "DID_NOT_START", "EXIT_STATUSES", "NORMAL_PREFIXES", "NORMAL_REASONS", "OTHER", "SHUTDOWN", "exit_status",
    "is_normal", "normal_reasons",
]

#: Finish reasons of a normal completion: the job's end, or a bound the user set on its size or time.
NORMAL_REASONS: Final = (
    "finished",
    "closespider_timeout", "closespider_itemcount", "closespider_pagecount", "closespider_timeout_no_item",
    "idcrawl_idle_timeout",
)
#: Prefixes of normal finish reasons: a job limit (``idcrawl_limit_Imax``, ...) is a bound the user set.
NORMAL_PREFIXES: Final = ("idcrawl_limit_",)

#: The reason of a crawl stopped from outside (Ctrl-C, SIGTERM, scrapyd's cancel, Zyte's stop).
SHUTDOWN: Final = "shutdown"
#: The crawl did not start (bad input, one line; or Scrapy failed to bootstrap): Scrapy's own status.
DID_NOT_START: Final = 1
#: Any other finish reason that is not normal (a ``CloseSpider`` of a site spider, ``closespider_errorcount``,
#: another extension's reason, no reason at all): EX_SOFTWARE.
OTHER: Final = 70

#: Reason -> exit status, for the reasons that are not normal and have a status of their own.
EXIT_STATUSES: Final[dict[str, int]] = {
    "idcrawl_redis_state_lost": 65,  # EX_DATAERR: keys the job needs are gone from Redis
    "idcrawl_redis_unavailable": 69,  # EX_UNAVAILABLE: Redis did not answer for longer than the lease
    "idcrawl_storage_error": 74,  # EX_IOERR: a feed, the state or a job file could not be written
    "idcrawl_no_progress": 75,  # EX_TEMPFAIL: a fleet made no progress with work outstanding
    "idcrawl_redis_oom": 71,  # EX_OSERR: Redis refused a write, out of memory (maxmemory with noeviction)
    "idcrawl_state_lock_lost": 77,  # EX_NOPERM: another process took the Redis state's owner key
    SHUTDOWN: 128 + signal.SIGTERM,  # 143; 130 when the signal was SIGINT (see exit_status)
}


def is_normal(reason: str | None, *, watching: bool = False) -> bool:
    """Is ``reason`` a normal completion (exit status 0)? ``watching``: watch mode, which runs until it is
    stopped: its ``shutdown`` is its normal end."""
    if reason is None:
        return False
    return reason in NORMAL_REASONS or reason.startswith(NORMAL_PREFIXES) or (watching and reason == SHUTDOWN)


def normal_reasons(*, watching: bool = False) -> list[str]:
    """The normal reasons as a list: each of :data:`NORMAL_REASONS`, each prefix followed by ``*``, and
    ``shutdown`` when ``watching``."""
    return [*NORMAL_REASONS, *(f"{prefix}*" for prefix in NORMAL_PREFIXES), *([SHUTDOWN] if watching else [])]


def exit_status(reason: str | None, signum: int | None = None, *, watching: bool = False) -> int:
    """The exit status of a crawl that closed with ``reason``.

    ``signum``: the signal that asked a ``shutdown`` (128 + its number, as a shell reports a process
    that signal stopped: 130 for SIGINT, 143 for SIGTERM); without one, a shutdown exits 143.
    ``watching``: watch mode, which runs until stopped: its ``shutdown`` is its normal end (0).
    """
    if is_normal(reason, watching=watching):
        return 0
    if reason == SHUTDOWN and signum is not None and 0 < signum < 128:
        return 128 + signum
    if reason is None:
        return OTHER
    return EXIT_STATUSES.get(reason, OTHER)
