"""The one-process watch reads only what is due (issue 31, watch waves): the SQLite state's index of page
due times (``pages_due``) answers :meth:`SqliteStateStore.due_page_records`, so a wave's plan
(:func:`idcrawl.state.base.due_page_ids`) reads the due records and the ids of the others, not every record.
On seeded random page records, the plan is the one of every record read and of the reference
(:func:`tests.support.reference.page_due_truth`), and the query is answered from the index."""

from __future__ import annotations

import random
from pathlib import Path

from pyroaring import BitMap64

from idcrawl.core.clock import Clock
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Kind, Policy, Schedule
from idcrawl.core.watch import Coalescing
from idcrawl.state.base import due_page_ids
from idcrawl.state.sqlite import _DUE_PAGES, SqliteStateStore
from tests.support.reference import page_due_truth

CASES = 30
SEED = 31
T = 1_800_000_000.0
GONE = 3


def random_record(rng: random.Random, id_: int) -> Schedule:
    last = T - rng.choice((0, 60, 3600, 86400, rng.uniform(0, 30 * 86400)))
    duration = rng.choice((3600.0, 86400.0, rng.uniform(60, 14 * 86400)))
    return Schedule(Kind.PAGE, f"reg/{id_}", last, duration, checksum=f"c{id_}", gone=rng.choice((0, 0, 0, 1, GONE)))


def test_a_due_plan_reads_the_due_records_only_and_plans_as_the_reference(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    for case in range(CASES):
        store = SqliteStateStore(tmp_path / f"state{case}.sqlite")
        records = {id_: random_record(rng, id_) for id_ in rng.sample(range(1, 400), rng.randint(0, 60))}
        store.commit({}, {}, {}, pages={"reg": records})
        found = sorted(set(records) | set(rng.sample(range(1, 400), 10)))
        now = T + rng.choice((0.0, 1.0, 3600.0, rng.uniform(0, 20 * 86400)))
        book = PageBook(Clock(now), {"reg": Policy(gone_limit=GONE)}, retain=False)
        due = due_page_ids(store, book, "reg", BitMap64(found))
        truth = page_due_truth({i: (r.last_crawled, r.update_duration, r.gone) for i, r in records.items()},
                               found, now, GONE, "reg")[0]
        assert due == truth, case
        assert set(book.schedules["reg"]) == {i for i, r in records.items() if r.due_at() <= now}, case
        assert store.page_ids("reg") == BitMap64(records)
        store.close()


def test_a_watch_wave_reads_the_records_due_within_the_widest_window(tmp_path: Path) -> None:
    """A watch wave takes pages due within their window: it reads the records due by now plus the widest
    window (here 1 h), and no other."""
    store = SqliteStateStore(tmp_path / "state.sqlite")
    records = {id_: Schedule(Kind.PAGE, f"reg/{id_}", T - 86400, 86400 + 600.0 * id_, checksum="c")
               for id_ in range(1, 101)}  # due every 10 minutes from T on
    store.commit({}, {}, {}, pages={"reg": records})
    book = PageBook(Clock(T + 1), {"reg": Policy()}, retain=False)
    book.coalescing = Coalescing()  # a minute, or 5% of the duration (~72 min) capped at 1 h
    due = due_page_ids(store, book, "reg", BitMap64(records))
    assert sorted(book.schedules["reg"]) == list(range(1, 7))  # due by T + 1 h: ids 1-6
    assert due == [1, 2, 3, 4, 5, 6]
    store.close()


def test_the_due_records_are_read_from_the_index(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite")
    store.commit({}, {}, {}, pages={"reg": {1: random_record(random.Random(1), 1)}})
    store.close()
    import sqlite3

    db = sqlite3.connect(tmp_path / "state.sqlite")
    plan = " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {_DUE_PAGES}", ("reg", T)))
    db.close()
    assert "USING INDEX pages_due" in plan, plan
