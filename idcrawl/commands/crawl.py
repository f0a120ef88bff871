"""``scrapy crawl``, with an exit status for a crawl that finished for a failure reason.

Scrapy's own ``crawl`` command exits 0 whatever the finish reason (only a crawl
that failed to start exits 1). A scheduler that looks only at the exit status
(cron, systemd, Kubernetes, a CI step, scrapyd's log line ``Process died:
exitstatus=N``) then cannot tell a worker that stopped because its Redis was
gone for good (``idcrawl_redis_unavailable``) from one that finished its job.
This command is Scrapy's, plus one check after the crawl: when
``IDCRAWL_FAIL_EXIT_CODE`` is not 0 and the spider closed with a reason listed
in ``IDCRAWL_FAIL_REASONS``, the process exits with that code. With the
default (0) nothing changes.

Zyte Scrapy Cloud and Spidermon read the finish reason itself
(``finish_reason`` in the stats: the job's close reason); this command is for
the schedulers that read the exit status. It replaces Scrapy's ``crawl``
where ``COMMANDS_MODULE = "idcrawl.commands"`` (this project's settings; a
project with a commands module of its own imports it there:
``from idcrawl.commands.crawl import Command``). ``scrapy runspider`` is
Scrapy's, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.exceptions import UsageError

from idcrawl import default_settings
from idcrawl._scrapy import command_crawler

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings

__all__ = ["Command", "failure_exit_code"]


def failure_exit_code(reasons: Iterable[str | None], settings: BaseSettings) -> int:
    """``IDCRAWL_FAIL_EXIT_CODE`` when a finish reason is one of ``IDCRAWL_FAIL_REASONS``, else 0."""
    code = settings.getint("IDCRAWL_FAIL_EXIT_CODE", default_settings.IDCRAWL_FAIL_EXIT_CODE)
    if code == 0:
        return 0
    failing = {str(r).strip() for r in settings.getlist("IDCRAWL_FAIL_REASONS",
                                                         default_settings.IDCRAWL_FAIL_REASONS)}
    return code if any(reason in failing for reason in reasons) else 0


class Command(ScrapyCrawl):
    """Scrapy's ``crawl`` (the same checks and calls), then :func:`failure_exit_code`."""

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
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        else:
            self.exitcode = failure_exit_code(reasons, crawler.settings)
