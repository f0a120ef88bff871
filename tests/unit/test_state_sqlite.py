"""The SQLite state store: round trips, compactness, and refusing bad files intact."""

from __future__ import annotations

import random
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.recrawl import Kind, Schedule
from idcrawl.state import SqliteStateStore, StateError
from idcrawl.state.sqlite import SCHEMA_VERSION


def test_state_round_trips_and_outcomes_accumulate(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite")
    lane = LaneRecord("t:asc", 10, 1, None, 15, last_found=14, cut_at=None, reason="shutdown")
    store.commit({"t": {"url": "http://h/{id}"}}, {"t": {Outcome.FOUND: BitMap64([10, 11])}}, {"t": {"t:asc": lane}})
    store.commit({}, {"t": {Outcome.FOUND: BitMap64([14]), Outcome.MISSING: BitMap64([12, 13])}}, {})
    run = store.begin_run("2026-11-26T00:00:00Z")
    store.end_run(run, "2026-11-26T00:01:00Z", "finished", {"found": 3})
    store.close()

    again = SqliteStateStore(tmp_path / "state.sqlite")
    state = again.load("t")
    assert state is not None
    assert state.params == {"url": "http://h/{id}"}
    assert list(state.outcomes[Outcome.FOUND]) == [10, 11, 14]
    assert state.outcome_of(12) is Outcome.MISSING and state.outcome_of(99) is None
    assert state.lanes["t:asc"] == lane
    assert again.targets() == ["t"] and again.load("other") is None
    assert [(r.finish_reason, r.counts) for r in again.runs()] == [("finished", {"found": 3})]


def test_ten_million_ids_with_scattered_gaps_stay_small(tmp_path: Path) -> None:
    found = BitMap64()
    found.add_range(0, 10_000_000)
    for id_ in random.Random(7).sample(range(10_000_000), 100_000):
        found.discard(id_)
    store = SqliteStateStore(tmp_path / "state.sqlite")
    store.commit({"t": {}}, {"t": {Outcome.FOUND: found}}, {})
    store.close()
    assert (tmp_path / "state.sqlite").stat().st_size < 3 * 2**20
    started = time.perf_counter()
    state = SqliteStateStore(tmp_path / "state.sqlite").load("t")
    assert time.perf_counter() - started < 5  # generous: the figure itself belongs in bench/
    assert state is not None and len(state.outcomes[Outcome.FOUND]) == 9_900_000


def _refused(path: Path, match: str) -> None:
    before = path.read_bytes()
    with pytest.raises(StateError, match=match) as info:
        SqliteStateStore(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == before


def test_a_corrupt_file_is_refused_and_left_intact(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    _refused(path, "not an idcrawl state file")


def test_a_foreign_sqlite_file_is_refused_and_left_intact(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x)")
    db.commit()
    db.close()
    _refused(path, "not an idcrawl state file")


def test_a_newer_schema_is_refused_and_left_intact(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SqliteStateStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    _refused(path, "newer than this idcrawl understands")


def test_a_locked_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path, timeout=0.1)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StateError, match="locked by another process"):
            store.commit({"t": {}}, {}, {})
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.load("t") is None


# -- read-only (scrapy idplan, scrapy idcoverage) ----------------------------------------


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_read_only_creates_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path)
    store.commit({"t": {"url": "u"}}, {"t": {Outcome.FOUND: BitMap64([1, 2])}}, {})
    store.close()
    before = _files(tmp_path)
    reader = SqliteStateStore(path, read_only=True)
    state = reader.load("t")
    assert state is not None and list(state.outcomes[Outcome.FOUND]) == [1, 2] and reader.targets() == ["t"]
    with pytest.raises(StateError):
        reader.commit({"u": {}}, {}, {})
    reader.close()
    assert _files(tmp_path) == before  # no -wal/-shm either


def test_read_only_sees_commits_still_in_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    writer = SqliteStateStore(path)  # a crawl that is running (or was killed): its commits sit in the WAL
    writer.commit({"t": {}}, {"t": {Outcome.MISSING: BitMap64([7])}}, {})
    reader = SqliteStateStore(path, read_only=True)
    state = reader.load("t")
    assert state is not None and list(state.outcomes[Outcome.MISSING]) == [7]
    reader.close()
    writer.commit({"t": {}}, {"t": {Outcome.FOUND: BitMap64([8])}}, {})  # the writer is not disturbed
    writer.close()


def test_read_only_does_not_create_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.sqlite"
    with pytest.raises(StateError, match="does not exist"):
        SqliteStateStore(path, read_only=True)
    assert not (tmp_path / "sub").exists()
    (tmp_path / "empty.sqlite").write_bytes(b"")
    with pytest.raises(StateError, match="is empty"):
        SqliteStateStore(tmp_path / "empty.sqlite", read_only=True)


def test_read_only_refuses_corrupt_and_foreign_files_intact(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not sqlite at all" * 100)
    foreign = tmp_path / "foreign.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE notes (x)")
    db.commit()
    db.close()
    before = _files(tmp_path)
    with pytest.raises(StateError, match="corrupt or foreign"):
        SqliteStateStore(corrupt, read_only=True)
    with pytest.raises(StateError, match="not an idcrawl state file"):
        SqliteStateStore(foreign, read_only=True)
    assert _files(tmp_path) == before


def _old_file(path: Path) -> None:
    """A state file as idcrawl wrote it before the URL queue (and feed marks): no ``urls`` table."""
    from idcrawl.state.sqlite import _SCHEMA, APPLICATION, SCHEMA_VERSION

    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("application", APPLICATION),
                                                        ("schema_version", str(SCHEMA_VERSION))])
    db.commit()
    db.close()


