"""``scrapy idcoverage``: each lane's id axis as SVG or HTML, checked by parsing what it draws."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest
from lxml import etree, html
from pyroaring import BitMap64

from idcrawl.commands.coverage import (
    COLOURS,
    OUTSIDE,
    coverage_svg,
    html_document,
    lane_segments,
    svg_document,
    target_axis,
)
from idcrawl.commands.report import collect, target_view
from idcrawl.core.ranges import LaneRecord
from idcrawl.state import SqliteStateStore, TargetState
from tests.support.states import DISALLOWED, FAILED, FOUND, MISSING, ids, write_known_state

NS = {"s": "http://www.w3.org/2000/svg"}


@pytest.fixture
def known(tmp_path: Path) -> Path:
    return write_known_state(tmp_path / "state" / "idcrawl-state.sqlite")


def _views(path: Path, *names: str) -> list:
    store = SqliteStateStore(path, read_only=True)
    try:
        return collect(store, names)
    finally:
        store.close()


def _lane(svg: etree._Element, key: str) -> etree._Element:
    [lane] = svg.xpath("//s:g[@class='lane'][@data-lane=$key]", namespaces=NS, key=key)
    return lane


def _segments(lane: etree._Element) -> list[tuple[str, int, int]]:
    return [
        (rect.get("class").split()[1], int(rect.get("data-first")), int(rect.get("data-last")))
        for rect in lane.xpath("s:rect[contains(concat(' ', @class, ' '), ' seg ')]", namespaces=NS)
    ]


def test_one_row_per_lane_grouped_per_target(known: Path) -> None:
    svg = coverage_svg(_views(known))
    targets = svg.xpath("//s:g[@class='target']", namespaces=NS)
    assert [t.get("data-target") for t in targets] == ["reg", "seed"]
    assert [lane.get("data-lane") for lane in svg.xpath("//s:g[@class='lane']", namespaces=NS)] == [
        "reg:asc", "reg:desc", "seed:asc",
    ]
    assert [len(t.xpath("s:g[@class='lane']", namespaces=NS)) for t in targets] == [2, 1]
    labels = [t.text for t in svg.xpath("//s:text[@class='target-label']", namespaces=NS)]
    assert labels == ["target reg", "target seed"]
    legend = [t.text for t in svg.xpath("//s:g[@class='legend']/s:text", namespaces=NS)]
    assert legend[:5] == ["found", "missing", "failed", "disallowed", "unvisited"]
    assert any("dominant outcome" in text for text in legend)


def test_the_seed_example_is_drawn_id_by_id(known: Path) -> None:
    svg = coverage_svg(_views(known, "seed"))
    lane = _lane(svg, "seed:asc")
    # ... | @ o o x x o o x o @ | (terminated) then the unbounded rest of the axis
    assert _segments(lane) == [
        ("found", 3, 4), ("missing", 5, 6), ("found", 7, 8), ("missing", 9, 9), ("found", 10, 12),
        ("unvisited", 13, 14),
    ]
    for rect in lane.xpath("s:rect[contains(@class, 'seg ')]", namespaces=NS):
        assert rect.get("fill") == COLOURS[rect.get("class").split()[1]]
    [start] = lane.xpath("s:path[@class='start']", namespaces=NS)
    assert start.get("data-id") == "3"
    [cut] = lane.xpath("s:line[@class='cut']", namespaces=NS)
    assert (cut.get("data-id"), cut.get("data-reason")) == ("12", "shutdown")
    [bound] = lane.xpath("s:g[@class='bound']", namespaces=NS)
    assert (bound.get("data-from"), bound.get("data-to")) == ("13", "")  # unbounded: an arrow
    assert len(bound.xpath("s:path", namespaces=NS)) == 2
    # a few ids: each id is its own cell, so the widths are in proportion
    widths = {s[1]: float(r.get("width")) for s, r in zip(
        _segments(lane), lane.xpath("s:rect[contains(@class, 'seg ')]", namespaces=NS), strict=True)}
    assert widths[9] * 3 == pytest.approx(widths[10], abs=0.03)  # 2 decimals


def test_both_lanes_share_one_axis_with_holes_cut_and_bounds(known: Path) -> None:
    svg = coverage_svg(_views(known, "reg"))
    assert _segments(_lane(svg, "reg:asc")) == [("found", 100, 110), ("failed", 111, 111), ("found", 112, 120)]
    assert _segments(_lane(svg, "reg:desc")) == [
        ("unvisited", 50, 76), ("missing", 77, 79), ("found", 80, 84), ("disallowed", 85, 85),
        ("found", 86, 89), ("missing", 90, 90), ("found", 91, 99),
    ]
    desc = _lane(svg, "reg:desc")
    [cut] = desc.xpath("s:line[@class='cut']", namespaces=NS)
    assert (cut.get("data-id"), cut.get("data-reason")) == ("77", "margin")
    [bound] = desc.xpath("s:g[@class='bound']", namespaces=NS)
    assert (bound.get("data-from"), bound.get("data-to")) == ("79", "50")
    assert not _lane(svg, "reg:asc").xpath("s:g[@class='bound']", namespaces=NS)  # finished
    limits = {g.get("class"): g.get("data-id") for g in svg.xpath("//s:g[starts-with(@class, 'limit')]", namespaces=NS)}
    assert limits == {"limit min": "50", "limit max": "120"}
    # the same x for the same id in both rows: 100 starts asc, 99 ends desc, side by side
    asc_first = _lane(svg, "reg:asc").xpath("s:rect[@data-first='100']", namespaces=NS)[0]
    desc_last = desc.xpath("s:rect[@data-last='99']", namespaces=NS)[0]
    assert float(desc_last.get("x")) + float(desc_last.get("width")) == pytest.approx(float(asc_first.get("x")), abs=0.02)


def test_the_legend_lists_the_span_a_lane_never_walks(known: Path) -> None:
    svg = coverage_svg(_views(known))
    [swatch] = svg.xpath("//s:g[@class='legend']/s:rect[@class='swatch outside']", namespaces=NS)
    assert swatch.get("fill") == OUTSIDE["fill"] == "#ffffff"
    legend = [t.text for t in svg.xpath("//s:g[@class='legend']/s:text", namespaces=NS)]
    assert legend[5] == "not walked by this lane"
    # both directions on one axis [50, 120]: each lane's white span is the other side of its start
    def outside(key: str) -> list[tuple[int, int]]:
        rects = _lane(svg, key).xpath("s:rect[@class='outside']", namespaces=NS)
        assert all(rect.get("fill") == OUTSIDE["fill"] for rect in rects)
        return [(int(rect.get("data-first")), int(rect.get("data-last"))) for rect in rects]

    assert outside("reg:asc") == [(50, 99)] and outside("reg:desc") == [(100, 120)]
    assert outside("seed:asc") == []  # its axis starts at its start


def _translate_y(element: etree._Element) -> float:
    match = re.fullmatch(r"translate\(([-\d.]+),([-\d.]+)\)", element.get("transform"))
    assert match
    return float(match.group(2))


@pytest.mark.parametrize("width", [50, 120, 1000])
def test_the_min_and_max_lines_never_cross_a_lane_caption(width: int) -> None:
    """The dashed min/max lines cross every row but leave each caption's band free, whatever its length."""
    big = 10**15
    records = {
        "t:asc": LaneRecord("t:asc", big + 5_000, 1, big + 9_999, big + 6_000, last_found=big + 5_990,
                            cut_at=big + 5_995, reason="margin"),
        "t:desc": LaneRecord("t:desc", big + 4_999, -1, big, big + 4_000, last_found=big + 4_010, reason="shutdown"),
    }
    state = TargetState("t", {"min": big, "max": big + 9_999}, records,
                        {FOUND: ids((big + 4_010, big + 5_990)), MISSING: ids((big + 5_991, big + 5_995))})
    svg = coverage_svg([target_view("t", state)], width=width)
    [target] = svg.xpath("//s:g[@class='target']", namespaces=NS)
    captions = []
    for lane in target.xpath("s:g[@class='lane']", namespaces=NS):
        [caption] = lane.xpath("s:text[@class='caption']", namespaces=NS)
        assert float(caption.get("x")) == 0 and len(caption.text) > 100  # longer than the axis at small widths
        baseline, size = _translate_y(lane) + float(caption.get("y")), float(caption.get("font-size"))
        captions.append((baseline - 0.95 * size, baseline + 0.3 * size))  # DejaVu Sans: ascent, descent
    limits = target.xpath("s:g[starts-with(@class, 'limit')]", namespaces=NS)
    assert sorted(g.get("class") for g in limits) == ["limit max", "limit min"]
    for limit in limits:
        [line] = limit.xpath("s:path[@class='limit-line']", namespaces=NS)
        pieces = [(float(a), float(b)) for a, b in re.findall(r"M[-\d.]+,([-\d.]+) V([-\d.]+)", line.get("d"))]
        assert len(pieces) == 3  # above, between and below the two captions
        for top, bottom in pieces:
            for band_top, band_bottom in captions:
                assert bottom <= band_top or top >= band_bottom, (limit.get("class"), (top, bottom), captions)
        # still one line through the rows: from the first row's top to under the axis, broken only at captions
        assert pieces[0][0] == 40 and pieces[-1][1] > max(band for _, band in captions)


