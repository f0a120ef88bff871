"""``scrapy idplan``: the resume plan of a job's state, as tables and as JSON, read-only (the real command:
tests/crawl/test_idplan_command.py)."""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import time
from pathlib import Path

import pytest
from pyroaring import BitMap64
from rich.console import Console

from idcrawl.commands.report import (
    ReportError,
    collect,
    format_runs,
    last_run_of,
    plan_document,
    render_plan,
    summarize,
    target_view,
)
from idcrawl.core.jobfile import parse_job
from idcrawl.core.ranges import LaneRecord, runs
from idcrawl.state import SqliteStateStore, TargetState
from idcrawl.state.base import RunRecord
from idcrawl.state.location import state_path
from tests.support.states import FOUND, MISSING, ids, write_known_state

#: ISO 8601 UTC with milliseconds, as docs/coverage.md shows and the items' fetched_at are.
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

#: The SQLite schema as idcrawl wrote it before runs recorded their targets.
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE targets (name TEXT PRIMARY KEY, params TEXT NOT NULL);
CREATE TABLE outcomes (target TEXT NOT NULL, outcome TEXT NOT NULL, ids BLOB NOT NULL, PRIMARY KEY (target, outcome));
CREATE TABLE lanes (target TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (target, key));
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, ended_at TEXT,
    finish_reason TEXT, counts TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO meta VALUES ('application', 'idcrawl'), ('schema_version', '1');
"""


def write_old_state(path: Path) -> Path:
    """A state file as an older idcrawl left it: one target ``old``, one run without its targets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO targets VALUES ('old', ?)", (json.dumps({"url": "https://old.example/{id}", "start": 1}),))
    db.execute("INSERT INTO outcomes VALUES ('old', 'found', ?)", (ids((1, 4)).serialize(),))
    db.execute("INSERT INTO outcomes VALUES ('old', 'missing', ?)", (ids((5, 7)).serialize(),))
    record = {"key": "old:asc", "start": 1, "step": 1, "stop": None, "cursor": 8, "last_found": 4, "cut_at": 5,
              "reason": "margin"}
    db.execute("INSERT INTO lanes VALUES ('old', 'old:asc', ?)", (json.dumps(record),))
    db.execute("INSERT INTO runs (started_at, ended_at, finish_reason, counts) VALUES "
               "('2026-11-20T09:00:00Z', '2026-11-20T09:01:00Z', 'finished', '{}')")
    db.commit()
    db.close()
    return path


@pytest.fixture
def known(tmp_path: Path) -> Path:
    return write_known_state(tmp_path / "state" / "idcrawl-state.sqlite")


def _document(path: Path, *names: str, job: Path | None = None, keep: int = 3) -> dict:
    store = SqliteStateStore(path, read_only=True)
    try:
        views = collect(store, names, parse_job(job) if job else ())
    finally:
        store.close()
    return plan_document(views, state=str(path), keep=keep)


def _lanes(document: dict, target: str) -> dict[str, dict]:
    [entry] = [t for t in document["targets"] if t["name"] == target]
    return {lane["key"]: lane for lane in entry["lanes"]}


# -- the plan ---------------------------------------------------------------------


def test_the_seed_example_has_the_seed_shape(known: Path) -> None:
    lane = _lanes(_document(known), "seed")["seed:asc"]
    assert lane["direction"] == "asc" and lane["start"] == 3 and lane["stop"] is None
    assert lane["span"] == {"first": 3, "last": 12, "ids": 10}
    # content [ o o o  o o  o o ] = 3-4, 7-8, 10-12; holes [ x x  x ] = 5-6, 9; bound 13 -> on
    assert lane["content"] == {"count": 7, "runs": 3, "head": [[3, 4], [7, 8], [10, 12]], "tail": [], "omitted": 0}
    assert lane["holes"]["missing"] == {"count": 3, "runs": 2, "head": [[5, 6], [9, 9]], "tail": [], "omitted": 0}
    assert lane["holes"]["failed"]["count"] == 0 and lane["holes"]["disallowed"]["count"] == 0
    assert lane["bound"] == {"from": 13, "to": None} and lane["finished"] is False
    assert lane["cut_reason"] == "shutdown" and lane["cut_at"] is None


