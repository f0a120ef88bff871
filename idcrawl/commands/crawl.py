"""``scrapy crawl``, with an exit status that says how the crawl finished.

Scrapy's, plus the exit status of the finish reason (:mod:`idcrawl.core.exits`,
docs/reference/finish-reasons.md). Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.exceptions import UsageError

from idcrawl._scrapy import command_crawler, shutdown_signals
from idcrawl.config import setting
from idcrawl.core.exits import DID_NOT_START, exit_status, is_normal
from idcrawl.storage import REASON as STORAGE_REASON
from idcrawl.storage import storage_reason

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings

__all__ = ["Command", "crawl_exit_status"]

logger = logging.getLogger(__name__)


def _deprecated_override(settings: BaseSettings) -> tuple[int, set[str]] | None:
    """``(IDCRAWL_FAIL_EXIT_CODE, IDCRAWL_FAIL_REASONS)`` when the code is set, else None."""
    code = setting(settings, "IDCRAWL_FAIL_EXIT_CODE")
    if code is None:
        return None
    return code, set(setting(settings, "IDCRAWL_FAIL_REASONS"))


def crawl_exit_status(reasons: Iterable[str | None], settings: BaseSettings, signums: Iterable[int] = (),
                      *, storage_error: bool | str | None = False) -> int:
    """The exit status of a crawl whose spider closed with ``reasons`` (one per crawler; none: the crawl
    never opened its spider), ``signums`` the shutdown signals it received: the table's
    (:func:`idcrawl.core.exits.exit_status`), or the deprecated ``IDCRAWL_FAIL_EXIT_CODE`` for a reason
    of ``IDCRAWL_FAIL_REASONS``. Several crawlers: the first non-zero status. ``storage_error``: a write
    failed while the crawl was closing already (a normal reason then exits as ``idcrawl_storage_error``,
    or as the failure's own reason when it is one: ``idcrawl_redis_oom``).
    Watch mode (``IDCRAWL_WATCH``, which a watching spider sets) ends on a signal: its shutdown exits 0."""
    override = _deprecated_override(settings)
    signum = next(iter(signums), None)
    watching = setting(settings, "IDCRAWL_WATCH")
    statuses = []
    for reason in list(reasons) or [None]:
        if storage_error and is_normal(reason, watching=watching):
            reason = storage_error if isinstance(storage_error, str) else STORAGE_REASON
        if override is not None and reason in override[1]:
            statuses.append(override[0])
        else:
            statuses.append(exit_status(reason, signum, watching=watching))
    return next((status for status in statuses if status), 0)


class Command(ScrapyCrawl):
    """Scrapy's ``crawl`` (the same checks and calls), then :func:`crawl_exit_status`."""

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) < 1:
            raise UsageError
        if len(args) > 1:
            raise UsageError("running 'scrapy crawl' with more than one spider is not supported")
        assert self.crawler_process
        crawler = command_crawler(self, args[0])
        reasons: list[str | None] = []
        crawler.signals.connect(lambda spider, reason=None: reasons.append(reason), signal=signals.spider_closed,
                                weak=False)
        signums = shutdown_signals(self.crawler_process)
        self.crawler_process.crawl(crawler, **opts.spargs)
        if _deprecated_override(crawler.settings) is not None:
            logger.warning("idcrawl: IDCRAWL_FAIL_EXIT_CODE and IDCRAWL_FAIL_REASONS are deprecated: every finish "
                           "reason that is not a normal completion exits non-zero by default "
                           "(docs/reference/finish-reasons.md); they still set the status of the reasons listed")
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = DID_NOT_START
        else:
            self.exitcode = crawl_exit_status(reasons, crawler.settings, signums,
                                              storage_error=storage_reason(crawler))
