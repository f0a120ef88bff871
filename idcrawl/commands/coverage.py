"""The coverage picture: each lane's id axis drawn as SVG or HTML (``scrapy idcoverage``, docs/coverage.md).

How an axis is bucketed and coloured: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lxml import etree
from lxml.builder import ElementMaker
from pyroaring import BitMap64

from idcrawl.commands.report import HOLE_KINDS, LaneView, TargetView, advice_text, histogram_lines
from idcrawl.core.lanes import BOUND
from idcrawl.core.safetext import safe

__all__ = [
    "CAPTION_BAND", "CATEGORIES", "COLOURS", "COVERAGE_FORMAT", "MODES", "OUTSIDE", "Axis", "coverage_document",
    "coverage_rows", "coverage_svg", "gap_sections", "hole_marks", "html_document", "lane_fields", "lane_segments",
    "outside_spans", "svg_document",
]

SVG_NS = "http://www.w3.org/2000/svg"
_S = ElementMaker(namespace=SVG_NS, nsmap={None: SVG_NS})
_H = ElementMaker()

#: What a bucket of ids can show, in the legend's order.
CATEGORIES = ("found", "missing", "failed", "disallowed", "unvisited")
COLOURS = {
    "found": "#2f9e44",
    "missing": "#868e96",
    "failed": "#e03131",
    "disallowed": "#f08c00",
    "unvisited": "#e9ecef",
}
MODES = ("dominant", "worst")
#: "worst" first; also breaks ties of the dominant mode.
SEVERITY = ("failed", "disallowed", "missing", "unvisited", "found")
MARKS = {"start": "#212529", "cut": "#7048e8", "limit": "#495057", "bound": "#1c7ed6"}
#: Ids of the axis that a lane never walks (beyond its start against its direction: an asc
#: lane's ids below its start are its desc twin's): left white inside the lane's track.
OUTSIDE = {"fill": "#ffffff", "stroke": "#dee2e6", "label": "not walked by this lane"}

LABEL_W = 110  # left column: lane labels
PAD = 16
ROW_H = 58  # one lane: bound bracket, start mark, bar, caption
BAR_Y = 18  # bar top, inside a row
BAR_H = 16
HOLES_H = 4  # the strip of hole marks under a bar of multi-id buckets
CAPTION_SIZE = 10
CAPTION_Y = BAR_Y + BAR_H + HOLES_H + 12  # caption baseline, inside a row
#: The band of a row that its caption's glyphs take (ascent above the baseline, descent below):
#: the dashed min/max lines leave it free, so they never cross a caption, whatever its length.
CAPTION_BAND = (CAPTION_Y - CAPTION_SIZE, CAPTION_Y + CAPTION_SIZE // 2)
HEAD_H = 40  # target heading
AXIS_H = 26  # tick labels under a target's rows
LEGEND_H = 58


@dataclass(frozen=True, slots=True)
class Axis:
    """ids [lo, hi] drawn over ``width`` pixels in ``buckets`` buckets of ``per_bucket`` ids."""

    lo: int
    hi: int
    width: float
    per_bucket: int
    buckets: int
    open_lo: bool = False  # a lane goes on below lo (unbounded desc)
    open_hi: bool = False  # a lane goes on above hi (unbounded asc)

    @classmethod
    def fit(cls, lo: int, hi: int, width: int, *, open_lo: bool = False, open_hi: bool = False) -> Axis:
        n = hi - lo + 1
        per_bucket = max(1, -(-n // width))
        return cls(lo, hi, float(width), per_bucket, -(-n // per_bucket), open_lo, open_hi)

    @property
    def scale(self) -> float:
        """Pixels per id."""
        return self.width / (self.buckets * self.per_bucket)

    def left(self, id_: int) -> float:
        return (id_ - self.lo) * self.scale

    def right(self, id_: int) -> float:
        return (id_ - self.lo + 1) * self.scale

    def centre(self, id_: int) -> float:
        return (id_ - self.lo + 0.5) * self.scale


def _lane_domain(lane: LaneView) -> tuple[int, int | None]:
    """The ids a lane may ever walk, ascending: (low, high or None = unbounded)."""
    record = lane.record
    if record.step > 0:
        return record.start, record.stop
    return (record.stop if record.stop is not None else 0), record.start


def target_axis(view: TargetView, width: int) -> Axis:
    """One axis for all lanes of a target: every point of interest, plus room for unbounded lanes."""
    points: list[int] = []
    open_lo = open_hi = False
    for lane in view.lanes:
        record, plan = lane.record, lane.plan
        low, high = _lane_domain(lane)
        lane_points = [record.start, record.cursor]
        lane_points += [p for p in (record.stop, record.cut_at, record.last_found) if p is not None]
        if plan.span is not None:
            lane_points += list(plan.span)
        if plan.bound is not None:
            lane_points += [p for p in plan.bound if p is not None]
        # a finished lane's cursor lies one past its stop: keep the axis inside the lane
        points += [max(low, p) if high is None else min(max(low, p), high) for p in lane_points]
        if record.stop is None:
            open_hi |= record.step > 0
            open_lo |= record.step < 0
    points += [p for p in (view.minimum, view.maximum) if p is not None]
    points = [max(0, p) for p in points] or [0]
    lo, hi = min(points), max(points)
    room = max(1, (hi - lo + 1) // 20)
    if open_hi:
        hi += room
    if open_lo:
        lo = max(0, lo - room)
    return Axis.fit(lo, hi, width, open_lo=open_lo, open_hi=open_hi)


@dataclass(slots=True)
class Segment:
    category: str
    first: int
    last: int
    counts: dict[str, int] = field(default_factory=dict)

    def title(self) -> str:
        span = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        shown = [f"{c} {self.counts[c]}" for c in CATEGORIES if self.counts.get(c)]
        return f"ids {span}: {', '.join(shown)}"


def _buckets(lane: LaneView, axis: Axis) -> Iterator[tuple[int, int, dict[str, int]]]:
    """Each bucket of the axis inside the lane's domain: (first id, last id, ids per category)."""
    low, high = _lane_domain(lane)
    low = max(low, axis.lo)
    high = axis.hi if high is None else min(high, axis.hi)
    if low > high:
        return
    sets: dict[str, BitMap64] = {"found": lane.plan.content}
    for kind in HOLE_KINDS:
        sets[kind.value] = lane.holes(kind)
    first_bucket = (low - axis.lo) // axis.per_bucket
    last_bucket = (high - axis.lo) // axis.per_bucket
    for bucket in range(first_bucket, last_bucket + 1):
        a = max(low, axis.lo + bucket * axis.per_bucket)
        b = min(high, axis.lo + (bucket + 1) * axis.per_bucket - 1)
        counts = {name: ids.range_cardinality(a, b + 1) if ids else 0 for name, ids in sets.items()}
        counts["unvisited"] = (b - a + 1) - sum(counts.values())
        yield a, b, counts


