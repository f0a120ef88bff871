"""Known states written with the store API, for the idplan and idcoverage tests."""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.state import SqliteStateStore

REPO = Path(__file__).resolve().parents[2]
FOUND, MISSING, FAILED, DISALLOWED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED, Outcome.DISALLOWED


def ids(*parts: int | tuple[int, int]) -> BitMap64:
    """``ids(3, (7, 9))`` = {3, 7, 8, 9}."""
    result = BitMap64()
    for part in parts:
        if isinstance(part, tuple):
            result.add_range(part[0], part[1] + 1)
        else:
            result.add(part)
    return result


def write_known_state(path: Path) -> Path:
    """Two targets and two runs: #1 crawled both (shutdown), #2 only ``reg`` (finished).

    ``seed``: the seed's "previous process" (asc from 3, margin 3, terminated after 10 ids)::

        ... o o x | @ o o x x o o x o @   o o x o o x o x o o o x x x x ...
                    3                12 | Terminate
        content 3-4, 7-8, 10-12; holes (missing) 5-6, 9; bound 13 -> unbounded

    ``reg``: direction both from 100 within [50, 120], margin 3. asc reached max
    (111 failed); desc was cut by its margin at 77 (77-79 missing after the last
    found id 80), with 85 disallowed and 90 missing on the way.
    """
    store = SqliteStateStore(path)
    seed = {"url": "https://sirup.example/paket/{id}", "start": 3, "min": None, "max": None, "direction": "asc"}
    store.commit(
        {"seed": seed},
        {"seed": {FOUND: ids((3, 4), (7, 8), (10, 12)), MISSING: ids((5, 6), 9)}},
        {"seed": {"seed:asc": LaneRecord("seed:asc", 3, 1, None, 13, last_found=12, reason="shutdown")}},
    )
    reg = {"url": "https://reg.example/n/{id}", "start": 100, "min": 50, "max": 120, "direction": "both"}
    store.commit(
        {"reg": reg},
        {"reg": {
            FOUND: ids((100, 110), (112, 120), (80, 84), (86, 89), (91, 99)),
            FAILED: ids(111), DISALLOWED: ids(85), MISSING: ids(90, (77, 79)),
        }},
        {"reg": {
            "reg:asc": LaneRecord("reg:asc", 100, 1, 120, 121, last_found=120, reason="bound"),
            "reg:desc": LaneRecord("reg:desc", 99, -1, 50, 76, last_found=80, cut_at=77, reason="margin"),
        }},
    )
    first = store.begin_run("2026-11-26T10:00:00.000Z", ["seed", "reg"])
    store.end_run(first, "2026-11-26T10:05:00.000Z", "shutdown", {"found": 38})
    second = store.begin_run("2026-11-26T11:00:00.000Z", ["reg"])
    store.end_run(second, "2026-11-26T11:02:00.000Z", "finished", {"found": 7})
    store.close()
    return path


def damage(path: Path, *statements: str | tuple[str, tuple[Any, ...]]) -> str:
    """Apply SQL to the file (as a user's editor or a bad disk would); the file's hash after."""
    db = sqlite3.connect(path)
    for statement in statements:
        sql, params = statement if isinstance(statement, tuple) else (statement, ())
        db.execute(sql, params)
    db.commit()
    db.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_big_lane(path: Path, ids: int = 10_000_000, gaps: float = 0.01, seed: int = 42) -> Path:
    """One target ``t``, one asc lane from 0 cut by its margin after ``ids`` ids, ``gaps`` of them missing
    (scattered, seeded) and the last one found; one finished run."""
    found = BitMap64()
    found.add_range(0, ids)
    missing = BitMap64(random.Random(seed).sample(range(ids - 1), int(ids * gaps)))
    found -= missing
    store = SqliteStateStore(path)
    store.commit(
        {"t": {"url": "http://h/{id}", "start": 0, "min": None, "max": None, "direction": "asc"}},
        {"t": {FOUND: found, MISSING: missing}},
        {"t": {"t:asc": LaneRecord("t:asc", 0, 1, None, ids + 5, ids - 1, ids, "margin")}},
    )
    run = store.begin_run("2026-11-27T10:00:00.000Z", ["t"])
    store.end_run(run, "2026-11-27T12:00:00.000Z", "finished", {"found": len(found)})
    store.close()
    return path


#: A target name an older idcrawl accepted: a forged log line, terminal escapes, a bell, a character
#: XML cannot hold; and a template password. Today's checks refuse such a name; a state file keeps it.
HOSTILE_NAME = "evil\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)\x1b[2J\x07\ufffe"
TEMPLATE_SECRET = "tplS3cret"


def write_hostile_state(path: Path) -> Path:
    """A state file written before names were checked: :data:`HOSTILE_NAME` (found 100-110, missing
    111, cut by its margin with a reason holding ESC too) and a template with :data:`TEMPLATE_SECRET`."""
    store = SqliteStateStore(path)
    name = HOSTILE_NAME
    params = {"url": f"https://user:{TEMPLATE_SECRET}@reg.example/n/{{id}}", "start": 100, "min": None,
              "max": None, "direction": "asc"}
    store.commit(
        {name: params},
        {name: {FOUND: ids((100, 110)), MISSING: ids(111)}},
        {name: {f"{name}:asc": LaneRecord(f"{name}:asc", 100, 1, None, 112, last_found=110, cut_at=111,
                                           reason="margin\x1b[31m")}},
    )
    run = store.begin_run("2026-11-26T10:00:00.000Z", [name])
    store.end_run(run, "2026-11-26T10:05:00.000Z", "finished\x1b[2J", {"found": 11})
    store.close()
    return path


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file of a directory tree and its bytes: a command that only reads leaves it equal."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def scrapy(cwd: Path, *args: str, project: bool = True, timeout: float = 60, columns: int = 120) -> Run:
    """``python -m scrapy ARGS`` in ``cwd``, with this project's settings (or outside any project); its
    stdout a pipe, ``COLUMNS`` set to ``columns``."""
    env = {key: value for key, value in os.environ.items() if key != "SCRAPY_SETTINGS_MODULE"}
    env["COLUMNS"] = str(columns)
    if project:
        env["SCRAPY_SETTINGS_MODULE"] = "idcrawl.settings"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def scrapy_many(cwd: Path, *commands: list[str], project: bool = True) -> list[Run]:
    """Several independent ``scrapy`` commands at once (each one starts Scrapy: ~1 s)."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda args: scrapy(cwd, *args, project=project), commands))