# -- tail schedules (recrawl) -------------------------------------------------------------

_TAIL = Schedule(Kind.TAIL, "t", 1_768_201_200.0, 86_400.0 * 1.4, last_found=2**64 - 1, revision=3)


def test_tail_schedules_round_trip_exactly_and_reset_forgets_them(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path)
    assert store.tail_schedules() == {}
    store.commit({"t": {"url": "u"}, "u": {"url": "v"}}, {}, {}, tails={"t": _TAIL})
    store.commit({}, {}, {}, tails={"u": replace(_TAIL, key="u", last_found=None)})
    store.close()
    again = SqliteStateStore(path, read_only=True)
    assert again.tail_schedules() == {"t": _TAIL, "u": replace(_TAIL, key="u", last_found=None)}
    again.close()
    store = SqliteStateStore(path)
    store.commit({}, {}, {}, tails={"t": replace(_TAIL, revision=4)})  # the last one wins
    store.reset("u")
    assert store.tail_schedules() == {"t": replace(_TAIL, revision=4)}


def _older_file(path: Path) -> None:
    """A state file as idcrawl wrote it before tail schedules (and feed marks): no such tables."""
    store = SqliteStateStore(path)
    store.commit({"t": {"url": "u"}}, {"t": {Outcome.FOUND: BitMap64([1])}}, {})
    store.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE tails")
    db.execute("DROP TABLE feeds")
    db.commit()
    db.close()


def test_the_url_queue_round_trips_and_a_file_from_before_it_gets_its_table(tmp_path: Path) -> None:
    from idcrawl.core.scope import Hops, UrlRecord
    from idcrawl.core.urlqueue import QueuedUrl, QueueState

    path = tmp_path / "old.sqlite"
    _old_file(path)
    reader = SqliteStateStore(path, read_only=True)
    assert reader.load_urls() == []  # read-only: nothing added, nothing stored
    reader.close()
    store = SqliteStateStore(path)
    assert store.keeps_urls and store.load_urls() == []
    a = QueuedUrl(UrlRecord("http://a.test/", "s", None, ("p",)), QueueState.HARVESTED, links=("http://a.test/x",))
    x = QueuedUrl(UrlRecord("http://a.test/x", "s", "news", ("p", "q"), Hops(1, 0), 5.0, 2.0, 1, 0, 1),
                  QueueState.POSTPONED, (Hops(1, 0), Hops(2, 0)))
    store.commit_urls([a, x], [])
    store.commit_urls([], [])  # nothing to do
    store.close()
    store = SqliteStateStore(path)
    assert store.load_urls() == [a, x]
    store.commit_urls([QueuedUrl(x.record, QueueState.QUEUED)], ["http://a.test/"])
    assert store.load_urls() == [QueuedUrl(x.record, QueueState.QUEUED)]
    store.close()


