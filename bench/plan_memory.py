"""Peak memory and time of ``scrapy idplan`` and ``scrapy idcoverage`` on one 10,000,000-id lane.

    .venv/bin/python bench/plan_memory.py [--ids N] [--gaps 0.01] [--state PATH] [--keep]

Writes the state with the store API (1% scattered missing ids by default, seeded), then runs each
command in its own process under ``/usr/bin/time -v`` and prints its peak RSS, wall time, output
size and the output's SHA-256 (equal hashes: byte-identical output). ``--keep`` keeps the state.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.state import SqliteStateStore

REPO = Path(__file__).resolve().parents[1]


def write_state(path: Path, ids: int, gaps: float, seed: int = 42) -> None:
    """One target ``t``, one asc lane from 0 cut by its margin after ``ids`` ids; ``gaps`` of them missing."""
    found = BitMap64()
    found.add_range(0, ids)
    missing = BitMap64(random.Random(seed).sample(range(ids), int(ids * gaps)))
    found -= missing
    found.add(ids - 1)
    missing.discard(ids - 1)
    store = SqliteStateStore(path)
    store.commit(
        {"t": {"url": "http://h/{id}", "start": 0, "min": None, "max": None, "direction": "asc"}},
        {"t": {Outcome.FOUND: found, Outcome.MISSING: missing}},
        {"t": {"t:asc": LaneRecord("t:asc", 0, 1, None, ids + 5, ids - 1, ids, "margin")}},
    )
    run = store.begin_run("2026-11-27T10:00:00.000Z", ["t"])
    store.end_run(run, "2026-11-27T12:00:00.000Z", "finished", {"found": len(found)})
    store.close()


def measure(args: list[str], cwd: Path) -> tuple[int, float, int, str]:
    """Peak RSS (kB), wall seconds, stdout bytes and its SHA-256 of ``scrapy ARGS``."""
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "COLUMNS": "120",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env,
                          capture_output=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(proc.stderr.decode()[-2000:])
    rss = int(re.search(rb"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    out = proc.stdout
    for name in ("map.svg", "map.html"):
        if name in args[-1]:
            out = (cwd / name).read_bytes()
    return rss, wall, len(out), hashlib.sha256(out).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=10_000_000)
    parser.add_argument("--gaps", type=float, default=0.01)
    parser.add_argument("--state", type=Path, help="use (or write) the state here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary state")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="plan-memory-"))
    path = args.state or tmp / "state.sqlite"
    if not path.exists():
        write_state(path, args.ids, args.gaps)
    commands = [
        ["idplan", "--state", str(path)],
        ["idplan", "--state", str(path), "--json"],
        ["idplan", "--state", str(path), "--json", "--ranges", "0"],
        ["idcoverage", "--state", str(path), "-o", "map.svg"],
    ]
    print(f"state {path}: {args.ids:,} ids, {args.gaps:.0%} missing")
    for command in commands:
        rss, wall, size, digest = measure(command, tmp)
        print(f"{' '.join(command[:1] + command[3:]):40} peak {rss / 1024:7.1f} MB  {wall:6.2f} s  "
              f"{size:>10,} bytes  sha256 {digest}")
    if not args.keep and not args.state:
        for child in tmp.iterdir():
            child.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