def _merge(segments: list[Segment], category: str, a: int, b: int, counts: dict[str, int]) -> None:
    if segments and segments[-1].category == category and segments[-1].last == a - 1:
        segment = segments[-1]
        segment.last = b
        for name, count in counts.items():
            segment.counts[name] = segment.counts.get(name, 0) + count
    else:
        segments.append(Segment(category, a, b, dict(counts)))


def lane_segments(lane: LaneView, axis: Axis, mode: str = "dominant") -> list[Segment]:
    """The lane's row as merged segments, one colour per bucket (see the module doc)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    segments: list[Segment] = []
    for a, b, counts in _buckets(lane, axis):
        present = [c for c in SEVERITY if counts[c]]
        if mode == "worst":
            category = present[0]
        else:
            category = max(present, key=lambda c: (counts[c], -SEVERITY.index(c)))
        _merge(segments, category, a, b, counts)
    return segments


def hole_marks(lane: LaneView, axis: Axis) -> list[Segment]:
    """Buckets that hold holes, merged, coloured by their worst kind (failed > disallowed > missing).

    Drawn under a bar whose buckets hold many ids, so that a few holes among
    many found ids stay visible when the bar shows the dominant outcome.
    """
    marks: list[Segment] = []
    for a, b, counts in _buckets(lane, axis):
        kinds = [c for c in SEVERITY[:3] if counts[c]]
        if kinds:
            _merge(marks, kinds[0], a, b, counts)
    return marks


def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _text(
    x: float, y: float, text: str, *, cls: str, size: int = 11, anchor: str = "start",
    fill: str | None = None, bold: bool = False,
) -> Any:
    attrs = {"class": cls, "font-size": str(size), "text-anchor": anchor}
    if fill is not None:
        attrs["fill"] = fill
    if bold:
        attrs["font-weight"] = "bold"
    return _S.text(attrs, safe(text), x=_fmt(x), y=_fmt(y))


def _legend(mode: str, width: float) -> Any:
    group = _S.g({"class": "legend"})
    x = 0.0
    for category in CATEGORIES:
        group.append(
            _S.rect({"class": f"swatch {category}", "fill": COLOURS[category], "stroke": "#adb5bd"},
                    x=_fmt(x), y="0", width="12", height="12")
        )
        group.append(_text(x + 16, 10, category, cls="legend-label"))
        x += 26 + 7 * len(category)
    group.append(_S.rect({"class": "swatch outside", "fill": OUTSIDE["fill"], "stroke": OUTSIDE["stroke"]},
                         x=_fmt(x), y="0", width="12", height="12"))
    group.append(_text(x + 16, 10, OUTSIDE["label"], cls="legend-label"))
    x += 26 + 7 * len(OUTSIDE["label"])
    marks = [("start", "start"), ("cut", "cut / stop"), ("limit", "min / max"), ("bound", "bound (to crawl)")]
    for mark, label in marks:
        if mark == "start":
            group.append(_S.path({"class": "key start", "fill": MARKS[mark]},
                                 d=f"M{_fmt(x + 2)},1 H{_fmt(x + 12)} L{_fmt(x + 7)},10 Z"))
        elif mark == "cut":
            group.append(_S.line({"class": "key cut", "stroke": MARKS[mark], "stroke-width": "2"},
                                 x1=_fmt(x + 7), y1="0", x2=_fmt(x + 7), y2="12"))
        else:
            group.append(_S.line({"class": f"key {mark}", "stroke": MARKS[mark], "stroke-width": "2",
                                  **({"stroke-dasharray": "4 3"} if mark == "limit" else {})},
                                 x1=_fmt(x), y1="6", x2=_fmt(x + 14), y2="6"))
        group.append(_text(x + 18, 10, label, cls="legend-label"))
        x += 30 + 7 * len(label)
    rule = (
        "the dominant outcome of its ids (ties: the worse one)"
        if mode == "dominant"
        else "the worst outcome among its ids: failed > disallowed > missing > unvisited > found"
    )
    group.append(_text(0, 30, f"Each bucket of ids (at most one per pixel) is coloured by {rule}.",
                       cls="legend-rule"))
    note = "Only a lane's crawled span counts as visited."
    if mode == "dominant":
        note += " Under a bar of many ids per bucket, a thin strip marks the buckets that hold holes (worst kind)."
    group.append(_text(0, 46, note, cls="legend-note", fill="#495057"))
    return group


def outside_spans(lane: LaneView, axis: Axis) -> list[tuple[int, int]]:
    """The ids of the axis that the lane never walks, as (first, last) spans."""
    low, high = _lane_domain(lane)
    spans = []
    if low > axis.lo:
        spans.append((axis.lo, min(low - 1, axis.hi)))
    if high is not None and high < axis.hi:
        spans.append((max(high + 1, axis.lo), axis.hi))
    return spans


def _walk(lane: LaneView) -> str:
    return f"{lane.direction} from {lane.record.start}"


def _lane_caption(lane: LaneView) -> str:
    record, plan = lane.record, lane.plan
    parts = [_walk(lane)]
    parts.append("crawled " + ("nothing yet" if plan.span is None else f"{plan.span[0]}->{plan.span[1]}"))
    parts.append(f"content {len(plan.content)}")
    parts += [f"{kind.value} {len(lane.holes(kind))}" for kind in HOLE_KINDS]
    if plan.bound is None:
        parts.append("bound: finished")
    else:
        parts.append(f"bound {plan.bound[0]}->{'unbounded' if plan.bound[1] is None else plan.bound[1]}")
    if record.reason is not None:
        parts.append(f"cut: {record.reason}" + (f" at {record.cut_at}" if record.cut_at is not None else ""))
    return " · ".join(parts)


#: ``idcoverage --format json``'s ``format`` field
COVERAGE_FORMAT = "idcrawl-coverage/1"


def lane_fields(lane: LaneView) -> dict[str, Any]:
    """What a lane's caption says, as values: ``idcoverage --format json``'s lanes (docs/coverage.md)."""
    record, plan = lane.record, lane.plan
    return {
        "lane": lane.key, "direction": lane.direction, "start": record.start,
        "crawled": None if plan.span is None else list(plan.span), "content": len(plan.content),
        **{kind.value: len(lane.holes(kind)) for kind in HOLE_KINDS},
        "bound": None if plan.bound is None else list(plan.bound),
        "cut": record.reason, "cut_at": record.cut_at,
    }


def coverage_rows(views: Sequence[TargetView]) -> list[list[str]]:
    """``idcoverage --format table|tsv``: a header, then one row per lane, the map's caption as columns."""
    rows = [["target", "lane", "walk", "crawled", "content", *(kind.value for kind in HOLE_KINDS), "bound", "cut"]]
    for view in views:
        for lane in view.lanes:
            fields = lane_fields(lane)
            crawled, bound = fields["crawled"], fields["bound"]
            cut = "-" if fields["cut"] is None else str(fields["cut"]) + (
                "" if fields["cut_at"] is None else f" at {fields['cut_at']}")
            rows.append([
                safe(view.name), safe(lane.key), _walk(lane),
                "nothing yet" if crawled is None else f"{crawled[0]}->{crawled[1]}",
                str(fields["content"]), *(str(fields[kind.value]) for kind in HOLE_KINDS),
                "finished" if bound is None else f"{bound[0]}->{'unbounded' if bound[1] is None else bound[1]}",
                safe(cut),
            ])
    return [[" ".join(cell.split()) for cell in row] for row in rows]


