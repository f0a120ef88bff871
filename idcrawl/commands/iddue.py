"""``scrapy iddue [TARGET ...] [--job FILE] [--state PATH] [--at TIME] [--json]``: what is due, and when.

Per target, what a ``-a resume=due`` run at ``--at`` fetches; the state is only read (docs/recrawl.md,
"``scrapy iddue``"; the order: docs/architecture.md, "Module notes").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Console
from rich.table import Table
from rich.text import Text
from scrapy.commands import ScrapyCommand

from idcrawl.commands._common import (
    CommandFailed,
    add_format_options,
    add_state_options,
    apply_command_profile,
    check_args,
    fail,
    make_console,
    output_format,
    print_tsv,
    read_state,
    resolve_state,
    say_reading,
    table_rows,
)
from idcrawl.commands.report import tail_fields, wanted_targets
from idcrawl.config import setting
from idcrawl.core.clock import Clock, ClockError, parse_time, stamp
from idcrawl.core.jobfile import parse_job
from idcrawl.core.lanes import Outcome
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Schedule, duration_text, overdue
from idcrawl.core.resume import late_pass, tail_bound, tail_due, tail_reach, walk_reach
from idcrawl.core.safetext import mask_secrets, safe
from idcrawl.core.targets import Target
from idcrawl.state.base import StateStore

__all__ = ["DUE_FORMAT", "Command", "DueRow", "due_document", "due_rows"]

#: Version of the JSON document of ``scrapy iddue --json``.
DUE_FORMAT = 1


@dataclass(frozen=True, slots=True)
class DueRow:
    """One target at the time asked about."""

    name: str
    in_state: bool
    #: where a due run walks the tail: (from, to), to None = up to the margin; None: no tail
    walk: tuple[int, int | None] | None
    schedule: Schedule | None
    #: does a resume=due run at that time fetch it (its tail, or all of it when never crawled)?
    due: bool
    #: how overdue, in durations (> 0 when due; None: no schedule)
    overdue: float | None
    #: the found pages due for a revisit at that time, in fetch order (most overdue first)
    due_pages: tuple[int, ...] = ()
    #: how many found pages have a schedule record
    pages: int = 0
    #: is the tail due (``due``: the tail, some page or a late re-probe)?
    tail_due: bool = True
    #: the late ids a resume=due run re-probes then, newest first (a job target with ``late_every``)
    late: tuple[int, ...] = ()
    #: ``IDCRAWL_SITEMAP_MAX_REACH``: how far a walk goes on to a listed id (None: no cap)
    max_reach: int | None = None


def due_rows(
    store: StateStore, names: Sequence[str], job: Sequence[Target], at: float, max_reach: int | None = None
) -> list[DueRow]:
    """The rows of the named targets and the job's (every stored target if neither), in fetch order.
    A distributed job's page records are in its Redis keys, in the same layout
    (:mod:`idcrawl.distributed.pagerecords`)."""
    wanted = wanted_targets(store, names, job)
    by_name = {t.name: t for t in job}
    tails = store.tail_schedules()
    rows = []
    for name in wanted:
        state = store.load(name)
        if state is None:  # a job target never crawled: a resume=due run crawls it fresh
            target = by_name[name]
            rows.append(DueRow(name, False, (target.start, target.max), None, True, None))
            continue
        schedule = tails.get(name)
        if state.lanes:
            walk = tail_bound(state.lanes)
        else:  # recorded, no lane yet: the tail walks from the start
            target_ = by_name.get(name)
            walk = (target_.start, target_.max) if target_ is not None and target_.direction != "desc" else None
        is_due = walk is not None and tail_due(schedule, at)
        book = PageBook(Clock(at))
        book.load(name, store.load_pages(name))
        due_pages = tuple(book.due_ids(name, found=state.outcomes.get(Outcome.FOUND, ())))
        job_target = by_name.get(name)  # late_every is the job's: a target named alone has no policy here
        late_probe = (late_pass(job_target.with_resume("due"), schedule, state.outcomes, at)
                      if job_target is not None else None)
        late = late_probe.ids if late_probe is not None else ()
        rows.append(DueRow(name, True, walk, schedule, is_due or bool(due_pages) or bool(late),
                           overdue(schedule, at) if schedule else None, due_pages, book.records(name), is_due,
                           late, max_reach))
    rows.sort(key=lambda r: (not r.due, -(r.overdue or 0.0) if r.due else _due_at(r), r.name))
    return rows


def _due_at(row: DueRow) -> float:
    return row.schedule.due_at() if row.schedule is not None else float("inf")


def _walk_text(row: DueRow) -> str:
    if row.walk is None:
        return "no tail (no ascending lane, or it reached its bound)"
    first, last = row.walk
    if not row.in_state:
        return f"never crawled: all of it, from {first}"
    reach = _reach(row)
    to = "the margin" if last is None else f"the margin or {last}"
    if reach is None:
        return f"from {first} to {to}"
    listed = tail_reach(row.schedule)
    way = "(listed)" if listed is None or reach >= listed else f"(on the way to {listed} listed)"
    return f"from {first} to {reach} {way}, then {to}"


def _reach(row: DueRow) -> int | None:
    """Where the tail's walk goes whatever the misses (:func:`idcrawl.core.resume.tail_reach`; None: none)."""
    return None if row.walk is None else walk_reach(tail_reach(row.schedule), *row.walk, row.max_reach)


