"""SQLite state store (stdlib ``sqlite3``, WAL): the embedded default.

Every commit is one transaction; outcomes are roaring bitmaps, a row per target outcome.
The tables added to older files: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.pagebook import schedule_to_json
from idcrawl.core.ranges import LaneRecord, merge_outcomes
from idcrawl.core.recrawl import Schedule, record_of
from idcrawl.core.urlqueue import QueuedUrl
from idcrawl.state import decode
from idcrawl.state.base import FeedMarks, RunRecord, StateError, StateStore, TargetState

__all__ = ["SCHEMA_VERSION", "SqliteStateStore"]

SCHEMA_VERSION = 1
#: A lane record's fields, in order (``dataclasses.asdict`` deep-copies: slow for 100,000 lanes).
_RECORD_FIELDS = tuple(f.name for f in fields(LaneRecord))
APPLICATION = "idcrawl"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE targets (name TEXT PRIMARY KEY, params TEXT NOT NULL);
CREATE TABLE outcomes (
    target TEXT NOT NULL, outcome TEXT NOT NULL, ids BLOB NOT NULL,
    PRIMARY KEY (target, outcome)
);
CREATE TABLE lanes (target TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (target, key));
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, ended_at TEXT,
    finish_reason TEXT, counts TEXT NOT NULL DEFAULT '{}', targets TEXT, watch TEXT
);
"""
#: Columns added after schema version 1 shipped, each with how an older file gets it. An older
#: idcrawl ignores them; a file without them is read as it is (``runs()``: ``targets`` None)
#: and gets them when opened for writing.
_ADDED_COLUMNS = {("runs", "targets"): "ALTER TABLE runs ADD COLUMN targets TEXT",
                  ("urls", "priority"): "ALTER TABLE urls ADD COLUMN priority REAL",
                  **{("urls", column): f"ALTER TABLE urls ADD COLUMN {column} TEXT"
                     for column in ("checksum", "etag", "last_modified", "capture")},
                  ("urls", "read_at"): "ALTER TABLE urls ADD COLUMN read_at REAL",
                  ("runs", "watch"): "ALTER TABLE runs ADD COLUMN watch TEXT"}
#: A table added after schema version 1 (additive: created in older files opened for writing).
_FEEDS = (
    "CREATE TABLE IF NOT EXISTS feeds ("
    "run INTEGER NOT NULL, path TEXT NOT NULL, offset INTEGER NOT NULL, PRIMARY KEY (run, path))"
)
#: Tail schedules (recrawl, additive like ``feeds``): target -> its schedule as JSON.
_TAILS = "CREATE TABLE IF NOT EXISTS tails (target TEXT PRIMARY KEY, record TEXT NOT NULL)"
#: Page schedule records (recrawl of found pages), added the same way.
_PAGES = (
    "CREATE TABLE IF NOT EXISTS pages ("
    "target TEXT NOT NULL, id INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (target, id))"
)

#: A page's due time (``Schedule.due_at()``) in SQL, and an index on it per target: watch mode's
#: wake-up (:meth:`SqliteStateStore.next_page_due`) reads the earliest without a scan of the pages.
_PAGE_DUE = "(json_extract(record, '$.last_crawled') + json_extract(record, '$.update_duration'))"
_PAGES_DUE_INDEX = f"CREATE INDEX IF NOT EXISTS pages_due ON pages (target, {_PAGE_DUE})"
_DUE_PAGES = (f"SELECT id, record FROM pages WHERE target = ? AND {_PAGE_DUE} <= ?")  # noqa: S608 - constants
_NEXT_PAGE_DUE = (f"SELECT {_PAGE_DUE} FROM pages WHERE target = ? AND {_PAGE_DUE} >= ? "  # noqa: S608 - constants
                  f"AND json_extract(record, '$.gone') < ? ORDER BY {_PAGE_DUE} LIMIT 1")


def _id_row(id_: int) -> int:
    """An id (0 .. 2**64-1) as SQLite's signed 64-bit INTEGER: ids from 2**63 wrap to negatives."""
    return id_ - (1 << 64) if id_ >= 1 << 63 else id_


def _row_id(value: int) -> int:
    """The id of a page row (:func:`_id_row` undone)."""
    return value + (1 << 64) if value < 0 else value