def coverage_document(views: Sequence[TargetView], *, state: str) -> dict[str, Any]:
    """``idcoverage --format json``: the lanes of each target (shape in docs/coverage.md)."""
    return {"format": COVERAGE_FORMAT, "state": state,
            "targets": [{"name": view.name, "in_state": view.in_state,
                         "lanes": [lane_fields(lane) for lane in view.lanes]} for view in views]}


def _lane_row(lane: LaneView, axis: Axis, y: float, mode: str) -> Any:
    record, plan = lane.record, lane.plan
    row = _S.g({"class": "lane", "data-lane": safe(lane.key), "data-direction": lane.direction},
               transform=f"translate(0,{_fmt(y)})")
    row.append(_text(-8, BAR_Y + 12, lane.direction, cls="lane-label", anchor="end", bold=True))
    row.append(_S.rect({"class": "track", "fill": "none", "stroke": OUTSIDE["stroke"]},
                       x="0", y=str(BAR_Y), width=_fmt(axis.width), height=str(BAR_H)))
    for first, last in outside_spans(lane, axis):
        rect = _S.rect(
            {"class": "outside", "fill": OUTSIDE["fill"], "data-first": str(first), "data-last": str(last)},
            x=_fmt(axis.left(first)), y=str(BAR_Y), width=_fmt(axis.right(last) - axis.left(first)),
            height=str(BAR_H),
        )
        rect.append(_S.title(f"ids {first}-{last}: {OUTSIDE['label']} ({_walk(lane)})"))
        row.append(rect)
    for segment in lane_segments(lane, axis, mode):
        rect = _S.rect(
            {"class": f"seg {segment.category}", "fill": COLOURS[segment.category],
             "data-first": str(segment.first), "data-last": str(segment.last)},
            x=_fmt(axis.left(segment.first)), y=str(BAR_Y),
            width=_fmt(axis.right(segment.last) - axis.left(segment.first)), height=str(BAR_H),
        )
        rect.append(_S.title(segment.title()))
        row.append(rect)
    if mode == "dominant" and axis.per_bucket > 1:
        for mark in hole_marks(lane, axis):
            rect = _S.rect(
                {"class": f"holes {mark.category}", "fill": COLOURS[mark.category],
                 "data-first": str(mark.first), "data-last": str(mark.last)},
                x=_fmt(axis.left(mark.first)), y=str(BAR_Y + BAR_H + 1),
                width=_fmt(max(1.0, axis.right(mark.last) - axis.left(mark.first))), height=str(HOLES_H),
            )
            rect.append(_S.title("holes in " + mark.title()))
            row.append(rect)
    # the bound of the plan: a bracket above the bar, an arrow when unbounded
    if plan.bound is not None:
        first, to = plan.bound
        last = to if to is not None else (axis.hi if record.step > 0 else axis.lo)
        x1, x2 = sorted((axis.left(min(first, last)), axis.right(max(first, last))))
        bound = _S.g({"class": "bound", "data-from": str(first), "data-to": "" if to is None else str(to)})
        bound.append(_S.path({"fill": "none", "stroke": MARKS["bound"], "stroke-width": "2"},
                             d=f"M{_fmt(x1)},10 V5 H{_fmt(x2)} V10"))
        if to is None:
            tip = x2 if record.step > 0 else x1
            sign = 1 if record.step > 0 else -1
            bound.append(_S.path({"fill": MARKS["bound"]},
                                 d=f"M{_fmt(tip + sign * 8)},5 L{_fmt(tip)},1 L{_fmt(tip)},9 Z"))
        bound.append(_S.title(f"bound {first}->{'unbounded' if to is None else to}: not crawled yet"))
        row.append(bound)
    # the start point
    if axis.lo <= record.start <= axis.hi:
        x = axis.centre(record.start)
        start = _S.path({"class": "start", "fill": MARKS["start"], "data-id": str(record.start)},
                        d=f"M{_fmt(x - 5)},{BAR_Y - 7} H{_fmt(x + 5)} L{_fmt(x)},{BAR_Y} Z")
        start.append(_S.title(f"start {record.start}"))
        row.append(start)
    # the cut (margin) or the stop of an interrupted run, at the edge of what was decided
    if record.reason is not None and record.reason != BOUND:
        at = record.cut_at if record.cut_at is not None else record.cursor - record.step
        if axis.lo - 1 <= at <= axis.hi + 1:
            x = axis.right(at) if record.step > 0 else axis.left(at)
            cut = _S.line({"class": "cut", "stroke": MARKS["cut"], "stroke-width": "2", "data-id": str(at),
                           "data-reason": safe(record.reason)},
                          x1=_fmt(x), y1=str(BAR_Y - 4), x2=_fmt(x), y2=str(BAR_Y + BAR_H + 4))
            cut.append(_S.title(safe(f"{record.reason} at {at}")))
            row.append(cut)
    row.append(_text(0, CAPTION_Y, _lane_caption(lane), cls="caption", size=CAPTION_SIZE, fill="#343a40"))
    return row


