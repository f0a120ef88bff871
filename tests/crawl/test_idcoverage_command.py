"""``scrapy idcoverage`` as a real command: the files it writes, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from tests.support.states import scrapy_many, snapshot, write_known_state
from tests.unit.test_idcoverage import NS, _lane, _segments


@pytest.fixture
def known(tmp_path: Path) -> Path:
    return write_known_state(tmp_path / "state" / "idcrawl-state.sqlite")


def test_command_writes_svg_and_html_and_leaves_the_state_untouched(known: Path, tmp_path: Path) -> None:
    before = snapshot(known.parent)
    svg_run, html_run = scrapy_many(
        tmp_path, ["idcoverage", "--state", str(known), "-o", "map.svg"],
        ["idcoverage", "seed", "--state", str(known), "-o", "map.html", "--bucket", "worst"],
    )
    assert svg_run.returncode == 0 and html_run.returncode == 0, svg_run.stderr + html_run.stderr
    assert svg_run.stdout.splitlines() == [f"idcoverage: reading state file {str(known)!r}",
                                           "wrote map.svg (2 targets, 3 lanes)"]
    svg = etree.parse(str(tmp_path / "map.svg")).getroot()
    assert len(svg.xpath("//s:g[@class='lane']", namespaces=NS)) == 3
    assert _segments(_lane(svg, "seed:asc"))[:2] == [("found", 3, 4), ("missing", 5, 6)]
    page = etree.parse(str(tmp_path / "map.html")).getroot()
    assert page.xpath("//s:svg/@data-mode", namespaces=NS) == ["worst"]
    assert page.xpath("//s:g[@class='lane']/@data-lane", namespaces=NS) == ["seed:asc"]
    assert snapshot(known.parent) == before


def test_command_errors(known: Path, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    png, missing, unknown = scrapy_many(
        tmp_path, ["idcoverage", "--state", str(known), "-o", "map.png"],
        ["idcoverage", "--state", str(tmp_path / "none.sqlite"), "-o", "map.svg"],
        ["idcoverage", "nope", "--state", str(known), "-o", "map.svg"],
    )
    assert png.returncode == 2 and "error: -o map.png: the file name must end in .svg or .html" in png.stderr
    assert missing.returncode == 1 and missing.stderr.splitlines() == [
        f"idcoverage: error: state file {str(tmp_path / 'none.sqlite')!r} does not exist: no crawl recorded state "
        "there (give --state PATH, or the JOBDIR or IDCRAWL_STATE_PATH the crawl used)"
    ]
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines() == ["idcoverage: error: unknown target 'nope' (the state file has 'reg', 'seed')"]
    assert snapshot(tmp_path) == before  # no picture, no state file, nothing changed