def test_both_directions_holes_by_kind_margin_cut_and_bound(known: Path) -> None:
    document = _document(known, "reg")
    assert [t["name"] for t in document["targets"]] == ["reg"]
    [target] = document["targets"]
    assert (target["min"], target["max"]) == (50, 120)
    assert target["params"]["url"] == "https://reg.example/n/{id}"
    assert [lane["key"] for lane in target["lanes"]] == ["reg:asc", "reg:desc"]  # asc first
    asc, desc = target["lanes"]
    assert asc["content"]["head"] == [[100, 110], [112, 120]]
    assert asc["holes"]["failed"]["head"] == [[111, 111]]
    assert asc["bound"] is None and asc["finished"] is True and asc["cut_reason"] == "bound"
    assert desc["span"] == {"first": 99, "last": 77, "ids": 23}  # lane order
    assert desc["content"]["count"] == 18 and desc["content"]["head"] == [[80, 84], [86, 89], [91, 99]]
    assert desc["holes"]["missing"]["head"] == [[77, 79], [90, 90]]
    assert desc["holes"]["disallowed"]["head"] == [[85, 85]]
    # cut by its margin at 77: restarts just after (below) its last found id 80, down to min
    assert desc["cut_at"] == 77 and desc["last_found"] == 80
    assert desc["bound"] == {"from": 79, "to": 50} and desc["finished"] is False


def test_the_last_run_and_the_document_header(known: Path) -> None:
    document = _document(known)
    assert document["format"] == 1 and document["state"] == str(known)
    assert [t["name"] for t in document["targets"]] == ["reg", "seed"]
    reg, seed = document["targets"]
    assert reg["in_state"] is True and seed["in_state"] is True
    assert reg["last_run"] == {
        "id": 2, "started_at": "2026-11-26T11:00:00.000Z", "ended_at": "2026-11-26T11:02:00.000Z",
        "finish_reason": "finished", "targets": ["reg"], "watch": None,
    }
    # run #2 did not crawl seed: its last run is #1, not the state's last run
    assert seed["last_run"] == {
        "id": 1, "started_at": "2026-11-26T10:00:00.000Z", "ended_at": "2026-11-26T10:05:00.000Z",
        "finish_reason": "shutdown", "targets": ["reg", "seed"], "watch": None,
    }
    json.dumps(document)  # JSON-ready as it is


def test_a_job_target_never_crawled_is_all_bound(known: Path, tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        '[[targets]]\nname = "seed"\nurl = "https://sirup.example/paket/{id}"\nstart = 3\n\n'
        '[[targets]]\nname = "fresh"\nurl = "https://fresh.example/{id}"\nstart = 500\n'
        'direction = "both"\nmin = 400\nmax = 600\n'
    )
    document = _document(known, job=job)
    assert [t["name"] for t in document["targets"]] == ["seed", "fresh"]
    fresh = next(t for t in document["targets"] if t["name"] == "fresh")
    assert fresh["in_state"] is False and fresh["last_run"] is None  # no run crawled it (was: the state's last run)
    asc, desc = fresh["lanes"]
    assert asc["span"] is None and asc["content"]["count"] == 0 and asc["bound"] == {"from": 500, "to": 600}
    assert desc["span"] is None and desc["bound"] == {"from": 499, "to": 400}


def test_an_unknown_target_is_refused_with_the_known_ones(known: Path) -> None:
    store = SqliteStateStore(known, read_only=True)
    with pytest.raises(ReportError, match=r"unknown target 'nope' \(the state file has 'reg', 'seed'\)"):
        collect(store, ["seed", "nope"])
    store.close()


def test_tables_for_people(known: Path) -> None:
    store = SqliteStateStore(known, read_only=True)
    views = collect(store)
    store.close()
    console = Console(record=True, width=120, color_system=None)
    render_plan(views, console, state="s.sqlite")
    text = console.export_text()
    assert "state file s.sqlite" in text
    assert "target seed  https://sirup.example/paket/{id}" in text
    assert "last run: #2 2026-11-26T11:00:00.000Z -> 2026-11-26T11:02:00.000Z, finished" in text
    assert "last run: #1 2026-11-26T10:00:00.000Z -> 2026-11-26T10:05:00.000Z, shutdown" in text.split("target seed")[1]
    reg_table = text.split("target reg", 1)[1].split("target seed", 1)[0]
    lines = {line.split("│")[1].strip(): line for line in reg_table.splitlines() if line.count("│") >= 3}
    assert "7 ids in 3 runs: 3-4, 7-8, 10-12" in text
    assert "3 ids in 2 runs: 5-6, 9" in text
    assert "13 -> unbounded" in text
    assert "│ failed     │ 1 id in 1 run: 111" in lines["failed"]  # asc column, then desc column
    assert "1 id in 1 run: 85" in lines["disallowed"]
    assert "finished" in lines["bound"] and "79 -> 50" in lines["bound"]
    assert "margin, at 77 (last found 80)" in lines["cut"]
    assert "99 -> 77 (23 ids)" in lines["crawled"]