def _limit_path(x: float, top: float, rows: int, bottom: float) -> str:
    """A vertical line at ``x`` through the rows, broken where each row's caption is."""
    pieces, y = [], top
    for index in range(rows):
        row = top + index * ROW_H
        pieces.append(f"M{_fmt(x)},{_fmt(y)} V{_fmt(row + CAPTION_BAND[0])}")
        y = row + CAPTION_BAND[1]
    pieces.append(f"M{_fmt(x)},{_fmt(y)} V{_fmt(bottom)}")
    return " ".join(pieces)


def _target_group(view: TargetView, width: int, mode: str, y: float) -> tuple[Any, float]:
    axis = target_axis(view, width)
    group = _S.g({"class": "target", "data-target": safe(view.name)}, transform=f"translate(0,{_fmt(y)})")
    heading = _text(-LABEL_W, 16, f"target {view.name}", cls="target-label", size=13, bold=True)
    group.append(heading)
    if axis.per_bucket == 1:
        scale = f"1 id = {_fmt(axis.scale)} px"
    else:
        scale = f"1 bucket = {axis.per_bucket} ids ({_fmt(axis.scale * axis.per_bucket)} px)"
    url = view.params.get("url")
    detail = f"ids {axis.lo}-{axis.hi} · {scale}" + (f" · {url}" if url else "")
    if not view.in_state:
        detail += " · never crawled"
    group.append(_text(-LABEL_W, 32, detail, cls="target-detail", size=10, fill="#495057"))
    rows_y = float(HEAD_H)
    for index, lane in enumerate(view.lanes):
        group.append(_lane_row(lane, axis, rows_y + index * ROW_H, mode))
    rows_h = len(view.lanes) * ROW_H
    # the target's bounds across all of its rows, and the axis ticks under them
    bottom = rows_y + rows_h
    ticks = _S.g({"class": "axis"})
    ticks.append(_S.line({"stroke": "#adb5bd"}, x1="0", y1=_fmt(bottom), x2=_fmt(axis.width), y2=_fmt(bottom)))
    lo_text = ("<- " if axis.open_lo else "") + ("min " if view.minimum == axis.lo else "") + str(axis.lo)
    hi_text = ("max " if view.maximum == axis.hi else "") + str(axis.hi) + (" ->" if axis.open_hi else "")
    ticks.append(_text(0, bottom + 12, lo_text, cls="tick", size=10))
    ticks.append(_text(axis.width, bottom + 12, hi_text, cls="tick", size=10, anchor="end"))
    group.append(ticks)
    for label, value in (("min", view.minimum), ("max", view.maximum)):
        if value is None or not axis.lo <= value <= axis.hi:
            continue
        x = axis.left(value) if label == "min" else axis.right(value)
        limit = _S.g({"class": f"limit {label}", "data-id": str(value)})
        limit.append(_S.path({"class": "limit-line", "fill": "none", "stroke": MARKS["limit"], "stroke-width": "1.5",
                              "stroke-dasharray": "4 3"}, d=_limit_path(x, rows_y, len(view.lanes), bottom + 4)))
        limit.append(_S.title(f"{label} {value}"))
        if value not in (axis.lo, axis.hi):  # at an end of the axis, the tick says it
            limit.append(_text(x, bottom + 24, f"{label} {value}", cls="limit-label", size=10,
                               anchor="start" if label == "min" else "end", fill=MARKS["limit"]))
        group.append(limit)
    return group, HEAD_H + rows_h + AXIS_H + 12


