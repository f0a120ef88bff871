"""``StateRecorder``: commits a crawl's outcomes and lane cursors durably, in batches.

The ordering that makes a kill lose nothing: an id is committed ``found``
only once the items it produced have been written, and a lane's committed
cursor never passes a found id whose items are not written yet.

1. The spider releases a found id's outputs; the recorder counts the id's own
   items (those carrying its ``target`` and ``id``).
2. ``item_scraped`` (or ``item_dropped``: a pipeline decided) marks each of
   them written; an id whose last item is written becomes committable.
3. A checkpoint (every ``IDCRAWL_STATE_COMMIT_ITEMS`` outcomes or
   ``IDCRAWL_STATE_COMMIT_INTERVAL`` seconds, and at close) first flushes and
   fsyncs local feed files (``-o``/``-O``/``FEEDS`` file and stdout storages),
   then commits in one SQLite transaction: missing, failed and disallowed
   outcomes, committable found ids, and each lane's cursor pinned before its
   earliest uncommitted found id.

Killed at any moment, the state therefore describes a prefix of what the feed
files hold; a resumed run refetches at most what was decided after the last
checkpoint (plus requests in flight). Feeds that are uploaded only at close
(S3, GCS, FTP) hold nothing durable before then: with such a feed, found ids
are committed only after the feed exporter has closed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from pyroaring import BitMap64
from scrapy import signals
from scrapy.extensions.feedexport import FeedExporter, FileFeedStorage, StdoutFeedStorage
from scrapy.utils.asyncio import create_looping_call

from idcrawl.core.lanes import Lane, Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.resume import identity
from idcrawl.state.base import StateStore

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from idcrawl.core.frontier import Frontier

__all__ = ["StateRecorder", "UnwrittenItems", "feed_exporters", "flush_feeds", "item_key"]

logger = logging.getLogger(__name__)


class UnwrittenItems:
    """Found ids whose items are on their way to the feeds.

    A found id counts as done only once every item that stands for it (same
    target and id) has been scraped, so a kill before that refetches it. Each
    entry carries a token (the lane key here, an emit field in a distributed
    worker) that the caller gets back when the id's last item is written.
    """

    def __init__(self) -> None:
        self._left: dict[tuple[str, int], list[Any]] = {}  # (target, id) -> [token, items left]

    def expect(self, target: str, id_: int, outputs: list[Any], token: Any) -> bool:
        """Wait for the items of ``outputs`` that stand for ``(target, id_)``; False if there are none."""
        own = sum(1 for output in outputs if item_key(output) == (target, id_))
        if own:
            self._left[(target, id_)] = [token, own]
        return bool(own)

    def written(self, item: Any) -> tuple[tuple[str, int], Any] | None:
        """An item was scraped: ``((target, id), token)`` when it was its id's last one, else None."""
        key = item_key(item)
        entry = self._left.get(key) if key is not None else None
        if entry is None or key is None:
            return None
        entry[1] -= 1
        if entry[1] > 0:
            return None
        del self._left[key]
        return key, entry[0]

    def pending(self) -> list[tuple[tuple[str, int], Any]]:
        """``((target, id), token)`` of every id still waiting for items."""
        return [(key, entry[0]) for key, entry in self._left.items()]


