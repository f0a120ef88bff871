"""Damage inside a valid state file, met by real crawls and by ``idplan``/``idcoverage``/``iddue``: one line
naming the table, the target and the problem, exit status != 0, no request sent, the file's bytes unchanged
(each kind on the store: tests/unit/test_state_damage.py)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import IdSite
from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.states import damage, scrapy_many

ARGS = {"start": 1000, "direction": "both", "margin": 5, "min": 900, "name": "reg", "resume": "bound"}

#: (kind of damage, SQL, the words of the one line)
DAMAGE = [
    ("junk bitmap", [("UPDATE outcomes SET ids = ? WHERE target = 'reg' AND outcome = 'found'", (b"junk" * 8,))],
     ["table outcomes", "'reg'", "found ids are not a bitmap"]),
    ("bad lane record", ["UPDATE lanes SET record = '{\"x\":1}' WHERE key = 'reg:asc'"],
     ["table lanes", "'reg'", "lane 'reg:asc' lacks field"]),
    ("bad params JSON", ["UPDATE targets SET params = '[1,2' WHERE name = 'reg'"],
     ["table targets", "'reg'", "params is not valid JSON"]),
    ("dropped table", ["DROP TABLE lanes"], ["table lanes", "the table is missing"]),
    ("bad schema_version", ["UPDATE meta SET value = 'x' WHERE key = 'schema_version'"],
     ["table meta", "schema_version 'x' is not a number"]),
]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IdSite, Path]]:
    """A site and the state a finished crawl of it left (shared: each test damages a copy)."""
    site = IdSite(GapModel(900, 1099, {1010, 1011, 1040})).start()
    try:
        workdir = tmp_path_factory.mktemp("first")
        result = run_crawl(workdir, {**ARGS, "url": site.url(), "resume": "none"})
        assert result.returncode == 0, result.stderr[-3000:]
        yield site, workdir / ".scrapy" / "idcrawl" / "idseq.sqlite"
    finally:
        site.stop()


def _one_line(stderr: str, words: list[str]) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if "damaged state" in line]
    assert len(lines) == 1, stderr[-3000:]
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(("kind", "statements", "words"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_state_stops_crawl_idplan_idcoverage_and_iddue_in_one_line(
    crawled: tuple[IdSite, Path], tmp_path: Path, kind: str, statements: list[Any], words: list[str]
) -> None:
    site, good = crawled
    path = tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite"
    path.parent.mkdir(parents=True)
    shutil.copyfile(good, path)
    digest = damage(path, *statements)
    site.log.clear()
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()})
    assert result.returncode != 0
    _one_line(result.stderr, words)
    assert site.log == []
    plan, coverage, due = scrapy_many(
        tmp_path, ["idplan", "--state", str(path)], ["idcoverage", "--state", str(path), "-o", "map.svg"],
        ["iddue", "--state", str(path)],
    )
    for run in (plan, coverage, due):
        assert run.returncode != 0
        _one_line(run.stderr, words)
    assert not (tmp_path / "map.svg").exists()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
