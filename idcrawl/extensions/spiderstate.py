"""``IdSpiderState``: Scrapy's ``SpiderState`` (``spider.state`` kept in ``JOBDIR``), written atomically.

Scrapy's truncates ``JOBDIR/spider.state`` and then writes it: a full disk leaves it empty, and the
next run dies reading it. This one writes beside it and renames (the old file stays on failure), and
reports a failed write as a storage error (:mod:`idcrawl.storage`) instead of a traceback. Built
before the spider opens and the scheduler reads its queue, it first takes an id crawl's ``JOBDIR`` lock
(:func:`idcrawl.runtime.lock_jobdir`), then rebuilds the ``JOBDIR`` files an earlier run left
unreadable (:func:`idcrawl.storage.repair_job_files`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.extensions.spiderstate import SpiderState

from idcrawl.storage import repair_job_files, report_storage_error, storage_problem

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["IdSpiderState"]


class IdSpiderState(SpiderState):
    """Scrapy's ``SpiderState``; ``spider.state`` is written to a temporary file, then renamed over the old."""

    crawler: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        from idcrawl.runtime import lock_jobdir

        lock_jobdir(crawler)  # an id crawl's JOBDIR lock first: a refused crawl changes nothing
        repair_job_files(crawler.settings.get("JOBDIR"))  # before the spider and the scheduler read them
        extension = super().from_crawler(crawler)
        extension.crawler = crawler
        return extension

    def spider_closed(self, spider: Any) -> None:
        if not self.jobdir:
            return
        path = Path(self.statefn)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                pickle.dump(spider.state, out, protocol=4)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            problem = storage_problem(exc)
            if problem is None or self.crawler is None:
                raise
            report_storage_error(self.crawler, path, problem)
