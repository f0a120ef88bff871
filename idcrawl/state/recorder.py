"""``StateRecorder``: commits a crawl's outcomes and lane cursors durably, in batches.

An id is committed found only once its items are written and the local feeds flushed
(:mod:`idcrawl.feeds`); a lane's committed cursor never passes a found id not committed yet.
docs/architecture.md ("The durability rules") says why and in which order.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from itertools import compress
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64
from scrapy import signals
from scrapy.utils.asyncio import create_looping_call

from idcrawl._scrapy import has_feed_exporter
from idcrawl.core.clock import Clock
from idcrawl.core.lanes import MARGIN, Lane, Outcome
from idcrawl.core.pagebook import PageBook, by_target
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.recrawl import Schedule, tail_after_run
from idcrawl.core.resume import identity
from idcrawl.core.targets import RESET_MODES, Target
from idcrawl.feeds import UnwrittenItems, end_cut_lines, feed_marks, flush_archive, flush_feeds, page_key
from idcrawl.state.base import FeedMarks, StateError, StateStore
from idcrawl.storage import REASON, report_storage_error, storage_failed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from idcrawl.core.frontier import Frontier

__all__ = ["StateRecorder"]


#: a :class:`LaneRecord`'s fields' values, in their order (what its ``==`` compares)
_record_values = operator.attrgetter(*(f.name for f in dataclasses.fields(LaneRecord)))


class _Params(Mapping[str, dict[str, Any]]):
    """The targets' identity params, made when read (the open's commit writes each once): a job of
    100,000 targets does not keep 100,000 dicts for the run."""

    def __init__(self, targets: Mapping[str, Target]) -> None:
        self._targets = targets

    def __getitem__(self, name: str) -> dict[str, Any]:
        return identity(self._targets[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets


class _Changes(Mapping[str, Mapping[str, LaneRecord]]):
    """The changed lane records by target, made as the store reads them (a big job's first and last
    commits change every lane: no dict per target is held for all of them at once). A target's lanes
    are next to each other in the frontier; ``moved`` keeps the records of the lanes that moved (the
    committed ones the next commit compares with), unless the record said not to (``keep`` False: a lane
    the last commit froze, or one untouched)."""

    def __init__(self, records: Callable[[], Iterator[tuple[str, LaneRecord, bool]]]) -> None:
        self._records = records
        self._current: tuple[str, dict[str, LaneRecord]] | None = None  # the target last handed out
        self.moved: dict[str, LaneRecord] = {}

    def _by_target(self) -> Iterator[tuple[str, dict[str, LaneRecord]]]:
        name, records = "", dict[str, LaneRecord]()
        moved = self.moved
        for target, record, keep in self._records():
            if target != name and records:
                yield name, records
                records = {}
            name, records[record.key] = target, record
            if keep:
                moved[record.key] = record
        if records:
            yield name, records

    def __iter__(self) -> Iterator[str]:
        for name, records in self._by_target():
            self._current = (name, records)
            yield name
        self._current = None

    def __getitem__(self, name: str) -> Mapping[str, LaneRecord]:
        current = self._current
        if current is not None and current[0] == name:  # items() and values() read each target as handed out
            return current[1]
        found = {key: record for target, records in self._by_target() if target == name
                 for key, record in records.items()}
        if not found:
            raise KeyError(name)
        return found

    def __len__(self) -> int:
        return sum(1 for _ in self._by_target())


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
        emit_once: bool = False,
        recovered: dict[str, BitMap64] | None = None,
        clock: Clock | None = None,
        found_max: dict[str, int] | None = None,
        last_found: dict[str, int] | None = None,
        pages: PageBook | None = None,
        tails: dict[str, Schedule] | None = None,
    ) -> None:
        """``recovered``: found ids read back from the last run's feed tails, committed at open;
        ``clock``: the crawl's one clock (``IDCRAWL_NOW``), for the run's times and the tails' schedules;
        ``found_max``: target -> the highest id its stored state has found (a tail's news is above it);
        ``last_found``: a continued lane -> its stored last found id, kept while the lane finds none;
        ``pages``: the page schedule records, whose changes are committed with their ids' outcomes;
        ``tails``: the tails' schedules as stored when the run began (None: read from ``store``)."""
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
        #: found pages of the crawl scope on their way to the feeds (tokens: what harvests them), and those
        #: whose items are written (harvested at the next checkpoint, once the feeds are durable)
        self._unwritten_pages = UnwrittenItems(page_key)
        self._written_pages: list[Callable[[], None]] = []
        self._params = _Params(frontier.targets)  # the frontier's targets (all added before the recorder)
        self._durable_feeds = True
        self._run_id: int | None = None
        self._ended = self._feeds_done = self._store_closed = self._opened = False
        self._loop: Any = None
        self.commits = 0
        #: called at every checkpoint, after the feeds' flush (the URL queue of crawl scope commits its changes)
        self.also_commit: list[Callable[[], None]] = []
        self.emit_once = emit_once
        self._recovered = recovered or {}
        self._several_items = False  # some found id had more than one item: feed tails cannot be read back
        self._committed: dict[str, LaneRecord] = {}  # lane key -> its record as last committed
        #: the frontier's first lanes (in the order added; none is ever removed) as of the last commit: one of
        #: them still untouched (:attr:`~idcrawl.core.lanes.Lane.untouched`) was committed as it is (a lane never
        #: becomes untouched again), so no record is kept for it (most lanes of a job of many targets never move)
        self._lanes_committed = 0
        #: by lane index (the frontier's order): 1 for a lane the last commit (:meth:`close`'s) found settled
        #: and not pinned: its record can no longer change, so no copy of it is kept to compare with (a job
        #: of 100,000 targets would keep one per lane, all having moved, into its last moments)
        self._frozen = bytearray()
        self.pages = pages
        self._page_records: dict[tuple[str, int], Schedule | None] = {}  # changed page records, not committed yet
        self.clock = clock if clock is not None else Clock()
        #: target -> its tail's schedule as stored when the run began
        self._tails: dict[str, Schedule] = tails if tails is not None else store.tail_schedules()
        #: target -> its tail's schedule as the last commit left it (watch mode plans the next wave with it)
        self.schedules: dict[str, Schedule] = dict(self._tails)
        #: tail schedules whose re-probe of late ids this run planned (idcrawl.core.resume.late_pass):
        #: stored with the tails at the last commit, the walked ones' rule applied to them
        self.late: dict[str, Schedule] = {}
        #: tail schedules a sitemap made due (sitemaps as evidence: idcrawl.core.sitemaps), stored with
        #: the tails at the last commit unless the tail was walked (the walk's rule wins)
        self.evidence: dict[str, Schedule] = {}
        self.found_max = dict(found_max or {})  # target -> the highest id found, stored or in this run
        self.last_found = last_found or {}
        #: watch mode: :meth:`close` reads :attr:`next_page_at` after the last commit, the store still open
        self.watch = False
        #: watch mode: the earliest due time of the found pages as :meth:`close` left them (None: none)
        self.next_page_at: float | None = None

    # -- lifecycle ---------------------------------------------------------------

    def open(self) -> None:
        if self._run_id is None:  # else a watch session's later wave: the session's row goes on
            self._run_id = self.store.begin_run(self.clock.stamp(), list(self._params))
        recovered = {target: {Outcome.FOUND: ids} for target, ids in self._recovered.items() if ids}
        self._commit(self._params, recovered)
        self._opened = True  # from now on a failed write closes the crawl (before: the crawl does not start)
        # the feed exporter makes its slots on spider_opened, after this; no item is written before
        self.crawler.signals.connect(self._feeds_opened, signal=signals.spider_opened)
        self.crawler.signals.connect(self._item_written, signal=signals.item_scraped)
        self.crawler.signals.connect(self._item_written, signal=signals.item_dropped)
        self.crawler.signals.connect(self._feeds_closed, signal=signals.feed_exporter_closed)
        if self.interval > 0:
            self._loop = create_looping_call(self.checkpoint)
            self._loop.start(self.interval, now=False)

    def _feeds_opened(self) -> None:
        """Before the first item: end lines a kill cut short, then this run's first feed marks
        (committed after the ids read back from the last run's marks, so those stay read once)."""
        end_cut_lines(self.crawler)
        marks = self._marks()
        if marks is not None and marks.offsets and not self._store_closed:
            self._write(lambda: self.store.commit({}, {}, {}, feeds=marks))

    @property
    def run_id(self) -> int | None:
        """The run's row (:meth:`open` began it; None before)."""
        return self._run_id

    def continue_run(self, run_id: int) -> None:
        """Watch mode, before :meth:`open` of a later wave: the wave goes on in the session's run row
        (``run_id``, begun by the first wave) instead of a row of its own."""
        self._run_id = run_id

    def close(self, reason: str, counts: dict[str, int], watch: dict[str, int] | None = None) -> None:
        """Last commit and the run's record (``watch``: a watch session's counters, its row updated at
        each wave's end). The store stays open for found ids that only become durable when the feed
        exporter has closed."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.checkpoint(tails=True)
        if self._run_id is not None and not self._store_closed:  # closed: abandoned to another process
            run_id = self._run_id
            # the run's record holds no outcome: written even after a failed write (its reason says it)
            self._write(lambda: self.store.end_run(run_id, self.clock.stamp(), reason, counts, watch), always=True)
        if self.watch:
            self.next_page_at = self._next_page_due(self.clock.now())
        self._ended = True
        if self._feeds_done or not has_feed_exporter(self.crawler):
            self._close_store()

    def moved_pages(self, target: str, records: Mapping[int, Schedule]) -> None:
        """Page records a sitemap moved (sitemaps as evidence): committed at the next checkpoint, unless a
        fetch of this run changed the page's record meanwhile (its record is newer)."""
        for id_, record in records.items():
            self._page_records.setdefault((target, id_), record)

    def _next_page_due(self, now: float) -> float | None:
        """The earliest due time not before ``now`` of the found pages of this run's targets: the
        committed records (the store's :meth:`~idcrawl.state.base.StateStore.next_page_due`, one
        query per target) and the changed records still held back for their items."""
        if self.pages is None:
            return None
        pages = self.pages
        times = [self.store.next_page_due(name, now, pages.policy(name).gone_limit) for name in self._params]
        times += [at for (name, _), record in self._page_records.items() if record is not None
                  and name in self._params and record.gone < pages.policy(name).gone_limit
                  and (at := record.due_at()) >= now]
        return min((at for at in times if at is not None), default=None)

    def detach(self) -> None:
        """Watch mode, after :meth:`close` of a wave: when every found id is committed (local feeds),
        stop listening and close the store now (the next wave has its own recorder); otherwise the
        feeds' close still commits the rest, as at the end of a run."""
        if (not self._ended or self._written or self._unwritten.pending() or self._written_pages
                or self._unwritten_pages.pending()):
            return
        for handler, signal in ((self._feeds_opened, signals.spider_opened), (self._item_written, signals.item_scraped),
                                (self._item_written, signals.item_dropped),
                                (self._feeds_closed, signals.feed_exporter_closed)):
            self.crawler.signals.disconnect(handler, signal=signal)
        self._close_store()

    def _feeds_closed(self) -> None:
        """Feeds are closed (uploaded): whatever they hold is durable now."""
        self._feeds_done = True
        self._durable_feeds = True
        self.checkpoint(flush=False)
        if self._ended:
            self._close_store()

    def abandon(self) -> None:
        """Another process owns the state now (this one's lease ran out): commit nothing more."""
        self._store_closed = True

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
        if id_ > self.found_max.get(target, -1):
            self.found_max[target] = id_
        own = self._unwritten.expect(target, id_, outputs, lane_key)
        if self.pages is not None:
            self.pages.released(target, id_)
        if own > 1 and not self._several_items:
            # a kill could leave only some of its items in a feed: before they are written, no
            # feed of this run is read back any more (they go on being fetched again, at least once)
            self._several_items = True
            marks = self._marks()
            if marks is not None and marks.offsets and not self._store_closed:
                self._write(lambda: self.store.commit({}, {}, {}, feeds=marks))
        if not own:
            self._found(target, id_, lane_key)

    def hold_page(self, owner: str, url: str, outputs: list[Any], harvest: Callable[[], None]) -> bool:
        """A found page of the crawl scope (``owner``'s, answered at ``url``) releases ``outputs``: its
        harvest (``harvest()``: the URL queue records it) waits until the items that stand for it
        (:func:`~idcrawl.feeds.page_key`) are written, as a found id's commit does; False: it has none, harvest now."""
        return bool(self._unwritten_pages.expect(owner, url, outputs, harvest))

    def _item_written(self, item: Any, *args: Any, **kwargs: Any) -> None:
        page = self._unwritten_pages.written(item)
        if page is not None:
            self._written_pages.append(page[1])
            return
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

    def checkpoint(self, flush: bool = True, *, tails: bool = False) -> None:
        """Commit what is durable now; ``tails`` (the last one): with the tails walked to their margin."""
        if self._store_closed or storage_failed(self.crawler) is not None:
            return
        if flush:
            self._durable_feeds = flush_feeds(self.crawler)
        else:  # the feeds are closed; the WARC file may still be open
            flush_archive(self.crawler)
        if storage_failed(self.crawler) is not None:  # a feed write failed: what it lost is never committed found
            return
        if self._durable_feeds:  # found pages whose items are on disk now: harvested, committed just below
            harvests, self._written_pages = self._written_pages, []
            for harvest in harvests:
                harvest()
        for commit in self.also_commit:  # after the flush: the items written so far are on disk
            commit()
        outcomes, self._pending = self._pending, defaultdict(lambda: defaultdict(BitMap64))
        pages = self._ready_pages()
        marks = None
        if self._durable_feeds:
            for (target, id_) in self._written:
                outcomes[target][Outcome.FOUND].add(id_)
            self._written = {}
            marks = self._marks()
        walked = self._walked_tails() if tails else None
        self._commit({}, outcomes, marks, walked, pages, last=tails)
        if walked is not None:
            self.schedules = {**self._tails, **walked}
        self._pending_count = len(self._written)
        self.commits += 1

    def _ready_pages(self) -> dict[str, dict[int, Schedule | None]] | None:
        """Changed page records whose ids' items are written (a changed page's record goes with its item:
        committed before it, a kill would leave the change recorded and its item never emitted)."""
        if self.pages is None:
            return None
        self._page_records.update(self.pages.take_changes())
        held = {key for key, _ in self._unwritten.pending()} | self.pages.awaiting
        if not self._durable_feeds:
            held.update(self._written)
        ready = [(key, record) for key, record in self._page_records.items() if key not in held]
        for key, _ in ready:
            del self._page_records[key]
        return by_target(ready) or None

    def _commit(
        self, params: Mapping[str, dict[str, Any]], outcomes: dict[str, dict[Outcome, BitMap64]],
        feeds: FeedMarks | None = None,
        tails: dict[str, Schedule] | None = None,
        pages: dict[str, dict[int, Schedule | None]] | None = None, *, last: bool = False,
    ) -> None:
        """One transaction; only the lane records that changed since the last commit are written
        (a job of 100,000 targets would otherwise rewrite every lane's record every few seconds).
        ``last``: the run's last commit (:meth:`close`), which freezes the settled lanes' records."""
        lanes = len(self.frontier.lanes)
        frozen = bytearray(lanes) if last else None
        changed = _Changes(lambda: self._changed_records(frozen))
        if not self._write(lambda: self.store.commit(params, outcomes, changed, feeds=feeds, pages=pages,
                                                     tails=tails)):
            return
        self._lanes_committed = lanes
        self._committed.update(changed.moved)
        if frozen is not None:
            self._frozen = frozen
            committed = self._committed
            for key in compress(self.frontier.lanes, frozen):
                committed.pop(key, None)

    def _changed_records(self, frozen: bytearray | None = None) -> Iterator[tuple[str, LaneRecord, bool]]:
        """The lane records that differ from the committed ones, with their target's name, in the
        frontier's lane order (a lane's record is compared as its fields' values: no record is built
        for a lane that did not move since the last commit, nor kept for one committed untouched: its
        values depend on nothing that moves). Each with whether to keep it to compare with (``frozen``
        given, the last commit: a settled lane without a pin is marked there instead, not kept: a
        settled lane decides nothing more, and what else its record is made of does not move)."""
        pins = self._pins()
        committed, lanes_committed, was_frozen = self._committed, self._lanes_committed, self._frozen
        frontier = self.frontier
        lanes, direction, lane_target = frontier.lanes, frontier.lane_direction, frontier.lane_target
        for index, (key, state) in enumerate(lanes.states()):
            if state is None and index < lanes_committed:  # not reached yet (untouched), committed so
                continue
            if direction[key] == "holes":  # list lanes (holes, due pages): no durable record
                continue
            if isinstance(state, Lane):
                if index < lanes_committed and state.untouched:  # committed untouched (no found id: no pin)
                    continue
                pin = pins.get(key)
                if pin is None and index < len(was_frozen) and was_frozen[index]:  # as the last commit wrote it
                    continue
                values = self._record_values(key, state, pin)
                keep, settled = not state.untouched, state.settled  # (an untouched lane's record: not kept)
            else:  # not reached yet: nothing dispensed (no pin); closed (settled) with reason ``state``, or not
                pin = None
                if index < len(was_frozen) and was_frozen[index]:
                    continue
                start, step, stop = frontier.fresh_walk(key)
                values = (key, self.origins.get(key, start), step, stop, start, self.last_found.get(key), None, state)
                keep, settled = state is not None, state is not None
            if frozen is not None and pin is None and settled:
                frozen[index], keep = 1, False
            last = committed.get(key)
            if last is not None and _record_values(last) == values:
                continue
            yield lane_target[key].name, LaneRecord(*values), keep

    def _write(self, write: Callable[[], object], *, always: bool = False) -> bool:
        """One write of the store, unless a write of this crawl failed (``always``: even then); a failed
        one (full disk, read-only file system: :class:`~idcrawl.state.base.StateError`) closes the crawl
        (``idcrawl_storage_error``; a Redis state out of memory or not answering: the error's reason) and
        ends the commits: the state stays what the last commit left."""
        if storage_failed(self.crawler) is not None and not always:
            return False
        try:
            write()
        except StateError as exc:
            if not self._opened:
                raise
            path = str(getattr(self.store, "path", "the state"))
            where = exc.where or path
            problem = str(exc).removeprefix(f"state file {path!r}: ").removeprefix(f"{where}: ")
            if problem.startswith("cannot be written (") and problem.endswith(")"):
                problem = problem[len("cannot be written ("):-1]
            report_storage_error(self.crawler, where, problem, exc.reason or REASON)
            return False
        return True

    def _walked_tails(self) -> dict[str, Schedule]:
        """The schedule of each tail this run walked to its margin (an ascending lane cut by it), the
        recrawl rule applied at the clock's now (:func:`idcrawl.core.recrawl.tail_after_run`): news = the
        target's highest found id (stored, or found by this run or a killed one before it) above the
        schedule's ``last_found``. A lane stopped before its margin (a kill, a limit) or
        at its bound is no visit: its tail's schedule stays as it was (still due). ``resume=reset``
        starts the schedule over, as it does the target's state."""
        now = self.clock.now()
        walked: dict[str, Schedule] = dict(self.evidence)  # made due by a sitemap, unless walked
        for name, late in self.late.items():  # a re-probe of late ids planned, the tail walked or not
            moved = walked.get(name)
            walked[name] = late if moved is None else dataclasses.replace(
                moved, late_at=late.late_at, late_below=late.late_below)
        for key, state in self.frontier.lanes.states():  # a lane not reached yet: its reason (None: not closed)
            if state is None or (isinstance(state, str) and state != MARGIN):  # (a lane closed unreached: not cut)
                continue
            if self.frontier.lane_direction[key] != "asc":
                continue
            lane = state if isinstance(state, Lane) else self.frontier.lanes.peek(key)
            if not lane.settled or lane.reason != MARGIN:
                continue
            target = self.frontier.lane_target[key]
            previous = None if target.resume in RESET_MODES else self.late.get(target.name,
                                                                             self._tails.get(target.name))
            told = self.evidence.get(target.name)  # a sitemap of this run listed newer ids: kept unless passed
            if previous is not None and told is not None and told.listed is not None:
                previous = dataclasses.replace(previous, listed=max(told.listed, previous.listed or told.listed))
            walked[target.name] = tail_after_run(previous, target.name, self.found_max.get(target.name), now,
                                                 target.policy, cut=lane.cut_at)
        return walked

    def _marks(self) -> FeedMarks | None:
        """This run's feed marks, when ``IDCRAWL_STATE_EMIT_ONCE`` is on (feeds flushed just before)."""
        if not self.emit_once or self._run_id is None:
            return None
        offsets = feed_marks(self.crawler)
        if self._several_items:
            offsets = dict.fromkeys(offsets, -1)
        return FeedMarks(self._run_id, offsets)

    def _pins(self) -> dict[str, int]:
        """Lane -> its earliest found id not yet committed (its record is pinned before it)."""
        pins: dict[str, int] = {}
        uncommitted = [(id_, lane_key) for (_t, id_), lane_key in self._unwritten.pending()]
        uncommitted += [(id_, lane_key) for (_t, id_), lane_key in self._written.items()]
        for id_, lane_key in uncommitted:
            step = self.frontier.lanes[lane_key].step
            if lane_key not in pins or (id_ - pins[lane_key]) * step < 0:
                pins[lane_key] = id_
        return pins

    def _record_values(self, key: str, lane: Lane[Any], pin: int | None) -> tuple[Any, ...]:
        """The fields of the lane's :class:`LaneRecord`, in their order."""
        origin = self.origins.get(key, lane.start)
        cursor = lane.first_undecided if lane.cut_at is None else lane.cut_at + lane.step
        if pin is not None and (pin - cursor) * lane.step < 0:
            return (key, origin, lane.step, lane.stop, pin, None, None, None)
        reason = lane.reason if lane.settled else None
        # a continued lane that found nothing yet keeps its stored last found id (a later resume restarts
        # just after it, not from the lane's first start)
        last = lane.last_found if lane.last_found is not None else self.last_found.get(key)
        return (key, origin, lane.step, lane.stop, cursor, last, lane.cut_at, reason)
