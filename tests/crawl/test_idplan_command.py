"""``scrapy idplan`` as a real command (help, tables, errors, entry points) and on the state of real crawls."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from idcrawl.commands.report import UNKNOWN_TARGETS
from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.states import scrapy, scrapy_many, snapshot, write_known_state
from tests.unit.test_idplan import TIMESTAMP, _lanes, write_old_state


@pytest.fixture
def known(tmp_path: Path) -> Path:
    return write_known_state(tmp_path / "state" / "idcrawl-state.sqlite")


def test_an_older_state_file_is_read_as_it_is_and_says_what_it_does_not_know(tmp_path: Path) -> None:
    old = write_old_state(tmp_path / "old.sqlite")
    before = snapshot(tmp_path)
    text, json_run = scrapy_many(tmp_path, ["idplan", "--state", str(old)], ["idplan", "--state", str(old), "--json"])
    assert text.returncode == 0 and json_run.returncode == 0, text.stderr + json_run.stderr
    assert "last run: #1 2026-11-20T09:00:00Z -> 2026-11-20T09:01:00Z, finished" in " ".join(text.stdout.split())
    assert " ".join(UNKNOWN_TARGETS.split()) in " ".join(text.stdout.split())
    assert "4 ids in 1 run: 1-4" in text.stdout and "margin, at 5 (last found 4)" in text.stdout
    [target] = json.loads(json_run.stdout)["targets"]
    assert target["last_run"]["id"] == 1 and target["last_run"]["targets"] is None  # null: not recorded
    assert snapshot(tmp_path) == before  # read-only: not migrated


def test_crawls_of_other_targets_sharing_the_default_state_file(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1, 20, set()))
    for name in ("first", "second"):
        result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "margin": 2, "name": name})
        assert result.returncode == 0, result.stderr
    run = scrapy(tmp_path, "idplan", "--json")  # the default state file both runs shared
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["state"] == ".scrapy/idcrawl/idseq.sqlite"
    last_runs = {target["name"]: target["last_run"] for target in document["targets"]}
    assert (last_runs["first"]["id"], last_runs["first"]["targets"]) == (1, ["first"])
    assert (last_runs["second"]["id"], last_runs["second"]["targets"]) == (2, ["second"])
    for last_run in last_runs.values():
        assert TIMESTAMP.fullmatch(last_run["started_at"]) and TIMESTAMP.fullmatch(last_run["ended_at"]), last_run
    text = scrapy(tmp_path, "idplan", "first")
    assert "last run: #1 " in text.stdout and "#2" not in text.stdout


def test_the_help_of_the_real_command(tmp_path: Path) -> None:
    run = scrapy(tmp_path, "idplan", "--help")
    assert run.returncode == 0
    assert "the spider whose default state file to read (default: idseq)" in " ".join(run.stdout.split())


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
