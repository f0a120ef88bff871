"""What a crawl tells people at INFO: its plan, its progress, its summary.

Pure formatting from plain numbers (no Scrapy, no frontier); :mod:`idcrawl.extensions.progress` logs
the lines. The three kinds of lines: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from idcrawl.core.lanes import BOUND, MARGIN
from idcrawl.core.safetext import safe
from idcrawl.core.targets import RESET_MODES

__all__ = [
    "LaneInfo",
    "Tally",
    "TargetInfo",
    "done_by_target",
    "forgotten_text",
    "format_duration",
    "format_rate",
    "lane_plan_text",
    "lane_position_text",
    "lane_stop_text",
    "plan_lines",
    "progress_gaps",
    "progress_lines",
    "reach_text",
    "resume_text",
    "summary_lines",
]

#: Lane reasons that start with this prefix were set by a limit rule (``limit:TTMAX``).
LIMIT_PREFIX = "limit:"


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane as plain numbers. A ``holes`` lane walks positions 0..stop of a list of ids."""

    key: str
    direction: str  # asc, desc or holes
    start: int
    step: int
    stop: int | None  # inclusive last id (None: unbounded)
    margin: int
    cursor: int  # first undecided id (position, for a holes lane)
    reason: str | None = None  # why it stopped dispensing (None: running)
    cut_at: int | None = None
    last_found: int | None = None
    found: int = 0
    missing: int = 0
    failed: int = 0
    disallowed: int = 0
    past_cut: int = 0  # ids decided past the cut (requests wasted)
    overshoot: int = 0  # of those, found ones (not emitted)
    #: found ids whose items this lane emitted: fewer than ``found`` where targets overlap (a shared id's
    #: items go to one target) or where found ids are known from an earlier run (not emitted again)
    emitted: int = 0

    @property
    def decided(self) -> int:
        return self.found + self.missing + self.failed + self.disallowed


@dataclass(frozen=True, slots=True)
class TargetInfo:
    name: str
    url: str
    lanes: tuple[LaneInfo, ...]
    #: what the target takes from earlier runs (``resumed (resume=bound): ...``); None: a fresh target
    resume: str | None = None


@dataclass(slots=True)
class Tally:
    """Sums over targets that get no line of their own."""

    targets: int = 0
    lanes: int = 0
    found: int = 0
    missing: int = 0
    failed: int = 0
    disallowed: int = 0
    past_cut: int = 0
    overshoot: int = 0
    emitted: int = 0
    resumed: int = 0
    #: lanes by state: ``running``, or the kind of reason they stopped for (margin, bound, limit, closed)
    states: Counter[str] = field(default_factory=Counter)

    @property
    def decided(self) -> int:
        return self.found + self.missing + self.failed + self.disallowed

    def add_lane(
        self,
        found: int,
        missing: int,
        failed: int,
        disallowed: int,
        past_cut: int,
        overshoot: int,
        reason: str | None,
        emitted: int = 0,
    ) -> None:
        self.lanes += 1
        self.emitted += emitted
        self.found += found
        self.missing += missing
        self.failed += failed
        self.disallowed += disallowed
        self.past_cut += past_cut
        self.overshoot += overshoot
        self.states[_reason_kind(reason)] += 1

    def add_lanes(self, reason: str | None, count: int) -> None:
        """``count`` more lanes in the state of ``reason`` (their counts added separately)."""
        self.lanes += count
        self.states[_reason_kind(reason)] += count

    def add(self, target: TargetInfo) -> None:
        self.targets += 1
        self.resumed += target.resume is not None and target.resume.startswith("resumed")
        for lane in target.lanes:
            self.add_lane(lane.found, lane.missing, lane.failed, lane.disallowed, lane.past_cut, lane.overshoot,
                          lane.reason, lane.emitted)


def _reason_kind(reason: str | None) -> str:
    if reason is None:
        return "running"
    if reason in (MARGIN, BOUND):
        return "cut" if reason == MARGIN else "at bound"
    if reason.startswith(LIMIT_PREFIX):
        return "stopped by a limit"
    return f"closed ({reason})"


def progress_gaps(first: float, interval: float) -> Iterator[float]:
    """Seconds before each progress line: ``first``, then doubling up to ``interval`` (3, 6, 12, 24, 48, 60, 60, ...).

    ``first`` above ``interval`` (or not positive) starts at ``interval``; ``interval <= 0``: no lines (empty).
    """
    if interval <= 0:
        return
    gap = min(first, interval) if first > 0 else interval
    while True:
        yield gap
        gap = min(gap * 2, interval)