def test_labels_are_escaped(tmp_path: Path) -> None:
    name = 'a<b>&c "q"'
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.commit({name: {"url": "https://h/{id}?x=<y>&z"}}, {name: {FOUND: ids((0, 4))}},
                 {name: {f"{name}:asc": LaneRecord(f"{name}:asc", 0, 1, 9, 5, last_found=4)}})
    store.close()
    views = _views(tmp_path / "s.sqlite")
    for document in (svg_document(views), html_document(views)):
        assert b"a<b>" not in document and b"<y>&z" not in document
        assert b"target a&lt;b&gt;&amp;c" in document
        tree = etree.fromstring(document)
        assert tree.xpath("//s:text[@class='target-label']", namespaces=NS)[0].text == f"target {name}"
        assert tree.xpath("//s:g[@class='lane']/@data-lane", namespaces=NS) == [f"{name}:asc"]


def test_ten_million_ids_draw_a_bounded_number_of_elements() -> None:
    found = ids((0, 9_999_999))
    gaps = BitMap64(random.Random(7).sample(range(10_000_000), 100_000))
    failed = BitMap64(random.Random(8).sample(list(gaps), 500))
    found -= gaps
    record = LaneRecord("big:asc", 0, 1, None, 10_000_000, last_found=found.max(), reason="shutdown")
    view = target_view("big", TargetState("big", {}, {"big:asc": record}, {FOUND: found, MISSING: gaps - failed, FAILED: failed}))
    started = time.perf_counter()
    dominant = coverage_svg([view], width=800)
    worst = coverage_svg([view], width=800, mode="worst")
    assert time.perf_counter() - started < 5
    for svg in (dominant, worst):
        assert len(svg.xpath("//*")) < 3 * 800
    axis = target_axis(view, 800)
    assert axis.buckets <= 800 and axis.per_bucket > 1
    # dominant: the crawled span is found, the rest unvisited; a strip under the bar marks the holes
    assert [s[0] for s in _segments(_lane(dominant, "big:asc"))] == ["found", "unvisited"]
    marks = _lane(dominant, "big:asc").xpath("s:rect[starts-with(@class, 'holes')]", namespaces=NS)
    assert marks and {m.get("class") for m in marks} <= {"holes missing", "holes failed"}
    # worst: every bucket of the span holds a hole, most of them only missing ones
    kinds = {s[0] for s in _segments(_lane(worst, "big:asc"))}
    assert {"missing", "failed", "unvisited"} == kinds