def test_a_killed_run_and_a_lane_still_running() -> None:
    record = LaneRecord("t:asc", 10, 1, None, 15)  # no reason: not stopped when last committed
    state = TargetState("t", {}, {"t:asc": record}, {FOUND: ids((10, 14))})
    view = target_view("t", state, None, RunRecord(5, "2026-11-26T12:00:00.000Z", None, None, {}, ["t"]))
    console = Console(record=True, width=120, color_system=None)
    render_plan([view], console)
    text = console.export_text()
    assert "last run: #5 started 2026-11-26T12:00:00.000Z, no end recorded (running, or killed)\n" in text
    assert "not stopped (running, or killed)" in text and "15 -> unbounded" in text
    assert plan_document([view])["targets"][0]["last_run"]["ended_at"] is None


def test_a_margin_cut_with_nothing_found_says_so() -> None:
    record = LaneRecord("t:asc", 10, 1, None, 13, last_found=None, cut_at=10, reason="margin")
    state = TargetState("t", {}, {"t:asc": record}, {MISSING: ids((10, 12))})
    console = Console(record=True, width=120, color_system=None)
    render_plan([target_view("t", state)], console)
    text = console.export_text()
    assert "margin, at 10 (nothing found)" in text
    assert "None" not in text
    assert plan_document([target_view("t", state)])["targets"][0]["lanes"][0]["last_found"] is None  # JSON: null


# -- runs: each target its own last run --------------------------------------------------


def test_each_target_shows_the_last_run_that_crawled_it() -> None:
    def run(id_: int, targets: list[str] | None) -> RunRecord:
        return RunRecord(id_, f"2026-11-26T1{id_}:00:00.000Z", None, None, {}, targets)

    runs = [run(1, ["a", "b"]), run(2, ["b"]), run(3, ["c"])]
    assert last_run_of(runs, "a").id == 1 and last_run_of(runs, "b").id == 2 and last_run_of(runs, "c").id == 3
    assert last_run_of(runs, "z") is None and last_run_of([], "a") is None
    # older runs did not record their targets: the newest of them may have crawled it (targets None says so)
    mixed = [run(1, None), run(2, None), run(3, ["c"])]
    assert last_run_of(mixed, "a").id == 2 and last_run_of(mixed, "a").targets is None
    assert last_run_of(mixed, "c").id == 3


def test_a_target_no_recorded_run_crawled_says_so(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.commit({"a": {"url": "https://a.example/{id}"}, "b": {"url": "https://b.example/{id}"}}, {}, {})
    store.end_run(store.begin_run("2026-11-26T10:00:00.000Z", ["b"]), "2026-11-26T10:00:01.000Z", "finished", {})
    views = collect(store)
    store.close()
    console = Console(record=True, width=120, color_system=None)
    render_plan(views, console)
    text = console.export_text()
    assert "last run: none recorded for this target" in text.split("target a", 1)[1].split("target b", 1)[0]
    assert "last run: #1 2026-11-26T10:00:00.000Z -> 2026-11-26T10:00:01.000Z, finished\n" in text


def test_an_older_state_file_gets_the_run_targets_column_and_loses_nothing(tmp_path: Path) -> None:
    old = write_old_state(tmp_path / "old.sqlite")
    reader = SqliteStateStore(old, read_only=True)
    state_before, runs_before = reader.load("old"), reader.runs()
    reader.close()
    store = SqliteStateStore(old)  # opened to write: the column is added, nothing rewritten
    assert store.load("old") == state_before and store.runs() == runs_before
    run = store.begin_run("2026-11-26T10:00:00.000Z", ["old", "new"])
    store.end_run(run, "2026-11-26T10:00:01.000Z", "finished", {"found": 1})
    store.close()
    again = SqliteStateStore(old, read_only=True)
    assert again.load("old") == state_before
    assert [(r.id, r.targets) for r in again.runs()] == [(1, None), (2, ["new", "old"])]
    again.close()
    db = sqlite3.connect(old)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)  # additive
    db.close()


# -- help ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["idplan", "idcoverage", "idjob"])
@pytest.mark.parametrize("columns", [40, 60, 80, 120])
def test_help_underlines_only_the_section_headings(command: str, columns: int, monkeypatch) -> None:
    """Scrapy's formatter underlined any wrapped help line that ended in ':' (such as '(default:')."""
    from importlib import import_module

    from scrapy.commands import ScrapyHelpFormatter
    from scrapy.settings import Settings

    monkeypatch.setenv("COLUMNS", str(columns))
    cmd = import_module(f"idcrawl.commands.{command}").Command()
    cmd.settings = Settings()
    parser = argparse.ArgumentParser(formatter_class=ScrapyHelpFormatter, usage=f"scrapy {command} {cmd.syntax()}",
                                     conflict_handler="resolve", description=cmd.long_desc())
    cmd.add_options(parser)  # as scrapy.cmdline builds a command's parser
    lines = parser.format_help().splitlines()
    headings = [lines[i - 1] for i, line in enumerate(lines) if i and line and set(line) <= {"=", "-"}]
    expected = {"Usage", "Options", "Global Options"} | ({"State"} if command != "idjob" else set())
    assert set(headings) == expected, headings
    assert "default: idseq)" in " ".join(" ".join(lines).split())  # a wrapped help line reads as written


