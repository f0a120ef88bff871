"""``scrapy idplan``: the resume plan of a job's state, as tables and as JSON, read-only."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path

import pytest
from pyroaring import BitMap64
from rich.console import Console

from idcrawl.core.ranges import LaneRecord, runs
from idcrawl.core.targets import parse_job
from idcrawl.report import ReportError, collect, format_runs, plan_document, render_plan, summarize, target_view
from idcrawl.state import SqliteStateStore, TargetState
from idcrawl.state.base import RunRecord
from idcrawl.state.location import state_path
from tests.support.states import FOUND, ids, scrapy, scrapy_many, snapshot, write_known_state


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
    for target in document["targets"]:
        assert target["in_state"] is True
        assert target["last_run"] == {
            "id": 2, "started_at": "2026-11-26T11:00:00.000Z", "ended_at": "2026-11-26T11:02:00.000Z",
            "finish_reason": "finished",
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
    assert fresh["in_state"] is False and fresh["last_run"]["id"] == 2
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
    view = target_view("t", state, None, RunRecord(5, "2026-11-26T12:00:00Z", None, None, {}))
    console = Console(record=True, width=120, color_system=None)
    render_plan([view], console)
    text = console.export_text()
    assert "last run: #5 started 2026-11-26T12:00:00Z, no end recorded (running, or killed)" in text
    assert "not stopped (running, or killed)" in text and "15 -> unbounded" in text
    assert plan_document([view])["targets"][0]["last_run"]["ended_at"] is None


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


# -- the command ----------------------------------------------------------------------


def test_command_prints_the_tables_and_leaves_the_state_untouched(known: Path, tmp_path: Path) -> None:
    before = snapshot(known.parent)
    run = scrapy(tmp_path, "idplan", "--state", str(known))
    assert run.returncode == 0, run.stderr
    assert "7 ids in 3 runs: 3-4, 7-8, 10-12" in run.stdout
    assert "margin, at 77 (last found 80)" in run.stdout
    assert "last run: #2" in run.stdout and run.stderr == ""
    assert snapshot(known.parent) == before  # same bytes, and no -wal/-shm left beside it


def test_command_finds_the_state_like_the_crawl(tmp_path: Path) -> None:
    write_known_state(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite")
    write_known_state(tmp_path / "jobs" / "a" / "idcrawl-state.sqlite")
    before = snapshot(tmp_path)
    default, jobdir, other = scrapy_many(
        tmp_path, ["idplan", "seed", "--json"], ["idplan", "seed", "--json", "-s", "JOBDIR=jobs/a"],
        ["idplan", "--spider", "other"],
    )
    assert default.returncode == 0 and jobdir.returncode == 0, default.stderr + jobdir.stderr
    assert json.loads(default.stdout)["state"] == ".scrapy/idcrawl/idseq.sqlite"
    assert json.loads(jobdir.stdout)["state"] == "jobs/a/idcrawl-state.sqlite"
    assert other.returncode == 1
    assert other.stderr.splitlines() == [
        "idplan: error: state file '.scrapy/idcrawl/other.sqlite' does not exist: no crawl recorded state there "
        "(give --state PATH, or the JOBDIR or IDCRAWL_STATE_PATH the crawl used)"
    ]
    assert snapshot(tmp_path) == before  # nothing created, nothing changed


def test_command_errors_are_one_line(known: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a database, just bytes " * 200)
    foreign = tmp_path / "foreign.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE notes (x)")
    db.commit()
    db.close()
    before = snapshot(tmp_path)
    cases = [
        (["seed", "nope", "--state", str(known)], "idplan: error: unknown target 'nope' (the state file has 'reg', 'seed')"),
        (["--state", str(corrupt)], f"idplan: error: state file {str(corrupt)!r}: is not an idcrawl state file (corrupt or foreign)"),
        (["--state", str(foreign)], f"idplan: error: state file {str(foreign)!r}: is a SQLite file, but not an idcrawl state file"),
    ]
    results = scrapy_many(tmp_path, *(["idplan", *args] for args, _ in cases))
    for (args, line), run in zip(cases, results, strict=True):
        assert (run.returncode, run.stderr.splitlines(), run.stdout) == (1, [line], ""), args
    assert snapshot(tmp_path) == before


def test_command_usage_errors(known: Path, tmp_path: Path) -> None:
    job = tmp_path / "bad.toml"
    job.write_text("[[targets]]\nurl = 'https://h/{id}'\nstart = 1\nmargn = 3\n")
    ranges, option, bad_job = scrapy_many(
        tmp_path, ["idplan", "--state", str(known), "--ranges", "-1"], ["idplan", "--state", str(known), "--nope"],
        ["idplan", "--state", str(known), "--job", str(job)],
    )
    assert ranges.returncode == 2 and "error: --ranges must be >= 0, not -1" in ranges.stderr
    assert option.returncode == 2 and "error: unknown option --nope" in option.stderr
    assert bad_job.returncode == 1 and len(bad_job.stderr.splitlines()) == 1
    assert bad_job.stderr.startswith(f"idplan: error: job file {str(job)!r}: targets[0]: margn=3: unknown key")


def test_commands_are_registered_in_the_project_and_as_entry_points_json(known: Path, tmp_path: Path) -> None:
    listing = scrapy(tmp_path, "-h")
    assert "idplan" in listing.stdout and "idcoverage" in listing.stdout
    assert "_common" not in listing.stdout
    before = snapshot(known.parent)
    # outside any project (no settings module, no scrapy.cfg): found through the entry points
    outside = scrapy(tmp_path, "idplan", "reg", "--state", str(known), "--json", "--ranges", "1", project=False)
    assert outside.returncode == 0, outside.stderr
    document = json.loads(outside.stdout)
    assert [t["name"] for t in document["targets"]] == ["reg"]
    desc = _lanes(document, "reg")["reg:desc"]
    assert desc["content"] == {"count": 18, "runs": 3, "head": [[80, 84]], "tail": [[91, 99]], "omitted": 1}
    assert desc["bound"] == {"from": 79, "to": 50}
    assert snapshot(known.parent) == before