#: The columns each table must have (the tables added after the first schema: only if present).
_COLUMNS = {
    "meta": {"key", "value"}, "targets": {"name", "params"}, "outcomes": {"target", "outcome", "ids"},
    "lanes": {"target", "key", "record"}, "runs": {"id", "started_at", "ended_at", "finish_reason", "counts"},
}
_ADDED_TABLES = {
    "feeds": {"run", "path", "offset"}, "tails": {"target", "record"}, "pages": {"target", "id", "record"},
    "urls": {"url", "owner", "collection", "crawl_profiles", "hops", "offsite_hops", "state", "next_harvest",
             "last_harvest", "not_found", "errors", "cycles", "paths", "links"},
}

#: The URL queue of crawl scope (:mod:`idcrawl.core.urlqueue`): one row per URL (additive, like ``feeds``).
_URLS = (
    "CREATE TABLE IF NOT EXISTS urls ("
    "url TEXT PRIMARY KEY, owner TEXT NOT NULL, collection TEXT, crawl_profiles TEXT NOT NULL, "
    "hops INTEGER NOT NULL, offsite_hops INTEGER NOT NULL, state TEXT NOT NULL, next_harvest REAL, "
    "last_harvest REAL, not_found INTEGER NOT NULL, errors INTEGER NOT NULL, cycles INTEGER NOT NULL, "
    "paths TEXT NOT NULL, links TEXT, priority REAL, checksum TEXT, etag TEXT, last_modified TEXT, capture TEXT, "
    "read_at REAL)"
)
#: The columns of ``urls`` added to older files (read as NULL from a file without them).
_URL_ADDED = ("priority", "checksum", "etag", "last_modified", "capture", "read_at")
_URL_COLUMNS = ("url, owner, collection, crawl_profiles, hops, offsite_hops, state, next_harvest, last_harvest, "
                f"not_found, errors, cycles, paths, links, {', '.join(_URL_ADDED)}")
_URL_UPSERT = (f"INSERT OR REPLACE INTO urls ({_URL_COLUMNS}) "  # noqa: S608 - the columns above, not input
               f"VALUES ({', '.join('?' * len(_URL_COLUMNS.split(',')))})")


#: The ``meta`` key of the targets' scope marks stored with the URL queue (:func:`idcrawl.core.scope.scope_marks`).
_SCOPE_MARKS = "url_scope_marks"


def _url_row(entry: QueuedUrl) -> tuple[Any, ...]:
    r = entry.record
    return (r.url, r.owner, r.collection, json.dumps(r.crawl_profiles), r.hops.hops, r.hops.offsite,
            entry.state.value, r.next_harvest, r.last_harvest, r.not_found, r.errors, r.cycles,
            json.dumps([[p.hops, p.offsite] for p in entry.paths]  # the owner's, then the other seeds' claims
                       + [[p.hops, p.offsite, seed] for seed, p in entry.claims if seed != r.owner]),
            None if entry.links is None else json.dumps(entry.links), r.priority, r.checksum, r.etag,
            r.last_modified, None if r.capture is None else json.dumps(r.capture), r.read_at)