def test_markup_in_names_is_printed_as_is() -> None:
    state = TargetState("[bold]x[/bold]", {}, {"[bold]x[/bold]:asc": LaneRecord("[bold]x[/bold]:asc", 0, 1, 5, 0)})
    console = Console(record=True, width=120, color_system=None)
    render_plan([target_view("[bold]x[/bold]", state)], console)
    assert "target [bold]x[/bold]" in console.export_text()


# -- abbreviated id runs ----------------------------------------------------------


def test_runs_are_abbreviated_to_the_first_and_last_few() -> None:
    many = ids(*[(i * 10, i * 10 + 2) for i in range(10)], 500)  # 11 runs
    summary = summarize(many, keep=3)
    assert (summary.count, summary.runs, summary.omitted) == (31, 11, 5)
    assert summary.head == ((0, 2), (10, 12), (20, 22)) and summary.tail == ((80, 82), (90, 92), (500, 500))
    assert format_runs(summary) == "0-2, 10-12, 20-22 ... 80-82, 90-92, 500"
    assert summarize(many, keep=0).head == tuple(runs(many))  # 0: every run
    assert summarize(many, keep=6).tail == () and len(summarize(many, keep=6).head) == 11
    assert summarize(BitMap64(), keep=3).runs == 0 and format_runs(summarize(BitMap64())) == "none"


def test_abbreviation_agrees_with_walking_the_set() -> None:
    rng = random.Random(3)
    for _ in range(200):
        some = BitMap64(rng.sample(range(300), rng.randint(1, 120)))
        every = list(runs(some))
        for keep in (0, 1, 2, 5):
            summary = summarize(some, keep)
            assert summary.runs == len(every)
            if keep == 0 or len(every) <= 2 * keep:
                assert list(summary.head) == every and summary.tail == ()
            else:
                assert list(summary.head) == every[:keep] and list(summary.tail) == every[-keep:]


def test_ten_million_ids_summarize_without_walking() -> None:
    found = ids((0, 9_999_999))
    gaps = BitMap64(random.Random(7).sample(range(1, 9_999_999), 100_000))
    found -= gaps
    started = time.perf_counter()
    summary = summarize(found, keep=3)
    assert time.perf_counter() - started < 1.0
    assert summary.count == 9_900_000
    assert summary.runs == len(gaps) + 1 - sum(1 for g in gaps if g + 1 in gaps)
    assert summary.head[0][0] == 0 and summary.tail[-1][1] == 9_999_999


# -- where the state is --------------------------------------------------------------


def test_state_path_setting_then_jobdir_then_spider_name() -> None:
    assert state_path({"IDCRAWL_STATE_PATH": "/x/s.sqlite", "JOBDIR": "j"}, "idseq") == Path("/x/s.sqlite")
    assert state_path({"IDCRAWL_STATE_PATH": "", "JOBDIR": "jobs/1"}, "idseq") == Path("jobs/1/idcrawl-state.sqlite")
    assert state_path({"IDCRAWL_STATE_PATH": None}, "demo") == Path(".scrapy/idcrawl/demo.sqlite")


@pytest.mark.parametrize(("settings", "shown"), [
    ({"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": "redis://:s3cret@h:6380/2", "IDCRAWL_REDIS_JOB": "sirup"},
     "Redis job 'idcrawl:{sirup}:' at redis://:***@h:6380/2"),
    ({"IDCRAWL_STATE_BACKEND": "redis", "REDIS_HOST": "h"}, "Redis job 'idcrawl:{idseq}:' at redis://h:6379"),
    ({"IDCRAWL_STATE_PATH": "s/x.sqlite"}, "state file 's/x.sqlite'"),
])
def test_the_first_line_names_what_a_command_reads_a_password_masked(settings: dict, shown: str) -> None:
    from scrapy.settings import Settings

    from idcrawl.commands._common import reading, resolve_state

    opts = argparse.Namespace(state=None, spider="idseq")
    assert reading(resolve_state(Settings(settings), opts)) == shown