def coverage_svg(views: Sequence[TargetView], *, width: int = 1000, mode: str = "dominant") -> Any:
    """The picture as an lxml ``<svg>`` element (``width``: pixels of the id axis)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if width < 50:
        raise ValueError(f"width must be at least 50 pixels, not {width}")
    body = _S.g({"class": "targets"}, transform=f"translate({LABEL_W + PAD},{LEGEND_H + PAD})")
    y = 0.0
    for view in views:
        group, height = _target_group(view, width, mode, y)
        body.append(group)
        y += height
    if not views:
        body.append(_text(0, 16, "no targets", cls="empty"))
        y = 30
    total_w = LABEL_W + width + 2 * PAD
    total_h = LEGEND_H + y + 2 * PAD
    svg = _S.svg(
        {"font-family": "DejaVu Sans, Helvetica, Arial, sans-serif", "class": "idcoverage", "data-mode": mode},
        width=_fmt(total_w), height=_fmt(total_h), viewBox=f"0 0 {_fmt(total_w)} {_fmt(total_h)}",
    )
    svg.append(_S.title("idcrawl coverage"))
    svg.append(_S.rect({"fill": "#ffffff"}, x="0", y="0", width="100%", height="100%"))
    legend = _legend(mode, width)
    legend.set("transform", f"translate({PAD},{PAD})")
    svg.append(legend)
    svg.append(body)
    return svg


def svg_document(views: Sequence[TargetView], *, width: int = 1000, mode: str = "dominant") -> bytes:
    """A standalone SVG file."""
    svg = coverage_svg(views, width=width, mode=mode)
    result: bytes = etree.tostring(svg, xml_declaration=True, encoding="UTF-8", pretty_print=True)
    return result


def gap_sections(views: Sequence[TargetView]) -> list[Any]:
    """Per target with found ids, the margin advice and its gap-length histogram (the picture
    ``scrapy idplan`` prints), for the HTML page under the SVG."""
    sections = []
    for view in views:
        if view.advice is None:
            continue
        sections.append(_H.section(
            {"class": "gaps", "data-target": safe(view.name)},
            _H.h2(safe(f"target {view.name}: gap lengths")),
            _H.p(safe(f"margin advice: {advice_text(view.advice)}")),
            _H.pre("\n".join(histogram_lines(view.advice.histogram))),
        ))
    return sections


def html_document(
    views: Sequence[TargetView], *, width: int = 1000, mode: str = "dominant", title: str = "idcrawl coverage"
) -> bytes:
    """An HTML page (also well-formed XML) that wraps the same SVG."""
    page = _H.html(
        _H.head(
            _H.meta(charset="utf-8"),
            _H.title(title),
            _H.style("body { font-family: sans-serif; margin: 16px; } svg { max-width: none; }"),
        ),
        _H.body(_H.h1(title), coverage_svg(views, width=width, mode=mode), *gap_sections(views)),
        lang="en",
    )
    markup: bytes = etree.tostring(page, encoding="UTF-8", pretty_print=True)
    return b"<!DOCTYPE html>\n" + markup