def test_an_older_state_file_opens_read_only_and_gets_the_tails_table_when_written(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    _older_file(path)
    reader = SqliteStateStore(path, read_only=True)
    assert reader.tail_schedules() == {} and reader.load("t") is not None
    reader.close()
    store = SqliteStateStore(path)
    store.commit({}, {}, {}, tails={"t": _TAIL})
    state = store.load("t")
    assert store.tail_schedules() == {"t": _TAIL} and state is not None
    assert list(state.outcomes[Outcome.FOUND]) == [1]


def test_the_next_page_due_comes_from_an_index_and_equals_a_walk_over_every_record(tmp_path: Path) -> None:
    """Watch mode's wake-up for found pages: the earliest due time not before ``now`` of a target's
    pages on the schedule (gone fewer than the limit), read through the ``pages_due`` index (no scan
    of the pages), equal to the store interface's default, which reads every record. Seeded records
    of three targets, ids up to 2**64-1, some off the schedule, some due already."""
    from idcrawl.core.pagebook import page_key
    from idcrawl.state.base import StateStore
    from idcrawl.state.sqlite import _NEXT_PAGE_DUE

    rng = random.Random(17)
    store = SqliteStateStore(tmp_path / "state.sqlite")
    ids = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, *rng.sample(range(2, 10_000), 300)]
    pages = {name: {id_: Schedule(Kind.PAGE, page_key(name, id_), float(rng.randrange(1000)),
                                  float(rng.randrange(1, 500)), checksum="c", gone=rng.choice([0, 0, 0, 1, 2, 3]))
                    for id_ in rng.sample(ids, 200)} for name in ("a", "b", "c")}
    store.commit({}, {}, {}, pages=pages)
    plan = " ".join(str(row) for row in store._db.execute(f"EXPLAIN QUERY PLAN {_NEXT_PAGE_DUE}", ("a", 0.0, 3)))
    assert "USING INDEX pages_due" in plan and "TEMP B-TREE" not in plan, plan
    for name in ("a", "b", "c", "none"):
        for now in (0.0, 300.0, 700.0, 1200.0, 1500.0):
            for limit in (1, 3):
                expected = StateStore.next_page_due(store, name, now, limit)
                assert store.next_page_due(name, now, limit) == expected, (name, now, limit)
                on_schedule = [s.due_at() for s in pages.get(name, {}).values() if s.gone < limit]
                assert expected == min((at for at in on_schedule if at >= now), default=None)
    store.close()


def test_a_urls_priority_round_trips_and_a_urls_table_from_before_it_reads_as_one_half(tmp_path: Path) -> None:
    from idcrawl.core.scope import UrlRecord
    from idcrawl.core.urlqueue import QueuedUrl, QueueState

    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path)
    x = QueuedUrl(UrlRecord("http://a.test/x", "s", None, ("p",), priority=0.9), QueueState.QUEUED)
    y = QueuedUrl(UrlRecord("http://a.test/y", "s", None, ("p",)), QueueState.QUEUED)
    store.commit_urls([x, y], [])
    store.close()
    store = SqliteStateStore(path)
    assert [e.record.priority for e in store.load_urls()] == [0.9, 0.5]
    store.close()
    db = sqlite3.connect(path)  # a urls table written before priorities were kept
    db.execute("ALTER TABLE urls DROP COLUMN priority")
    db.commit()
    db.close()
    reader = SqliteStateStore(path, read_only=True)
    assert [e.record.priority for e in reader.load_urls()] == [0.5, 0.5]
    reader.close()
    store = SqliteStateStore(path)  # opened for writing: the column is added
    store.commit_urls([x], [])
    assert [e.record.priority for e in store.load_urls()] == [0.9, 0.5]
    store.close()
