"""Feed durability: the items of an id counted until written, local feeds flushed and fsync'd before a
commit, feed marks and the lines past them read back (emit once).

Shared by the state recorder of one process and the Redis worker; docs/architecture.md
("The durability rules") says why and in which order.
"""

from __future__ import annotations

import json
import logging
import os
from collections import defaultdict
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from itemadapter import ItemAdapter
from pyroaring import BitMap64
from scrapy.exporters import JsonLinesItemExporter
from scrapy.extensions.feedexport import FileFeedStorage, StdoutFeedStorage
from w3lib.url import file_uri_to_path

from idcrawl._scrapy import feed_slots
from idcrawl.archive.files import ARCHIVES
from idcrawl.state.base import FeedMarks
from idcrawl.storage import report_storage_error, storage_problem

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from idcrawl._scrapy import FeedSlotView

__all__ = [
    "OwnLine", "ReadBack", "UnwrittenItems", "end_cut_lines", "feed_marks", "flush_archive", "flush_feeds",
    "item_fields", "item_key", "overwritten_feeds", "page_key", "recover_feed_tails",
]

logger = logging.getLogger(__name__)


class UnwrittenItems:
    """Found ids whose items are on their way to the feeds.

    A found id counts as done only once every item that stands for it (same
    target and id) has been scraped, so a kill before that refetches it. Each
    entry carries a token (the lane key here, an emit field in a distributed
    worker) that the caller gets back when the id's last item is written.

    ``key_of``: what an item stands for (:func:`item_key`: a found id; :func:`page_key`: a found page
    of the crawl scope, ``(owner, url)``, held the same way until its items are written).
    """

    def __init__(self, key_of: Callable[[Any], tuple[str, Any] | None] | None = None) -> None:
        self._key_of = key_of if key_of is not None else item_key
        self._left: dict[tuple[str, Any], list[Any]] = {}  # (target, id) -> [token, items left]

    def expect(self, target: str, id_: Any, outputs: list[Any], token: Any) -> int:
        """Wait for the items of ``outputs`` that stand for ``(target, id_)``; how many (0: none)."""
        own = sum(1 for output in outputs if self._key_of(output) == (target, id_))
        if own:
            self._left[(target, id_)] = [token, own]
        return own

    def written(self, item: Any) -> tuple[tuple[str, Any], Any] | None:
        """An item was scraped: ``((target, id), token)`` when it was its id's last one, else None."""
        key = self._key_of(item)
        entry = self._left.get(key) if key is not None else None
        if entry is None or key is None:
            return None
        entry[1] -= 1
        if entry[1] > 0:
            return None
        del self._left[key]
        return key, entry[0]

    def pending(self) -> list[tuple[tuple[str, Any], Any]]:
        """``((target, id), token)`` of every id still waiting for items."""
        return [(key, entry[0]) for key, entry in self._left.items()]



def flush_feeds(crawler: Crawler) -> bool:
    """Flush and fsync local feed files; False if some feed is only durable at close (S3, FTP, ...).

    A failed flush or fsync of a full or failing file system is reported (:func:`idcrawl.storage.report_storage_error`):
    the crawl closes, and nothing is committed found after it."""
    flush_archive(crawler)  # the WARC records of what is committed now are on disk too (a failure closes the crawl)
    durable = True
    for slot in feed_slots(crawler):
        if isinstance(slot.storage, FileFeedStorage | StdoutFeedStorage):
            if slot.file is not None:
                # a closed file was flushed by its close
                try:
                    slot.file.flush()
                    os.fsync(slot.file.fileno())
                except OSError as exc:
                    problem = storage_problem(exc)
                    if problem is not None:
                        report_storage_error(crawler, getattr(slot.storage, "path", "a feed"), problem)
                except (ValueError, AttributeError):
                    pass
        else:
            durable = False
    return durable


def flush_archive(crawler: Crawler) -> None:
    """Flush and fsync the crawl's WARC file being written (``IDCRAWL_WARC_DIR``), if any: the records of
    every response the spider has seen are on disk before the ids they found are committed."""
    files = ARCHIVES.get(crawler)
    if files is None:
        return
    try:
        files.flush()
    except OSError as exc:
        report_storage_error(crawler, files.path or files.folder, storage_problem(exc) or str(exc))


