"""The state commands' tables in a pipe: full lines at any ``COLUMNS`` (rich folded cells at 80 columns, or at
``COLUMNS``: ``127.0.0.`` over ``1``), and ``--format tsv`` (one row a line) beside ``--format json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.states import scrapy, write_known_state

#: cells of the known state's tables, each longer than a 40-column terminal could show on one line
IDPLAN_CELLS = (
    "content │ 20 ids in 2 runs: 100-110, 112-120",
    "last run: #2 2026-11-26T11:00:00.000Z -> 2026-11-26T11:02:00.000Z, finished",
    "margin advice: margin 3 cuts a lane before its real end with chance 1.55%; margin 4 keeps the chance of an "
    "early cut under 1% (from 37 gap runs, largest 1)",
)
IDDUE_CELLS = ("no tail (no ascending lane, or it reached its bound)", "due (no schedule yet)")


@pytest.fixture
def known(tmp_path: Path) -> Path:
    return write_known_state(tmp_path / "state" / "idcrawl-state.sqlite")


def squeezed(text: str) -> str:
    """Each line with runs of spaces made one (a table pads its cells)."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def test_tables_in_a_pipe_are_full_lines_at_a_narrow_columns(known: Path, tmp_path: Path) -> None:
    plan = scrapy(tmp_path, "idplan", "--state", str(known), columns=40)
    due = scrapy(tmp_path, "iddue", "--state", str(known), "--at", "2026-11-27T00:00:00Z", columns=40)
    assert plan.returncode == 0 and due.returncode == 0, plan.stderr + due.stderr
    for cell in IDPLAN_CELLS:
        assert cell in squeezed(plan.stdout), plan.stdout
    lines = squeezed(due.stdout).splitlines()
    for cell in IDDUE_CELLS:
        assert any(cell in line for line in lines), due.stdout
    assert max(map(len, plan.stdout.splitlines())) > 40  # not cut to COLUMNS either


def test_tsv_is_a_header_and_one_row_a_line(known: Path, tmp_path: Path) -> None:
    plan = scrapy(tmp_path, "idplan", "--state", str(known), "--format", "tsv", columns=40)
    due = scrapy(tmp_path, "iddue", "--state", str(known), "--format", "tsv", "--at", "2026-11-27T00:00:00Z",
                 columns=40)
    assert plan.returncode == 0 and due.returncode == 0, plan.stderr + due.stderr
    assert plan.stderr.startswith("idplan: reading state file")  # stdout is the table alone
    rows = [line.split("\t") for line in plan.stdout.splitlines()]
    assert rows[0] == ["target", "lane", "field", "value"] and {len(row) for row in rows} == {4}
    assert ["reg", "reg:asc", "content", "20 ids in 2 runs: 100-110, 112-120"] in rows
    assert ["reg", "", "margin advice", IDPLAN_CELLS[2].removeprefix("margin advice: ")] in rows
    due_rows = [line.split("\t") for line in due.stdout.splitlines()]
    assert due_rows[0] == ["target", "tail walk", "learned duration", "last crawled", "due after", "at that time",
                           "pages due", "late ids", "at"]
    assert {len(row) for row in due_rows} == {9} and [row[0] for row in due_rows[1:]] == ["reg", "seed"]
    assert due_rows[1][1] == IDDUE_CELLS[0]
    assert {row[-1] for row in due_rows[1:]} == {"2026-11-27T00:00:00.000Z"}  # the table's "at TIME" line, per row


def test_idcoverage_prints_its_lanes_as_idplan_prints_its_plan(known: Path, tmp_path: Path) -> None:
    table = scrapy(tmp_path, "idcoverage", "--state", str(known), columns=40)
    tsv = scrapy(tmp_path, "idcoverage", "--state", str(known), "--format", "tsv", columns=40)
    as_json = scrapy(tmp_path, "idcoverage", "--state", str(known), "--format", "json")
    assert table.returncode == tsv.returncode == as_json.returncode == 0, table.stderr + tsv.stderr + as_json.stderr
    assert tsv.stderr.startswith("idcoverage: reading state file")  # stdout is the rows alone
    rows = [line.split("\t") for line in tsv.stdout.splitlines()]
    assert rows[0] == ["target", "lane", "walk", "crawled", "content", "missing", "failed", "disallowed", "bound", "cut"]
    assert {len(row) for row in rows} == {10}
    reg = next(row for row in rows if row[1] == "reg:asc")
    assert reg[:5] == ["reg", "reg:asc", "asc from 100", "100->120", "20"]
    line = next(line for line in table.stdout.splitlines() if "reg:asc" in line)
    assert all(cell in line for cell in reg), line  # the tsv row, on one line of the table
    assert max(map(len, table.stdout.splitlines())) > 40  # full lines in a pipe, not folded at COLUMNS
    document = json.loads(as_json.stdout)
    assert document["format"] == "idcrawl-coverage/1"
    lane = next(lane for target in document["targets"] for lane in target["lanes"] if lane["lane"] == "reg:asc")
    assert (lane["start"], lane["crawled"], lane["content"]) == (100, [100, 120], 20)
    both = scrapy(tmp_path, "idcoverage", "--state", str(known), "-o", str(tmp_path / "map.svg"), "--format", "tsv")
    assert both.returncode != 0 and "give one" in both.stderr


def test_format_json_is_json_and_json_with_another_format_is_refused(known: Path, tmp_path: Path) -> None:
    as_json = scrapy(tmp_path, "idplan", "--state", str(known), "--format", "json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["targets"], as_json.stderr
    both = scrapy(tmp_path, "iddue", "--state", str(known), "--json", "--format", "tsv")
    assert both.returncode != 0 and "--json and --format tsv: give one" in both.stderr
