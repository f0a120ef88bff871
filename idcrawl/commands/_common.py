"""What the state commands share: options, the settings profile, finding and naming the state, errors.

No command class lives here (Scrapy would register it as a command ``_common``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from scrapy.commands import ScrapyHelpFormatter
from scrapy.exceptions import UsageError

from idcrawl.commands.report import ReportError, TargetView, collect
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import parse_job
from idcrawl.core.safetext import safe
from idcrawl.errors import BadInputError
from idcrawl.settings_profiles import apply_profile
from idcrawl.state.base import StateError, StateStore
from idcrawl.state.location import state_path
from idcrawl.state.sqlite import SqliteStateStore

__all__ = [
    "FORMATS", "CommandFailed", "PlainHelpFormatter", "add_format_options", "add_state_options",
    "apply_command_profile", "check_args", "fail", "load_views", "make_console", "output_format", "print_tsv",
    "read_state", "reading", "redis_address", "resolve_state", "say_reading", "table_rows",
]

#: What ``--format`` offers: rich tables for people, tab-separated rows and JSON for scripts.
FORMATS = ("table", "tsv", "json")
#: The width of a table written to a pipe or a file: wide enough that no cell is folded, whatever COLUMNS says.
PIPE_WIDTH = 10_000

#: Errors that end a command with one line and exit status 1.
CommandFailed = (ReportError, StateError, TargetError)


class PlainHelpFormatter(ScrapyHelpFormatter):
    """Scrapy's help layout (underlined section headings), without its false headings.

    ``ScrapyHelpFormatter`` underlines every part of the help that ends in ``:``;
    argparse joins the wrapped lines of an option's help as such parts too, so a
    line that wraps just after ``(default:`` came out title-cased and underlined.
    Here only the sections' own headings are; an option's lines are joined as
    plain text.
    """

    _in_action = 0

    def _format_action(self, action: argparse.Action) -> str:
        self._in_action += 1
        try:
            return super()._format_action(action)
        finally:
            self._in_action -= 1

    def _join_parts(self, part_strings: Any) -> str:
        if self._in_action:
            return argparse.HelpFormatter._join_parts(self, part_strings)
        return super()._join_parts(part_strings)


def add_format_options(parser: argparse.ArgumentParser) -> None:
    """``--format table|tsv|json`` and ``--json`` (the same as ``--format json``)."""
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="table (default: rich tables, full lines when piped), tsv (a header line, then one "
                             "tab-separated row per line) or json")
    parser.add_argument("--json", action="store_true", help="print a JSON document for scripts (--format json)")


def output_format(opts: argparse.Namespace) -> str:
    """The format the options ask for; ``--json`` with another ``--format`` is a usage error."""
    if opts.json and opts.format not in (None, "json"):
        raise UsageError(f"--json and --format {opts.format}: give one", print_help=False)
    return "json" if opts.json else (opts.format or "table")


def make_console(out: Any = None) -> Console:
    """A rich console for ``out`` (stdout): a terminal's width on a terminal; to a pipe or a file, lines
    as long as their content (rich would fold cells at COLUMNS, or 80: ``127.0.0.`` over ``1``)."""
    out = sys.stdout if out is None else out
    isatty = getattr(out, "isatty", None)
    if isatty is not None and isatty():
        return Console(file=out, highlight=False)
    return Console(file=out, highlight=False, width=PIPE_WIDTH, soft_wrap=True)


def _cell_text(cell: Any) -> str:
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return " ".join(text.split())  # one field: no tab or line break inside


def table_rows(table: Table) -> list[list[str]]:
    """A rich table's header and rows as plain text, one list per line."""
    columns = table.columns
    rows = [[_cell_text(column.header) for column in columns]]
    cells = [list(column.cells) for column in columns]
    for index in range(table.row_count):
        rows.append([_cell_text(column[index]) if index < len(column) else "" for column in cells])
    return rows


def print_tsv(rows: list[list[str]], out: Any = None) -> None:
    """Tab-separated lines: a header, then the rows."""
    out = sys.stdout if out is None else out
    out.write("".join("\t".join(row) + "\n" for row in rows))


def add_state_options(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = PlainHelpFormatter
    group = parser.add_argument_group(title="State")
    group.add_argument("--job", metavar="FILE", help="the targets of this TOML job file (as -a job=FILE)")
    group.add_argument(
        "--state", metavar="PATH",
        help="the state file (default: IDCRAWL_STATE_PATH, else JOBDIR/idcrawl-state.sqlite, "
        "else .scrapy/idcrawl/SPIDER.sqlite)",
    )
    group.add_argument("--spider", metavar="NAME", default="idseq",
                       help="the spider whose default state file to read (default: idseq)")


def check_args(args: list[str]) -> None:
    """Scrapy parses known options only: an unknown one would pass as a target name."""
    for arg in args:
        if arg.startswith("-"):
            raise UsageError(f"unknown option {arg}", print_help=False)


class RedisState(str):
    """A job's state in Redis (``IDCRAWL_STATE_BACKEND = "redis"``, or a distributed job):
    shown as ``<where> <key prefix>``; read with the command's settings (``REDIS_URL``, ...)."""

    settings: Any
    spider: str
    prefix: str

    def exists(self) -> bool:
        return False  # not a file (``idcoverage`` compares its output file with the state's)


def apply_command_profile(command: Any, name: str) -> bool:
    """Apply ``IDCRAWL_PROFILE`` to the command's settings as a crawl does (same function and priority:
    an explicit ``-s`` still wins); False after the one-line refusal of a bad profile."""
    try:
        apply_profile(command.settings)
    except BadInputError as exc:
        fail(command, name, exc)
        return False
    return True


def redis_address(settings: Any) -> str:
    """The Redis server the settings point at, a password masked: ``redis://:***@host:6379/0``."""
    from idcrawl.distributed.sentinel import describe_sentinels

    sentinels = describe_sentinels(settings)
    if sentinels:
        return sentinels
    url = settings.get("REDIS_URL")
    if url:
        return safe(url)
    return safe(f"redis://{settings.get('REDIS_HOST') or 'localhost'}:{settings.get('REDIS_PORT') or 6379}")


def reading(path: Path) -> str:
    """What a command reads: ``Redis job 'idcrawl:{job}:' at redis://...`` or ``state file '...'``."""
    if isinstance(path, RedisState):
        return f"Redis job {safe(repr(path.prefix))} at {redis_address(path.settings)}"
    return f"state file {safe(repr(str(path)))}"


def say_reading(name: str, path: Path, *, json: bool = False) -> None:
    """The command's first line: what it read (on stderr under ``--json``, so stdout stays JSON)."""
    print(f"{name}: reading {reading(path)}", file=sys.stderr if json else sys.stdout, flush=True)


def resolve_state(settings: Any, opts: argparse.Namespace) -> Path:
    if not opts.state:
        from idcrawl.distributed.connection import describe, job_prefix, state_backend

        if state_backend(settings) == "redis":
            where = RedisState(f"{describe(settings)} {job_prefix(settings, opts.spider)}")
            where.settings, where.spider = settings, opts.spider
            where.prefix = job_prefix(settings, opts.spider)
            return where  # type: ignore[return-value]  # used as a str and for exists()
    return Path(opts.state) if opts.state else state_path(settings, opts.spider)


def load_views(path: Path, targets: list[str], job: str | None) -> list[TargetView]:
    """Read the plan of ``targets`` (and the job's) from the state file at ``path``, read-only."""
    job_targets = parse_job(job) if job else []
    with read_state(path) as store:
        return collect(store, targets, job_targets)


@contextlib.contextmanager
def read_state(path: Path) -> Iterator[StateStore]:
    """The state at ``path`` (a file, or a job's state in Redis: :func:`resolve_state`), opened read-only."""
    if isinstance(path, RedisState):
        from idcrawl.state.factory import open_store

        redis_store = open_store(path.settings, path.spider, read_only=True, backend="redis")
        try:
            yield redis_store
        finally:
            redis_store.close()
        return
    if not path.exists():
        raise ReportError(
            f"state file {str(path)!r} does not exist: no crawl recorded state there "
            "(give --state PATH, or the JOBDIR or IDCRAWL_STATE_PATH the crawl used)"
        )
    store = SqliteStateStore(path, read_only=True)
    try:
        yield store
    finally:
        store.close()


def fail(command: Any, name: str, error: BaseException) -> None:
    """One line on stderr, exit status 1."""
    print(f"{name}: error: {safe(error)}", file=sys.stderr)
    command.exitcode = 1