def feed_marks(crawler: Crawler) -> dict[str, int]:
    """Each local feed file's absolute path -> its size now (-1: its tail is not to be read back).

    Called right after :func:`flush_feeds`, so the size covers every item
    written so far. A file not opened yet counts from where the run will
    start writing: 0 when it will be overwritten, its present size when
    appended to.
    """
    offsets: dict[str, int] = {}
    # with several feeds, an id read back from one of them may be missing from another
    slots = feed_slots(crawler)
    single = len(slots) == 1
    for slot in slots:
        storage = slot.storage
        if not isinstance(storage, FileFeedStorage):
            continue
        path = os.path.abspath(storage.path)
        if not single or not _readable_back(slot):
            offsets[path] = -1
            continue
        try:
            if slot.file is not None and not slot.file.closed:
                offsets[path] = os.fstat(slot.file.fileno()).st_size
            elif storage.write_mode == "wb" and slot.file is None:
                offsets[path] = 0
            else:
                offsets[path] = os.path.getsize(path)
        except (OSError, ValueError, AttributeError):
            offsets[path] = 0 if storage.write_mode == "wb" else -1
    return offsets


def end_cut_lines(crawler: Crawler) -> None:
    """End the last line of JSON lines feed files this run appends to, if a kill cut it short.

    Without this, the run's first item would be glued to the cut line and be
    unreadable (lost, once committed found); now the cut line stays a bad
    line of its own, which JSON lines readers skip.
    """
    for slot in feed_slots(crawler):
        storage = slot.storage
        if not (isinstance(storage, FileFeedStorage) and storage.write_mode == "ab"):
            continue
        if not _readable_back(slot, batches=True):
            continue
        try:
            with open(storage.path, "rb") as file:
                if os.fstat(file.fileno()).st_size == 0:
                    continue
                file.seek(-1, os.SEEK_END)
                if file.read(1) == b"\n":
                    continue
            with open(storage.path, "ab") as file:
                file.write(b"\n")
        except OSError:
            continue
        logger.warning("idcrawl: feed %s ended with a line cut short (a killed run); "
                       "it is left as a bad line of its own", storage.path)


def _readable_back(slot: FeedSlotView, *, batches: bool = False) -> bool:
    """A plain JSON lines file, one per feed (no post-processing; no batches unless ``batches``)."""
    options, exporter_class = slot.options, slot.exporter_class
    return (
        isinstance(exporter_class, type)
        and issubclass(exporter_class, JsonLinesItemExporter)
        and not options.get("postprocessing")
        and (batches or not options.get("batch_item_count"))
    )


def overwritten_feeds(crawler: Crawler) -> set[str] | None:
    """Absolute paths of the local feed files this run overwrites (``-O``, ``overwrite: True``).

    None when such a feed's path has ``%(...)s`` placeholders: which file it
    overwrites is known only once the feed exporter renders it.
    """
    # read from the FEEDS setting (where -O puts its feed), not from the feed exporter: the state is
    # loaded while components are built, before the crawler has its extensions
    paths: set[str] = set()
    for uri, options in crawler.settings.getdict("FEEDS").items():
        uri = str(uri)
        if not (options or {}).get("overwrite") or urlparse(uri).scheme not in ("", "file"):
            continue
        if "%(" in uri:
            return None
        # as FileFeedStorage makes its path
        paths.add(os.path.abspath(file_uri_to_path(uri) if uri.startswith("file:") else uri))
    return paths


@dataclass(slots=True)
class ReadBack:
    """What :func:`recover_feed_tails` read: ``found`` (target -> ids of this job's lines past the marks)
    and ``foreign`` (complete item lines past the marks that are not this job's: skipped)."""

    found: dict[str, BitMap64] = field(default_factory=lambda: defaultdict(BitMap64))
    foreign: int = 0