class StateRecorder:
    def __init__(
        self,
        store: StateStore,
        crawler: Crawler,
        frontier: Frontier[Any],
        origins: dict[str, int],
        *,
        batch: int,
        interval: float,
    ) -> None:
        self.store = store
        self.crawler = crawler
        self.frontier = frontier
        self.origins = origins  # lane key -> the lane's first start over all runs
        self.batch = batch
        self.interval = interval
        self._pending: dict[str, dict[Outcome, BitMap64]] = defaultdict(lambda: defaultdict(BitMap64))
        self._pending_count = 0
        self._unwritten = UnwrittenItems()  # tokens: lane keys
        self._written: dict[tuple[str, int], str] = {}  # found ids whose items are written -> lane key
        self._params = {name: identity(t) for name, t in frontier.targets.items()}
        self._durable_feeds = True
        self._run_id: int | None = None
        self._ended = self._feeds_done = self._store_closed = False
        self._loop: Any = None
        self.commits = 0
        self._committed: dict[str, LaneRecord] = {}  # lane key -> its record as last committed

    # -- lifecycle ---------------------------------------------------------------

    def open(self) -> None:
        self._run_id = self.store.begin_run(_now(), list(self._params))
        self._commit(self._params, {})
        self.crawler.signals.connect(self._item_written, signal=signals.item_scraped)
        self.crawler.signals.connect(self._item_written, signal=signals.item_dropped)
        self.crawler.signals.connect(self._feeds_closed, signal=signals.feed_exporter_closed)
        if self.interval > 0:
            self._loop = create_looping_call(self.checkpoint)
            self._loop.start(self.interval, now=False)

    def close(self, reason: str, counts: dict[str, int]) -> None:
        """Last commit and the run's record. The store stays open for found ids
        that only become durable when the feed exporter has closed."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.checkpoint()
        if self._run_id is not None:
            self.store.end_run(self._run_id, _now(), reason, counts)
        self._ended = True
        if self._feeds_done or not feed_exporters(self.crawler):
            self._close_store()

    def _feeds_closed(self) -> None:
        """Feeds are closed (uploaded): whatever they hold is durable now."""
        self._feeds_done = True
        self._durable_feeds = True
        self.checkpoint(flush=False)
        if self._ended:
            self._close_store()

    def _close_store(self) -> None:
        if not self._store_closed:
            self._store_closed = True
            self.store.close()

    # -- events --------------------------------------------------------------------

    def outcome(self, target: str, outcome: Outcome, id_: int) -> None:
        if outcome is not Outcome.FOUND:
            self._add(target, outcome, id_)

    def released(self, target: str, lane_key: str, id_: int, outputs: list[Any]) -> None:
        """A found id's outputs were emitted; count the items that stand for it."""
        if not self._unwritten.expect(target, id_, outputs, lane_key):
            self._found(target, id_, lane_key)

    def _item_written(self, item: Any, *args: Any, **kwargs: Any) -> None:
        done = self._unwritten.written(item)
        if done is not None:
            (target, id_), lane_key = done
            self._found(target, id_, lane_key)

    def _found(self, target: str, id_: int, lane_key: str) -> None:
        self._written[(target, id_)] = lane_key
        self._count()

    def _add(self, target: str, outcome: Outcome, id_: int) -> None:
        self._pending[target][outcome].add(id_)
        self._count()

    def _count(self) -> None:
        self._pending_count += 1
        if self._pending_count >= self.batch:
            self.checkpoint()

    # -- commits -------------------------------------------------------------------

    def checkpoint(self, flush: bool = True) -> None:
        if self._store_closed:
            return
        if flush:
            self._durable_feeds = flush_feeds(self.crawler)
        outcomes, self._pending = self._pending, defaultdict(lambda: defaultdict(BitMap64))
        if self._durable_feeds:
            for (target, id_) in self._written:
                outcomes[target][Outcome.FOUND].add(id_)
            self._written = {}
        self._commit({}, outcomes)
        self._pending_count = len(self._written)
        self.commits += 1

    def _commit(self, params: dict[str, dict[str, Any]], outcomes: dict[str, dict[Outcome, BitMap64]]) -> None:
        """One transaction; only the lane records that changed since the last commit are written
        (a job of 100,000 targets would otherwise rewrite every lane's record every few seconds)."""
        records = self._lane_records()
        changed: dict[str, dict[str, LaneRecord]] = {}
        for target, by_key in records.items():
            for key, record in by_key.items():
                if self._committed.get(key) != record:
                    changed.setdefault(target, {})[key] = record
        self.store.commit(params, outcomes, changed)
        for by_key in changed.values():
            self._committed.update(by_key)

    def _lane_records(self) -> dict[str, dict[str, LaneRecord]]:
        """Each lane's durable record, pinned before its earliest found id not yet committed."""
        pins: dict[str, int] = {}
        uncommitted = [(id_, lane_key) for (_t, id_), lane_key in self._unwritten.pending()]
        uncommitted += [(id_, lane_key) for (_t, id_), lane_key in self._written.items()]
        for id_, lane_key in uncommitted:
            step = self.frontier.lanes[lane_key].step
            if lane_key not in pins or (id_ - pins[lane_key]) * step < 0:
                pins[lane_key] = id_
        records: dict[str, dict[str, LaneRecord]] = defaultdict(dict)
        for key, lane in self.frontier.lanes.items():
            if self.frontier.lane_direction[key] == "holes":
                continue
            target = self.frontier.lane_target[key].name
            records[target][key] = self._record(key, lane, pins.get(key))
        return records

    def _record(self, key: str, lane: Lane[Any], pin: int | None) -> LaneRecord:
        origin = self.origins.get(key, lane.start)
        cursor = lane.first_undecided if lane.cut_at is None else lane.cut_at + lane.step
        if pin is not None and (pin - cursor) * lane.step < 0:
            return LaneRecord(key, origin, lane.step, lane.stop, pin, None, None, None)
        reason = lane.reason if lane.settled else None
        return LaneRecord(key, origin, lane.step, lane.stop, cursor, lane.last_found, lane.cut_at, reason)

def feed_exporters(crawler: Crawler) -> list[FeedExporter]:
    return [c for c in crawler.extensions.middlewares if isinstance(c, FeedExporter)]


def flush_feeds(crawler: Crawler) -> bool:
    """Flush and fsync local feed files; False if some feed is only durable at close (S3, FTP, ...)."""
    durable = True
    for exporter in feed_exporters(crawler):
        for slot in exporter.slots:
            if isinstance(slot.storage, FileFeedStorage | StdoutFeedStorage):
                if slot.file is not None:
                    # a closed file was flushed by its close
                    with contextlib.suppress(OSError, ValueError, AttributeError):
                        slot.file.flush()
                        os.fsync(slot.file.fileno())
            else:
                durable = False
    return durable


def item_key(item: Any) -> tuple[str, int] | None:
    """The (target, id) an item stands for, or None for other items."""
    try:
        adapter = ItemAdapter(item)
    except TypeError:
        return None
    target, id_ = adapter.get("target"), adapter.get("id")
    if isinstance(target, str) and isinstance(id_, int):
        return target, id_
    return None


def _now() -> str:
    """ISO 8601 UTC with milliseconds, like the items' ``fetched_at``: 2026-11-26T10:05:00.123Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

