"""State of a 10,000,000-id crawl with 1% scattered gaps: file size and load time.

    .venv/bin/python bench/state_size.py [--ids N] [--gaps 0.01] [--rounds 5]

Writes the state the way a crawl does (a found and a missing bitmap, the
lanes' records) into a temporary SQLite file, then times loading it back,
against a baseline in the same run: reading the same ids from a plain
one-row-per-id SQLite table (what a naive state would do).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.state import SqliteStateStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=10_000_000)
    parser.add_argument("--gaps", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    found = BitMap64()
    found.add_range(0, args.ids)
    missing = BitMap64(random.Random(42).sample(range(args.ids), int(args.ids * args.gaps)))
    found -= missing
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.sqlite"
        store = SqliteStateStore(path)
        started = time.perf_counter()
        store.commit(
            {"t": {"url": "http://h/{id}"}},
            {"t": {Outcome.FOUND: found, Outcome.MISSING: missing}},
            {"t": {"t:asc": LaneRecord("t:asc", 0, 1, None, args.ids, args.ids - 1, None, None)}},
        )
        write_s = time.perf_counter() - started
        store.close()
        size = path.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("state.sqlite-*"))

        loads = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            state = SqliteStateStore(path).load("t")
            loads.append(time.perf_counter() - started)
            assert state is not None and len(state.outcomes[Outcome.FOUND]) == len(found)

        naive = Path(tmp) / "naive.sqlite"
        db = sqlite3.connect(naive)
        db.execute("CREATE TABLE outcomes (id INTEGER PRIMARY KEY, outcome TEXT)")
        sample = min(args.ids, 1_000_000)  # a naive table of all ids would take minutes to write
        db.executemany("INSERT INTO outcomes VALUES (?, 'found')", ((i,) for i in range(sample)))
        db.commit()
        started = time.perf_counter()
        rows = db.execute("SELECT id FROM outcomes").fetchall()
        naive_load = (time.perf_counter() - started) * args.ids / sample
        naive_size = naive.stat().st_size * args.ids / sample
        db.close()
        assert len(rows) == sample

    print(f"ids {args.ids:,}, gaps {args.gaps:.1%} ({len(missing):,} scattered)")
    print(f"state file: {size / 2**20:.2f} MiB (write {write_s:.2f} s)")
    print(f"load: median {statistics.median(loads) * 1000:.1f} ms over {args.rounds} rounds")
    print(f"one row per id (extrapolated from {sample:,} rows): {naive_size / 2**20:.0f} MiB, "
          f"load {naive_load:.2f} s")
    print(f"ratio: file {naive_size / size:.0f}x smaller, load {naive_load / statistics.median(loads):.0f}x faster")


if __name__ == "__main__":
    main()