def _at_text(row: DueRow) -> str:
    if row.walk is None:
        return "nothing"
    if not row.tail_due:
        return "not due"
    if row.schedule is None:
        return "due (no schedule yet)" if row.in_state else "due (never crawled)"
    return f"due, {row.overdue:.2f} durations overdue"


def render_due(rows: Sequence[DueRow], console: Console, *, at: float, state: str | None = None) -> None:
    if state is not None:
        console.print(Text(f"state file {safe(state)}"))
    console.print(Text(f"at {stamp(at)}: {sum(r.due for r in rows)} of {len(rows)} targets due "
                       "(what a -a resume=due run fetches then)"))
    if not rows:
        return
    console.print(due_table(rows))


def due_table(rows: Sequence[DueRow]) -> Table:
    """One row per target: its tail walk, learned duration, last crawl, due time, and pages due."""
    table = Table()
    for column in ("target", "tail walk", "learned duration", "last crawled", "due after", "at that time",
                   "pages due", "late ids"):
        table.add_column(column, overflow="fold")
    for row in rows:
        schedule = row.schedule
        table.add_row(
            Text(safe(row.name)), _walk_text(row),
            duration_text(schedule.update_duration) if schedule else "-",
            stamp(schedule.last_crawled) if schedule else "-",
            stamp(schedule.due_at()) if schedule else "-",
            _at_text(row),
            f"{len(row.due_pages):,} of {row.pages:,}" if row.pages else "-",
            f"{len(row.late):,}" if row.late else "-",
        )
    return table


def due_tsv(rows: Sequence[DueRow], *, at: float) -> list[list[str]]:
    """``iddue --format tsv``: the table's columns, then ``at``, the time asked about (``--at``), in each
    row, as the table's first line says it (a column, so each line stands alone for ``awk`` or ``cut``)."""
    header, *lines = table_rows(due_table(rows))
    return [[*header, "at"], *([*line, stamp(at)] for line in lines)]


def due_document(rows: Sequence[DueRow], *, at: float, state: str) -> dict[str, Any]:
    """The rows as a JSON-ready dict (shape in docs/recrawl.md)."""
    targets = []
    for row in rows:
        tail = None
        if row.walk is not None:
            tail = {"walk_from": row.walk[0], "walk_to": row.walk[1], "reach": _reach(row), "due": row.tail_due,
                    "overdue": row.overdue,
                    **tail_fields(row.schedule)}
        pages = {"records": row.pages, "due": list(row.due_pages)} if row.in_state else None
        targets.append({"name": row.name, "in_state": row.in_state, "due": row.due, "tail": tail, "pages": pages,
                        "late": list(row.late)})
    return {"format": DUE_FORMAT, "state": mask_secrets(state), "at": stamp(at), "due": [r.name for r in rows if r.due],
            "targets": targets}


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[TARGET ...] [--job FILE] [--state PATH] [--spider NAME] [--at TIME] [--format table|tsv|json]"

    def short_desc(self) -> str:
        return "Print what is due for a recrawl (-a resume=due) and when, per target"

    def long_desc(self) -> str:
        return (
            "Print, per target, its tail's learned recrawl duration, when it was last crawled and falls due, "
            "and whether a -a resume=due run at --at (default: IDCRAWL_NOW, else now) fetches it, most overdue "
            "first. Without TARGET: every target of the state file (or of --job). The state file is only read."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_state_options(parser)
        parser.add_argument("--at", metavar="TIME",
                            help="an ISO 8601 time such as 2026-01-12T07:00:00Z (default: IDCRAWL_NOW, else now)")
        add_format_options(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        check_args(args)
        form = output_format(opts)
        if not apply_command_profile(self, "iddue"):
            return
        path = resolve_state(self.settings, opts)
        try:
            now = setting(self.settings, "IDCRAWL_NOW") if self.settings is not None else None
            at = parse_time(opts.at, "--at") if opts.at else Clock.from_setting(now).now()
            most = setting(self.settings, "IDCRAWL_SITEMAP_MAX_REACH") if self.settings is not None else None
            job = parse_job(opts.job) if opts.job else []
            with read_state(path) as store:
                rows = due_rows(store, args, job, at, most)
        except (*CommandFailed, ClockError) as exc:
            fail(self, "iddue", exc)
            return
        say_reading("iddue", path, json=form != "table")
        if form == "tsv":
            print_tsv(due_tsv(rows, at=at))
        elif form == "json":
            sys.stdout.write(json.dumps(due_document(rows, at=at, state=str(path)), indent=2) + "\n")
        else:
            render_due(rows, make_console(), at=at)  # the first line named the state