# -- numbers -----------------------------------------------------------------------------


def format_rate(count: int, seconds: float | None) -> str:
    """``161 ids/s``, ``4.9 ids/s``; ``- ids/s`` when no time has passed (nothing is known)."""
    if seconds is None or seconds <= 0:
        return "- ids/s"
    rate = count / seconds
    if rate >= 100:
        return f"{rate:,.0f} ids/s"
    return f"{rate:.1f} ids/s"


def format_duration(seconds: float) -> str:
    """``7.4 s``, ``12 min 5 s``, ``3 h 2 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _outcomes(found: int, missing: int, failed: int, disallowed: int) -> str:
    text = f"found {found:,}, missing {missing:,}, failed {failed:,}"
    return text + (f", disallowed {disallowed:,}" if disallowed else "")


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


# -- lanes -------------------------------------------------------------------------------


def _end_text(lane: LaneInfo) -> str:
    if lane.stop is not None:
        return str(lane.stop)
    return "no max" if lane.step > 0 else "0"


def lane_plan_text(lane: LaneInfo) -> str:
    """Where a lane will walk: ``asc 1150 -> no max``, ``desc 1149 -> 1000``, ``holes: 12 ids``."""
    if lane.direction == "holes":
        count = (lane.stop - lane.start + 1) if lane.stop is not None else 0
        return f"holes: {_plural(count, 'id')} to refetch"
    if lane.reason == BOUND and lane.cursor == lane.start and lane.decided == 0:
        return f"{lane.direction}: nothing to walk ({lane.start} is past {_end_text(lane)})"
    return f"{lane.direction} {lane.start} -> {_end_text(lane)}"


def lane_position_text(lane: LaneInfo) -> str:
    """Where a lane is now: ``asc at 13057``, ``asc at 13057 4%``, or how it stopped."""
    if (lane.reason is not None and lane.reason != BOUND) or lane.cut_at is not None:
        return lane_stop_text(lane)
    if lane.direction == "holes":
        total = (lane.stop - lane.start + 1) if lane.stop is not None else 0
        return f"holes {lane.cursor - lane.start:,}/{total:,}"
    text = f"{lane.direction} at {lane.cursor}"
    if lane.stop is not None:
        total = (lane.stop - lane.start) * lane.step + 1
        done = (lane.cursor - lane.start) * lane.step
        if total > 0:
            text += f" {min(1.0, max(0.0, done / total)):.0%}"
    return text


def lane_stop_text(lane: LaneInfo) -> str:
    """Where and why a lane stopped, for people.

    ``asc cut at 1183 after 4 misses (last found 1179)``, ``desc reached min 1000``,
    ``asc stopped by limit TTMAX at 1220``, ``asc closed early (shutdown) at 13057``.
    """
    where = lane.direction
    if lane.direction == "holes":
        total = (lane.stop - lane.start + 1) if lane.stop is not None else 0
        if lane.reason in (None, BOUND) and lane.cursor - lane.start >= total:
            return f"holes: {_plural(total, 'id')} refetched"
        done = lane.cursor - lane.start
        state = _stopped_text(lane.reason) if lane.reason not in (None, BOUND) else "running"
        return f"holes: {done:,} of {_plural(total, 'id')} refetched, {state}"
    if lane.reason == MARGIN and lane.cut_at is not None:
        last = f"last found {lane.last_found}" if lane.last_found is not None else "nothing found"
        misses = f"{lane.margin:,} miss" + ("" if lane.margin == 1 else "es")
        return f"{where} cut at {lane.cut_at} after {misses} ({last})"
    if lane.reason == BOUND:
        if lane.decided == 0 and lane.cursor == lane.start:
            return f"{where}: nothing to walk"
        if lane.stop is None:
            return f"{where} reached 0"
        bound = "max" if lane.step > 0 else "min"
        return f"{where} reached {bound} {lane.stop}"
    if lane.reason is None:
        return f"{where} unfinished at {lane.cursor}"
    return f"{where} {_stopped_text(lane.reason)} at {lane.cursor}"


def _stopped_text(reason: str | None) -> str:
    if reason is None:
        return "running"
    if reason.startswith(LIMIT_PREFIX):
        return f"stopped by limit {reason[len(LIMIT_PREFIX):]}"
    return f"closed early ({reason})"


def reach_text(walks_to: int, listed: int) -> str:
    """The plan line's note of a tail walk carried past its misses to an id a sitemap listed
    (:func:`idcrawl.core.resume.walk_reach`): to the id itself, or part of the way (the cap)."""
    if walks_to >= listed:
        return f"its tail walks on to {walks_to:,}, listed in a sitemap"
    return (f"its tail walks on to {walks_to:,}, on the way to {listed:,} listed in a sitemap "
            "(IDCRAWL_SITEMAP_MAX_REACH)")


def resume_text(mode: str, *, stored: bool, known_found: int = 0, finished: Sequence[str] = ()) -> str | None:
    """What a target takes from earlier runs, for the plan line (None: a fresh target, nothing to say).

    ``finished``: directions that earlier runs walked to their end (resume=bound/all continue nothing there).
    """
    if not stored:
        return None if mode in ("auto", *RESET_MODES) else f"resume={mode}: no stored state, starts fresh"
    if mode in RESET_MODES:
        return f"resume={mode}: its stored state was reset, starts over"
    text = f"resumed (resume={mode}): {_plural(known_found, 'found id')} known, not fetched again"
    if finished and mode in ("auto", "bound", "all"):
        text += f"; {', '.join(finished)} finished earlier"
    return text


def forgotten_text(targets: int, found: int, lanes: int, words: Iterable[str] = ("reset",)) -> str:
    """The WARNING of a run that starts targets over (``resume=reset``): what their stored state held."""
    said = "/".join(f"resume={word}" for word in sorted(set(words), reverse=True))
    return (f"{said}: forgets the stored state of {_plural(targets, 'target')} ({_plural(found, 'found id')}, "
            f"{_plural(lanes, 'lane')}): they start over (their run history stays)")


NONE_DEPRECATED = ("resume=none is deprecated: it starts over like resume=reset, the word to use; "
                   "without resume (auto, the default) a run continues from the stored state")


# -- lines -------------------------------------------------------------------------------


def _rest_line(kind: str, rest: Tally, body: str) -> str:
    return f"{kind} and {_plural(rest.targets, 'more target')} ({_plural(rest.lanes, 'lane')}): {body}"


def _states_text(states: Mapping[str, int]) -> str:
    """``; lanes: 9,020 running, 960 cut`` (nothing when the states were not counted)."""
    if not states:
        return ""
    ordered = sorted(states.items(), key=lambda kv: -kv[1])
    return "; lanes: " + ", ".join(f"{count:,} {state}" for state, count in ordered)


def plan_lines(
    targets: Sequence[TargetInfo],
    *,
    state: str,
    rest: Tally | None = None,
    header: str = "",
) -> list[str]:
    """The plan: one header line (targets, lanes, the state), one line per target, one for the rest.

    ``state`` says where the state is kept (``state /path/x.sqlite``, ``state off``);
    ``header`` goes in front of it (a distributed worker names itself and its job).
    """
    shown = Tally()
    for target in targets:
        shown.add(target)
    total_targets = shown.targets + (rest.targets if rest else 0)
    total_lanes = shown.lanes + (rest.lanes if rest else 0)
    resumed = shown.resumed + (rest.resumed if rest else 0)
    head = f"plan: {header}{_plural(total_targets, 'target')}, {_plural(total_lanes, 'lane')}"
    if resumed:
        head += f", {resumed:,} resumed"
    lines = [f"{head}; {state}"]
    for target in targets:
        margins = sorted({lane.margin for lane in target.lanes if lane.direction != "holes"})
        margin = f", margin {margins[0]}" if len(margins) == 1 else ""
        walks = "; ".join(lane_plan_text(lane) for lane in target.lanes) or "nothing to walk"
        line = f"plan {target.name}: {target.url}{margin}: {walks}"
        if target.resume:
            line += f"; {target.resume}"
        lines.append(line)
    if rest is not None and rest.targets:
        body = f"{rest.resumed:,} resumed" if rest.resumed else "fresh"
        lines.append(_rest_line("plan", rest, body))
    return [safe(line) for line in lines]


def progress_lines(
    targets: Sequence[TargetInfo],
    *,
    seconds: float | None,
    before: Mapping[str, int],
    rest: Tally | None = None,
    scope: str = "",
) -> list[str]:
    """One line per target: ids decided, outcomes, rate over ``seconds`` since ``before``, lane positions.

    ``before`` maps target names (and ``""`` for the rest) to ids decided at the last line.
    ``scope`` follows the counts (`` by this worker``) when they are not the whole job's.
    """
    lines = []
    for target in targets:
        done = sum(lane.decided for lane in target.lanes)
        found = sum(lane.found for lane in target.lanes)
        missing = sum(lane.missing for lane in target.lanes)
        failed = sum(lane.failed for lane in target.lanes)
        disallowed = sum(lane.disallowed for lane in target.lanes)
        rate = format_rate(done - before.get(target.name, 0), seconds)
        lanes = "; ".join(lane_position_text(lane) for lane in target.lanes)
        lines.append(
            f"progress {target.name}: {done:,} ids done{scope} ({_outcomes(found, missing, failed, disallowed)}), "
            f"{rate}; {lanes}"
        )
    if rest is not None and rest.targets:
        rate = format_rate(rest.decided - before.get("", 0), seconds)
        body = (f"{rest.decided:,} ids done{scope} "
                f"({_outcomes(rest.found, rest.missing, rest.failed, rest.disallowed)}), {rate}"
                f"{_states_text(rest.states)}")
        lines.append(_rest_line("progress", rest, body))
    return [safe(line) for line in lines]


def done_by_target(targets: Iterable[TargetInfo], rest: Tally | None = None) -> dict[str, int]:
    """Ids decided per target (``""``: the rest): the ``before`` of the next progress lines."""
    done = {target.name: sum(lane.decided for lane in target.lanes) for target in targets}
    if rest is not None:
        done[""] = rest.decided
    return done


def summary_lines(
    targets: Sequence[TargetInfo],
    *,
    seconds: float | None,
    reason: str,
    state: str,
    rest: Tally | None = None,
    scope: str = "",
    known: int = 0,
) -> list[str]:
    """At close: a header (reason, time, totals, rate, state), one line per target, one for the rest.

    Found (ids decided found in a target's walks) and emitted (found ids whose items the target emitted)
    are told apart: where targets overlap, a shared id is found in each walk that holds it and emitted
    by one target. ``known``: found ids of earlier runs the lanes passed without a request; the found
    counts include them (as the ``idcrawl/found`` stat does), the header says how many they were.
    """
    total = Tally()
    for target in targets:
        total.add(target)
    if rest is not None:
        for name in ("targets", "lanes", "found", "missing", "failed", "disallowed", "past_cut", "overshoot",
                     "emitted"):
            setattr(total, name, getattr(total, name) + getattr(rest, name))
    took = format_duration(seconds) if seconds is not None else "-"
    earlier = f"; {_plural(known, 'found id')} known from earlier runs, not fetched again" if known else ""
    lines = [
        f"summary: {reason} after {took}: {_plural(total.targets, 'target')}, {total.decided:,} ids done{scope} "
        f"({_outcomes(total.found, total.missing, total.failed, total.disallowed)}; "
        f"{total.emitted:,} emitted), "
        f"{format_rate(total.decided, seconds)}{_waste_text(total.past_cut, total.overshoot)}"
        f"{earlier}; {state}"
    ]
    for target in targets:
        found = sum(lane.found for lane in target.lanes)
        missing = sum(lane.missing for lane in target.lanes)
        failed = sum(lane.failed for lane in target.lanes)
        disallowed = sum(lane.disallowed for lane in target.lanes)
        done = found + missing + failed + disallowed
        past_cut = sum(lane.past_cut for lane in target.lanes)
        overshoot = sum(lane.overshoot for lane in target.lanes)
        emitted = sum(lane.emitted for lane in target.lanes)
        lanes = "; ".join(lane_stop_text(lane) for lane in target.lanes) or "nothing to walk"
        lines.append(
            f"summary {target.name}: {_outcomes(found, missing, failed, disallowed)}{scope}, "
            f"{emitted:,} emitted, "
            f"{format_rate(done, seconds)}; {lanes}{_waste_text(past_cut, overshoot)}"
        )
    if rest is not None and rest.targets:
        body = (f"{_outcomes(rest.found, rest.missing, rest.failed, rest.disallowed)}{scope}, "
                f"{rest.emitted:,} emitted"
                f"{_states_text(rest.states)}{_waste_text(rest.past_cut, rest.overshoot)}")
        lines.append(_rest_line("summary", rest, body))
    return [safe(line) for line in lines]


def _waste_text(past_cut: int, overshoot: int) -> str:
    if not past_cut:
        return ""
    found = f", {overshoot:,} of them found, not emitted" if overshoot else ""
    return f"; {_plural(past_cut, 'request')} past cuts{found}"
