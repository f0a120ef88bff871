"""Page records of a fleet (``resume=due``): :class:`FleetPageRecords`, the page book's part in Redis.

The records use the Redis state store's layout (``P pages:<target>``, the due index ``P pagedue:<target>``),
are loaded for the pages a run revisits, and are written by ``RECORD`` (``page_record.lua``) in the same
atomic call as their id's outcome and item. See "Found pages in a fleet" in docs/recrawl.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pyroaring import BitMap64

from idcrawl.core.pagebook import PageBook, schedule_to_json
from idcrawl.core.recrawl import Policy, Schedule
from idcrawl.core.sitemaps import SitemapUrl, pages_by_sitemap
from idcrawl.state import decode
from idcrawl.state.keys import JobKeys
from idcrawl.state.redis import watched

if TYPE_CHECKING:
    from idcrawl.state.redis import RedisStateStore

__all__ = ["FleetPageRecords", "PageWrite", "fleet_due_ids", "is_due_lane", "move_by_sitemap"]


class PageWrite(NamedTuple):
    """A page record on its way to ``RECORD`` with its id's outcome (``page_record.lua``)."""

    target: str
    id: int
    record: str  # the record's JSON (schedule_to_json); '' deletes it
    due_at: str  # last_crawled + update_duration (seconds), the index's score; '' when deleted
    emits: bool  # the fetch gets an item (a new or changed page): no record if the item is dropped past the cut

    @classmethod
    def of(cls, target: str, id_: int, record: Schedule | None, emits: bool) -> PageWrite:
        if record is None:
            return cls(target, id_, "", "", emits)
        return cls(target, id_, schedule_to_json(record), repr(record.due_at()), emits)


def fleet_due_ids(store: RedisStateStore, book: PageBook, target: str, found: Iterable[int], now: float) -> list[int]:
    """The found ids of ``target`` due at ``now``, most overdue first (:meth:`PageBook.due_ids`, the single
    process's computation), with the records of the due pages loaded into ``book``.

    With the index of due times (:meth:`RedisStateStore.index_pages`: built once for a job written before
    it), only the records due by it are read, O(log pages + due), and the found ids without a record (due
    first) are the found ids the index does not hold (ids only); without it (a read-only store of such a
    job), every record is read."""
    if store.index_pages(target):  # a watch wave's window (book.coalescing) reads a little further
        book.load(target, store.due_page_records(target, now + book.coalescing.widest))
        found = BitMap64(found) - store.page_ids(target)
    else:
        book.load(target, store.load_pages(target))
    return book.due_ids(target, now, found=found)


def move_by_sitemap(client: Any, prefix: str, target: str, entries: Mapping[int, SitemapUrl], now: float,
                    policy: Policy) -> dict[int, Schedule]:
    """The stored records of ``target``'s found pages moved by a sitemap's entries (id -> entry:
    :func:`idcrawl.core.sitemaps.pages_by_sitemap`), written with their due index (``P pages:<target>``,
    ``P pagedue:<target>``) in one ``WATCH``/``MULTI`` transaction: a record a worker's ``RECORD`` wrote
    meanwhile is read again. Returns the moved records (id -> record)."""
    keys = JobKeys(prefix)
    pages, due = keys.pages(target), keys.page_due(target)
    ids = list(entries)
    if not ids:
        return {}

    def read(pipe: Any) -> tuple[dict[int, Schedule], Callable[[Any], object] | None]:
        raws = pipe.hmget(pages, [str(id_) for id_ in ids])
        records = {id_: decode.page_record(raw, f"key {pages!r}", target, id_)[1]
                   for id_, raw in zip(ids, raws, strict=True) if raw is not None}
        moved = pages_by_sitemap(records, entries, now, policy)
        if not moved:
            return {}, None

        def write(pipe: Any) -> None:
            pipe.hset(pages, mapping={str(i): schedule_to_json(r) for i, r in moved.items()})
            pipe.zadd(due, {str(i): r.due_at() for i, r in moved.items()})

        return moved, write

    return watched(client, [pages], read)


def is_due_lane(lane_key: str, target: str) -> bool:
    """Whether ``lane_key`` is a list lane of found pages due for a revisit (``<target>:due``, then
    ``<target>:due2`` ... for the job's later resumes: ``resume.lua``)."""
    suffix = lane_key[len(target) + 1:] if lane_key.startswith(f"{target}:") else ""
    return suffix == "due" or (suffix.startswith("due") and suffix[3:].isdigit())


class FleetPageRecords:
    """One worker's page records in the job's keys: loaded into its :class:`PageBook`, written with the
    outcomes (``RECORD``). The book's :class:`~idcrawl.core.pagebook.PageSink`: a visit's changed record
    waits here for its id's outcome (:meth:`outgoing`)."""

    def __init__(self, client: Any, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        #: target -> the ids whose stored record this worker looked up (a visited one is not read again)
        self.looked_up: dict[str, set[int]] = {}
        self._fetched: dict[tuple[str, int], PageWrite] = {}  # visited, outcome not recorded yet
        #: records written with their outcomes by this worker
        self.written = 0

    def _store(self, read_only: bool = True) -> RedisStateStore:
        from idcrawl.state.redis import RedisStateStore

        return RedisStateStore(self.client, self.prefix, read_only=read_only)

    def due_ids(self, book: PageBook, target: str, found: Iterable[int]) -> list[int]:
        """:func:`fleet_due_ids` at the book's now (the index rebuilt once for a job written before it)."""
        due = fleet_due_ids(self._store(read_only=False), book, target, found, book.now())
        self.looked_up.setdefault(target, set()).update(book.schedules.get(target, {}))
        return due

    def load_ids(self, book: PageBook, target: str, ids: Iterable[int]) -> int:
        """The stored records of ``ids`` not looked up yet (the ids of a due run this worker joined) into
        ``book``: O(len(ids)); returns how many were read."""
        seen = self.looked_up.setdefault(target, set())
        new = [id_ for id_ in ids if id_ not in seen]
        if not new:
            return 0
        seen.update(new)
        records = self._store().load_page_ids(target, new)
        book.schedules.setdefault(target, {}).update(records)
        return len(records)

    def visited(self, changes: Mapping[tuple[str, int], Schedule | None], emits: bool) -> None:
        """A visit's changed records wait for the id's outcome (:meth:`outgoing`)."""
        for key, record in changes.items():
            self._fetched[key] = PageWrite.of(key[0], key[1], record, emits)

    def outgoing(self, target: str, id_: int) -> PageWrite | None:
        """The record to write with the outcome of ``id_`` (None: the fetch changed none)."""
        return self._fetched.get((target, id_))

    def sent(self, page: PageWrite, written: bool) -> None:
        """``RECORD`` answered: the record went with the outcome (``written``: and was written)."""
        if self._fetched.get((page.target, page.id)) is page:
            del self._fetched[(page.target, page.id)]
        self.written += written