def test_dominant_and_worst_colour_a_mixed_bucket_differently() -> None:
    record = LaneRecord("t:asc", 0, 1, 1999, 2000, last_found=1999, reason="bound")
    state = TargetState("t", {}, {"t:asc": record}, {
        FOUND: ids((0, 1999)) - ids((0, 3), 1000), DISALLOWED: ids((0, 3)), FAILED: ids(1000),
    })
    view = target_view("t", state)
    axis = target_axis(view, 100)  # 2000 ids: 20 per bucket
    assert axis.per_bucket == 20
    lane = view.lanes[0]
    assert [(s.category, s.first, s.last) for s in lane_segments(lane, axis, "dominant")] == [("found", 0, 1999)]
    assert [(s.category, s.first, s.last) for s in lane_segments(lane, axis, "worst")] == [
        ("disallowed", 0, 19), ("found", 20, 999), ("failed", 1000, 1019), ("found", 1020, 1999),
    ]
    assert lane_segments(lane, axis, "dominant")[0].counts == {
        "found": 1995, "missing": 0, "failed": 1, "disallowed": 4, "unvisited": 0,
    }


def test_html_wraps_the_same_svg(known: Path) -> None:
    views = _views(known)
    page = html_document(views)
    assert page.startswith(b"<!DOCTYPE html>\n<html")
    as_xml = etree.fromstring(page, etree.XMLParser(remove_blank_text=True))  # also well-formed XML
    [svg] = as_xml.xpath("//s:svg", namespaces=NS)
    assert etree.tostring(svg, with_tail=False) == etree.tostring(coverage_svg(views))
    as_html = html.document_fromstring(page)  # what a browser's parser gets
    assert as_html.findtext(".//title") == "idcrawl coverage"
    assert len(as_html.xpath("//g[@class='lane']")) == 3
