"""One run row per watch session (issue 31, watch waves): a watching crawl's row in the state's runs is
begun once and updated at each wave's end with the session's counters (waves, fetches, news), in the
SQLite state (an older file gets the column when opened for writing) and in its text for ``idplan``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from idcrawl.commands.report import run_line
from idcrawl.state.base import StateError
from idcrawl.state.sqlite import SqliteStateStore


def test_a_session_row_is_updated_at_each_wave_end(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite")
    plain = store.begin_run("2026-01-11T07:00:00Z", ["a"])
    store.end_run(plain, "2026-01-11T07:01:00Z", "finished", {"found": 3})
    session = store.begin_run("2026-01-12T07:00:00Z", ["a"])
    for wave in (1, 2, 3):
        store.end_run(session, f"2026-01-1{wave + 1}T08:00:00Z", "finished", {"found": 10 * wave},
                      {"waves": wave, "fetches": 7 * wave, "news": wave})
    runs = store.runs()
    store.close()
    assert [(r.id, r.ended_at, r.counts, r.watch) for r in runs] == [
        (plain, "2026-01-11T07:01:00Z", {"found": 3}, None),
        (session, "2026-01-14T08:00:00Z", {"found": 30}, {"waves": 3, "fetches": 21, "news": 3})]
    assert run_line(runs[1]).endswith("finished; watch session: 3 waves, 21 fetches, 3 with news")
    assert "watch" not in run_line(runs[0])


def test_an_older_file_gets_the_watch_column_when_opened_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SqliteStateStore(path).close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE runs DROP COLUMN watch")
    db.execute("INSERT INTO runs (started_at, ended_at, finish_reason) VALUES ('x', 'y', 'finished')")
    db.commit()
    db.close()
    reader = SqliteStateStore(path, read_only=True)  # read as it is: no counters recorded
    assert [r.watch for r in reader.runs()] == [None]
    reader.close()
    store = SqliteStateStore(path)
    run = store.begin_run("z")
    store.end_run(run, "w", "finished", {}, {"waves": 2, "fetches": 5, "news": 1})
    assert [r.watch for r in store.runs()] == [None, {"waves": 2, "fetches": 5, "news": 1}]
    store.close()


def test_damaged_counters_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path)
    run = store.begin_run("z")
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET watch = '[1]' WHERE id = ?", (run,))
    db.commit()
    db.close()
    store = SqliteStateStore(path, read_only=True)
    with pytest.raises(StateError, match="watch is not an object of numbers"):
        store.runs()
    store.close()