#: Whether a feed line's ``(target, id, url)`` is an item of this job's own page (:func:`recover_feed_tails`).
OwnLine = Callable[[str, int, Any], bool]


def recover_feed_tails(
    marks: FeedMarks | None, skip: Container[str] | None = (), own: OwnLine | None = None
) -> ReadBack:
    """The ids of the items on complete lines past ``marks`` in their feed files.

    These ids were written to a feed by the run of ``marks`` after its last
    commit. A file that is gone or shorter than its mark (moved, rewritten),
    or in ``skip`` (this run overwrites it), is not read: its ids are fetched
    again, as without feed marks. ``skip`` None (this run overwrites a feed
    whose path is not known yet): no file is read. ``own``: whether a line's
    ``(target, id, url)`` is this job's (another job appending to the same file
    writes lines that are not); the others are counted in ``foreign``, their ids
    fetched again. None: every item line counts.
    """
    read = ReadBack()
    if marks is None:
        return read
    if skip is None:
        if any(offset >= 0 for offset in marks.offsets.values()):
            logger.warning("idcrawl: this run overwrites a feed whose path has placeholders (-O): the items "
                           "run %d wrote after its last commit are fetched again", marks.run_id)
        return read
    for path, offset in marks.offsets.items():
        if offset < 0:
            continue
        if path in skip:
            logger.warning("idcrawl: this run overwrites feed %s of run %d (-O): its items past the last "
                           "commit are fetched again, the earlier ones are gone", path, marks.run_id)
            continue
        lines = 0
        try:
            with open(path, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                if size < offset:
                    logger.warning("idcrawl: feed %s is shorter than when run %d last committed (%d < %d bytes); "
                                   "its last items are fetched again", path, marks.run_id, size, offset)
                    continue
                file.seek(offset)
                for line in file:
                    if not line.endswith(b"\n"):  # cut short by the kill: fetched again
                        break
                    key = _line_key(line)
                    if key is None:
                        continue
                    if own is not None and not own(*key):
                        read.foreign += 1
                        continue
                    read.found[key[0]].add(key[1])
                    lines += 1
        except OSError as exc:
            logger.warning("idcrawl: feed %s of run %d cannot be read back (%s); its last items are fetched again",
                           path, marks.run_id, exc.strerror or exc)
            continue
        if lines:
            logger.info("idcrawl: resume: %d items past run %d's last commit in %s; their ids are not fetched again",
                        lines, marks.run_id, path)
    return read


def item_fields(item: Any) -> Mapping[str, Any] | ItemAdapter | None:
    """The item's fields (``get``, ``in``): a plain dict as it is (what ``ItemAdapter`` would wrap it in
    reads the same; building one per item and lookup was ~1% of a ``fast`` crawl's profiled CPU), any
    other item through ``ItemAdapter``; None: not an item."""
    if type(item) is dict:
        return item
    try:
        return ItemAdapter(item)
    except TypeError:
        return None


def _line_key(line: bytes) -> tuple[str, int, Any] | None:
    """``(target, id, url)`` of a feed line's item (None: not an item of an id)."""
    try:
        item = json.loads(line)
    except ValueError:
        return None
    key = item_key(item) if isinstance(item, dict) else None
    return None if key is None else (key[0], key[1], item.get("url"))


def page_key(item: Any) -> tuple[str, str] | None:
    """The (owner target, url) of a found page of the crawl scope an item stands for (``target`` and
    ``url``, no ``id``: ``IdSeqSpider.outlink_response``'s item), or None for other items."""
    adapter = item_fields(item)
    if adapter is None:
        return None
    target, url = adapter.get("target"), adapter.get("url")
    if isinstance(target, str) and isinstance(url, str) and "id" not in adapter:
        return target, url
    return None


def item_key(item: Any) -> tuple[str, int] | None:
    """The (target, id) an item stands for, or None for other items."""
    adapter = item_fields(item)
    if adapter is None:
        return None
    target, id_ = adapter.get("target"), adapter.get("id")
    if isinstance(target, str) and isinstance(id_, int):
        return target, id_
    return None


