"""A failed write of a feed, the state or a job file closes the crawl with ``idcrawl_storage_error``.

The first failure (a full disk, a quota, a read-only or failing file system) is one ERROR line
naming the file and the error, and closes the spider; later failures of the same crawl are one
INFO line each. Nothing is committed found after it (:class:`idcrawl.state.recorder.StateRecorder`
asks :func:`storage_failed`), so the state stays a prefix of what the feeds hold.
``GuardedFileFeedStorage`` (``FEED_STORAGES`` for local files) reports a feed's failed write
here instead of raising it through Scrapy's feed exporter (a traceback per item).
"""

from __future__ import annotations

import errno
import io
import logging
import os
import sqlite3
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.extensions.feedexport import FileFeedStorage

from idcrawl._scrapy import close_spider, repair_jobdir, spider_closing
from idcrawl.core.safetext import safe

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = [
    "REASON",
    "STORAGE_ERRNOS",
    "GuardedFile",
    "GuardedFileFeedStorage",
    "fsync_directory",
    "repair_job_files",
    "report_storage_error",
    "storage_failed",
    "storage_problem",
    "storage_reason",
]

logger = logging.getLogger(__name__)

#: The finish reason of a crawl closed by a failed write.
REASON = "idcrawl_storage_error"
#: The errors of a file system that cannot take the write (others are bugs, raised as they are).
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT, errno.EFBIG})
#: SQLite's primary result codes of the same kind: SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL.
_SQLITE_CODES = frozenset({8, 10, 13})

#: What to do before running the same command again, by the reason a failed write closed the crawl.
_REMEDIES = {REASON: "free space", "idcrawl_redis_oom": "give Redis memory (maxmemory)",
             "idcrawl_redis_unavailable": "start Redis again"}

_failed: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # crawler -> the first file
_reasons: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # crawler -> its finish reason


def storage_problem(exc: BaseException) -> str | None:
    """What is wrong, when ``exc`` is a failed write of a file system (else None)."""
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        return f"[Errno {exc.errno}] {exc.strerror or errno.errorcode.get(exc.errno, '')}"
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and isinstance(code, int) and code & 0xFF in _SQLITE_CODES:
        return str(exc)
    return None


def storage_failed(crawler: Crawler | Any) -> str | None:
    """The file whose write failed first in this crawl, or None."""
    return _failed.get(crawler)


def storage_reason(crawler: Crawler | Any) -> str | None:
    """The finish reason of this crawl's first failed write (:func:`report_storage_error`), or None."""
    return _reasons.get(crawler)


def repair_job_files(jobdir: str | None) -> None:
    """Before Scrapy reads them: rebuild its ``JOBDIR`` files that a failed write (or a kill) left empty
    or cut (:func:`idcrawl._scrapy.repair_jobdir`), with one WARNING."""
    if not jobdir:
        return
    try:
        rebuilt = repair_jobdir(jobdir)
    except OSError as exc:  # the folder itself cannot be read or changed: Scrapy says so next
        logger.warning("idcrawl: JOBDIR %s could not be checked: %s", safe(jobdir), safe(exc.strerror or exc))
        return
    if rebuilt:
        logger.warning("idcrawl: JOBDIR %s: rebuilt %s; a run that could not write them left them unreadable "
                       "(a full disk, a kill)", safe(jobdir), "; ".join(rebuilt))


def report_storage_error(crawler: Crawler | Any, path: str | Path, problem: str, reason: str = REASON) -> None:
    """A write of ``path`` failed (``problem``: :func:`storage_problem`, or a state error's message):
    the first one is an ERROR line and closes the crawl with ``reason`` (a Redis state's: out of memory,
    no answer); later ones are an INFO line."""
    if crawler in _failed:
        logger.info("idcrawl: also not written: %s (%s)", safe(str(path)), safe(problem))
        return
    _failed[crawler] = str(path)
    _reasons[crawler] = reason
    stats = getattr(crawler, "stats", None)
    if stats is not None:
        stats.set_value("idcrawl/storage_error", str(path))
    closing = spider_closing(crawler)
    logger.error("idcrawl: cannot write %s: %s; %s (%s): no id is committed found whose item was not written; "
                 "%s and run the same command again to resume",
                 safe(str(path)), safe(problem), "the crawl was closing" if closing else "closing the crawl", reason,
                 _REMEDIES.get(reason, "fix it"))
    if not closing:
        close_spider(crawler, reason)


class GuardedFile(io.BufferedWriter):
    """A feed file whose first failed write or flush is reported (:func:`report_storage_error`) instead of
    raised; from then on writes are dropped (their ids are not committed found: fetched again on resume)."""

    def __init__(self, raw: io.RawIOBase, path: str, crawler: Any) -> None:
        super().__init__(raw)
        self._path = path
        self._crawler = crawler
        self.failed = False

    def _failure(self, exc: OSError) -> bool:
        problem = storage_problem(exc)
        if problem is None:
            return False
        self.failed = True
        if self._crawler is not None:
            report_storage_error(self._crawler, self._path, problem)
        return True

    def write(self, data: Any) -> int:
        if self.failed:
            return len(data)
        try:
            return super().write(data)
        except OSError as exc:
            if not self._failure(exc):
                raise
            return len(data)

    def flush(self) -> None:
        if self.failed:
            return
        try:
            super().flush()
        except OSError as exc:
            if not self._failure(exc):
                raise

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        if self.failed:  # what the buffer holds cannot be written: the file is closed without it
            self.raw.close()
        super().close()  # a no-op once the raw file is closed


class GuardedFileFeedStorage(FileFeedStorage):
    """Scrapy's local file feed storage (``-o``/``-O``/``FEEDS``), its file a :class:`GuardedFile`."""

    def __init__(self, uri: str, *, feed_options: dict[str, Any] | None = None, crawler: Any = None) -> None:
        super().__init__(uri, feed_options=feed_options)
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler, uri: str, *, feed_options: dict[str, Any] | None = None) -> Any:
        return cls(uri, feed_options=feed_options, crawler=crawler)

    def open(self, spider: Any) -> Any:
        path = Path(self.path)
        try:
            if path.parent and not path.parent.exists():
                path.parent.mkdir(parents=True)
            raw = io.FileIO(path, "w" if self.write_mode == "wb" else "a")
        except OSError as exc:
            problem = storage_problem(exc)
            if problem is None or self.crawler is None:
                raise
            report_storage_error(self.crawler, self.path, problem)
            guarded = GuardedFile(io.FileIO(os.devnull, "w"), self.path, self.crawler)
            guarded.failed = True
            return guarded
        return GuardedFile(raw, self.path, self.crawler)


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