class SqliteStateStore(StateStore):
    keeps_urls = True

    def __init__(self, path: str | Path, *, timeout: float = 5.0, read_only: bool = False) -> None:
        self.path = Path(path)
        if read_only:
            self._db = self._open_read_only(timeout)
            return
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            if existed:
                self._check(self.path)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if not existed:
                with self._transaction():
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        self._db.execute(statement)
                    self._db.executemany(
                        "INSERT INTO meta VALUES (?, ?)",
                        [("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION))],
                    )
            else:
                self._add_columns()
            self._db.execute(_FEEDS)
            self._db.execute(_URLS)
            self._db.execute(_PAGES)
            self._db.execute(_PAGES_DUE_INDEX)
            self._db.execute(_TAILS)
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None
        except OSError as exc:
            raise StateError(f"state file {str(self.path)!r}: {exc.strerror or exc}") from None

    @staticmethod
    def _explain(exc: sqlite3.Error) -> str:
        text = str(exc)
        if "locked" in text:
            return "is locked by another process (is another crawl of this job running?)"
        if "not a database" in text or "malformed" in text:
            return "is not an idcrawl state file (corrupt or foreign)"
        if "disk" in text or "full" in text:
            return f"cannot be written ({text})"
        return text

    def _open_read_only(self, timeout: float) -> sqlite3.Connection:
        """Open an existing file only to read it: nothing is created, written or converted.

        A file whose last writer closed cleanly (no ``-wal``/``-shm`` beside it) is
        opened immutable, so not even those are created (a crawl that starts writing
        meanwhile is not seen); otherwise it is read through its WAL, which may hold
        the last commits of a running or killed crawl.
        """
        if self.path.is_dir():
            raise StateError(f"state file {str(self.path)!r}: is a folder, not a state file")
        if not self.path.is_file():
            raise StateError(f"state file {str(self.path)!r}: does not exist")
        if self.path.stat().st_size == 0:
            raise StateError(f"state file {str(self.path)!r}: is empty, not an idcrawl state file")
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        if not any(Path(f"{self.path}{suffix}").exists() for suffix in ("-wal", "-shm")):
            uri += "&immutable=1"
        self._check(self.path, uri)
        try:
            return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None

    def _columns(self, table: str) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT name FROM pragma_table_info(?)", (table,))}

    def _add_columns(self) -> None:
        """Give a file written by an older idcrawl the columns added since (nothing is rewritten)."""
        missing = [sql for (table, column), sql in _ADDED_COLUMNS.items()
                   if (have := self._columns(table)) and column not in have]  # a table not there yet: made whole
        if missing:
            with self._transaction() as db:
                for sql in missing:
                    db.execute(sql)

    def _check(self, path: Path, uri: str | None = None) -> None:
        """Validate an existing file read-only, before anything can write to it: its meta and its tables."""
        try:
            db = sqlite3.connect(uri or f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
                tables = {name: {row[0] for row in db.execute("SELECT name FROM pragma_table_info(?)", (name,))}
                          for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
            finally:
                db.close()
        except sqlite3.Error as exc:
            if "no such table" in str(exc):
                raise StateError(f"state file {str(path)!r}: is a SQLite file, but not an idcrawl state file") from None
            raise StateError(f"state file {str(path)!r}: {self._explain(exc)}") from None
        if rows.get("application") != APPLICATION:
            raise StateError(f"state file {str(path)!r}: is a SQLite file, but not an idcrawl state file")
        with decode.reading(f"state file {str(path)!r}"):
            version = decode.schema_version(rows.get("schema_version", "0"))
            if version > SCHEMA_VERSION:
                raise StateError(
                    f"state file {str(path)!r}: schema version {version} is newer than this idcrawl "
                    f"understands ({SCHEMA_VERSION}); upgrade idcrawl"
                )
            for table, columns in {**_COLUMNS, **{t: c for t, c in _ADDED_TABLES.items() if t in tables}}.items():
                if table not in tables:
                    raise decode.DamagedState(f"table {table}", None, "the table is missing")
                if columns - tables[table]:
                    missing = sorted(columns - tables[table])[0]
                    raise decode.DamagedState(f"table {table}", None, f"the table lacks column {missing!r}")

    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type: object, *rest: object) -> None:
            self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")

    def _transaction(self) -> SqliteStateStore._Tx:
        return self._Tx(self._db)

    # -- reads ----------------------------------------------------------------------

    @property
    def _source(self) -> str:
        return f"state file {str(self.path)!r}"

    def _rows(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._db.execute(query, params).fetchall()
        except sqlite3.Error as exc:
            raise StateError(f"{self._source}: {self._explain(exc)}") from None

    def targets(self) -> list[str]:
        names = [row[0] for row in self._rows("SELECT name FROM targets ORDER BY name")]
        with decode.reading(self._source):
            for name in names:
                if not isinstance(name, str):
                    raise decode.DamagedState("table targets", None, f"a target name {name!r} is not text")
        return names

    def load(self, name: str) -> TargetState | None:
        row = self._rows("SELECT params FROM targets WHERE name = ?", (name,))
        if not row:
            return None
        with decode.reading(self._source):
            state = TargetState(name, decode.params(row[0][0], "table targets", name))
            for outcome, blob in self._rows("SELECT outcome, ids FROM outcomes WHERE target = ?", (name,)):
                kind = decode.outcome(outcome, "table outcomes", name)
                state.outcomes[kind] = decode.bitmap(blob, "table outcomes", name, kind.value)
            for key, record in self._rows("SELECT key, record FROM lanes WHERE target = ?", (name,)):
                if not isinstance(key, str):
                    raise decode.DamagedState("table lanes", name, f"a lane key {key!r} is not text")
                state.lanes[key] = decode.lane_record(record, "table lanes", name, key)
        return state

    def _additive_rows(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of ``query`` on a table added after the first schema (``feeds``, ``urls``, ``pages``,
        ``tails``); none from an older file opened read-only, which does not have it."""
        try:
            return self._db.execute(query, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise StateError(f"{self._source}: {self._explain(exc)}") from None
        except sqlite3.Error as exc:
            raise StateError(f"{self._source}: {self._explain(exc)}") from None

    def feed_marks(self) -> FeedMarks | None:
        rows = self._additive_rows("SELECT run, path, offset FROM feeds WHERE run = (SELECT MAX(run) FROM feeds)")
        if not rows:
            return None
        with decode.reading(self._source):
            marks = [decode.feed_mark(run, path, offset, "table feeds") for run, path, offset in rows]
        return FeedMarks(marks[0][0], {path: offset for _, path, offset in marks})

    def load_urls(self) -> list[QueuedUrl]:
        have = self._columns("urls")
        columns = _URL_COLUMNS
        for column in _URL_ADDED:  # an older file, opened read-only, without them
            if column not in have:
                columns = columns.replace(f" {column}", " NULL")
        rows = self._additive_rows(f"SELECT {columns} FROM urls ORDER BY url")  # noqa: S608
        with decode.reading(self._source):
            return [decode.url_entry(row, "table urls") for row in rows]

    def _page_records(self, name: str, rows: Iterable[tuple[Any, Any]]) -> dict[int, Schedule]:
        """Rows ``(id, record)`` of the ``pages`` table of target ``name``, decoded."""
        with decode.reading(self._source):
            return dict(decode.page_record(record, "table pages", name, _row_id(row) if isinstance(row, int) else row)
                        for row, record in rows)

    def load_pages(self, name: str) -> dict[int, Schedule]:
        rows = self._additive_rows("SELECT id, record FROM pages WHERE target = ?", (name,))
        return self._page_records(name, rows)

    def load_page_ids(self, name: str, ids: Sequence[int]) -> dict[int, Schedule]:
        """From the primary key (the ids as one JSON array): O(len(ids) log pages)."""
        if not ids:
            return {}
        rows = self._additive_rows("SELECT id, record FROM pages WHERE target = ? AND id IN "
                                   "(SELECT value FROM json_each(?))", (name, json.dumps([int(i) for i in ids])))
        return self._page_records(name, rows)

    def due_page_records(self, name: str, until: float) -> dict[int, Schedule]:
        """From the ``pages_due`` index: O(log pages + due), the records not due by ``until`` unread."""
        rows = self._additive_rows(_DUE_PAGES, (name, until))
        return self._page_records(name, rows)

    def page_ids(self, name: str) -> BitMap64:
        """From the primary key (ids only: no record read or decoded)."""
        return BitMap64(_row_id(row) for row, in self._additive_rows("SELECT id FROM pages WHERE target = ?", (name,)))

    def next_page_due(self, name: str, now: float, gone_limit: int) -> float | None:
        """From the ``pages_due`` index: O(log pages), plus the records off the schedule it steps over."""
        rows = self._additive_rows(_NEXT_PAGE_DUE, (name, now, gone_limit))
        if rows and not isinstance(rows[0][0], (int, float)):
            with decode.reading(self._source):
                raise decode.DamagedState("table pages", name, f"a page record's due time is {rows[0][0]!r}")
        return float(rows[0][0]) if rows else None

    def tail_schedules(self) -> dict[str, Schedule]:
        rows = self._additive_rows("SELECT target, record FROM tails ORDER BY target")
        with decode.reading(self._source):
            return {name: decode.tail_record(record, "table tails", name) for name, record in rows}

    def runs(self) -> list[RunRecord]:
        columns = self._columns("runs")  # an older file, opened read-only, lacks the added ones: not recorded
        added = ", ".join(name if name in columns else "NULL" for name in ("targets", "watch"))
        query = f"SELECT id, started_at, ended_at, finish_reason, counts, {added} FROM runs ORDER BY id"  # noqa: S608
        names = ("id", "started_at", "ended_at", "finish_reason", "counts", "targets", "watch")
        with decode.reading(self._source):
            return [decode.run_record(dict(zip(names, row, strict=True)), "table runs") for row in self._rows(query)]

    # -- writes ---------------------------------------------------------------------

    def commit(
        self,
        params: Mapping[str, dict[str, Any]],
        outcomes: Mapping[str, Mapping[Outcome, BitMap64]],
        lanes: Mapping[str, Mapping[str, LaneRecord]],
        feeds: FeedMarks | None = None,
        pages: Mapping[str, Mapping[int, Schedule | None]] | None = None,
        tails: Mapping[str, Schedule] | None = None,
    ) -> None:
        try:
            with self._transaction() as db:
                db.executemany(  # one statement for every target (a job may have 100,000)
                    "INSERT INTO targets VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET params = excluded.params",
                    ((name, json.dumps(values, sort_keys=True)) for name, values in params.items()),
                )
                for name, by_outcome in outcomes.items():
                    if not any(by_outcome.values()):
                        continue
                    rows = db.execute("SELECT outcome, ids FROM outcomes WHERE target = ?", (name,)).fetchall()
                    existing = {Outcome(o): BitMap64.deserialize(blob) for o, blob in rows}
                    merged = merge_outcomes(existing, dict(by_outcome))
                    db.execute("DELETE FROM outcomes WHERE target = ?", (name,))
                    db.executemany(
                        "INSERT INTO outcomes VALUES (?, ?, ?)",
                        [(name, outcome.value, ids.serialize()) for outcome, ids in merged.items()],
                    )
                db.executemany(  # one statement for every lane (a job may have 100,000)
                    "INSERT INTO lanes VALUES (?, ?, ?) "
                    "ON CONFLICT(target, key) DO UPDATE SET record = excluded.record",
                    ((name, key, json.dumps({f: getattr(record, f) for f in _RECORD_FIELDS}))
                     for name, records in lanes.items() for key, record in records.items()),
                )
                if feeds is not None:
                    db.executemany(
                        "INSERT INTO feeds VALUES (?, ?, ?) "
                        "ON CONFLICT(run, path) DO UPDATE SET offset = excluded.offset",
                        [(feeds.run_id, path, offset) for path, offset in feeds.offsets.items()],
                    )
                for name, records in (pages or {}).items():
                    db.executemany(
                        "INSERT INTO pages VALUES (?, ?, ?) "
                        "ON CONFLICT(target, id) DO UPDATE SET record = excluded.record",
                        [(name, _id_row(id_), schedule_to_json(r)) for id_, r in records.items() if r is not None],
                    )
                    db.executemany("DELETE FROM pages WHERE target = ? AND id = ?",
                                   [(name, _id_row(id_)) for id_, r in records.items() if r is None])
                if tails:
                    db.executemany(
                        "INSERT INTO tails VALUES (?, ?) ON CONFLICT(target) DO UPDATE SET record = excluded.record",
                        [(name, json.dumps(record_of(schedule))) for name, schedule in tails.items()],
                    )
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None

    def load_scope_marks(self) -> dict[str, str] | None:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (_SCOPE_MARKS,)).fetchone()
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None
        if row is None:
            return None
        with decode.reading(self._source):
            return decode.scope_marks(row[0], "table meta")

    def commit_urls(self, changed: Sequence[QueuedUrl], deleted: Sequence[str],
                    marks: Mapping[str, str] | None = None) -> None:
        if not changed and not deleted and marks is None:
            return
        try:
            with self._transaction() as db:
                db.executemany("DELETE FROM urls WHERE url = ?", ((url,) for url in deleted))
                db.executemany(_URL_UPSERT, (_url_row(entry) for entry in changed))
                if marks is not None:
                    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               (_SCOPE_MARKS, json.dumps(dict(marks), sort_keys=True)))
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None

    def reset(self, name: str) -> None:
        """Forget a target's outcomes, lanes, page records and tail schedule (a fresh crawl); run history stays."""
        try:
            with self._transaction() as db:
                db.execute("DELETE FROM outcomes WHERE target = ?", (name,))
                db.execute("DELETE FROM lanes WHERE target = ?", (name,))
                db.execute("DELETE FROM pages WHERE target = ?", (name,))
                db.execute("DELETE FROM tails WHERE target = ?", (name,))
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None

    def begin_run(self, started_at: str, targets: Sequence[str] | None = None) -> int:
        names = None if targets is None else json.dumps(sorted(targets))
        try:
            with self._transaction() as db:
                cursor = db.execute("INSERT INTO runs (started_at, targets) VALUES (?, ?)", (started_at, names))
                assert cursor.lastrowid is not None
                return cursor.lastrowid
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None

    def end_run(self, run_id: int, ended_at: str, finish_reason: str, counts: Mapping[str, int],
                watch: Mapping[str, int] | None = None) -> None:
        try:
            with self._transaction() as db:
                db.execute(
                    "UPDATE runs SET ended_at = ?, finish_reason = ?, counts = ?, watch = ? WHERE id = ?",
                    (ended_at, finish_reason, json.dumps(dict(counts), sort_keys=True),
                     None if watch is None else json.dumps(dict(watch), sort_keys=True), run_id),
                )
        except sqlite3.Error as exc:
            raise StateError(f"state file {str(self.path)!r}: {self._explain(exc)}") from None

    def close(self) -> None:
        self._db.close()
