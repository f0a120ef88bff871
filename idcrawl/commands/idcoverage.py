"""``scrapy idcoverage [TARGET ...] [--job FILE] [--state PATH] [-o map.svg|map.html | --format table|tsv|json]``:
the coverage picture, or its lanes printed (one row per lane) as idplan prints its plan."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from idcrawl.commands._common import (
    CommandFailed,
    add_format_options,
    add_state_options,
    apply_command_profile,
    check_args,
    fail,
    load_views,
    make_console,
    output_format,
    print_tsv,
    resolve_state,
    say_reading,
)
from idcrawl.commands.coverage import MODES, coverage_document, coverage_rows, html_document, svg_document
from idcrawl.core.safetext import mask_secrets, safe

FORMATS = {".svg": "svg", ".html": "html", ".htm": "html"}


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("[TARGET ...] [--job FILE] [--state PATH] [--spider NAME] "
                "[-o FILE.svg|FILE.html | --format table|tsv|json]")

    def short_desc(self) -> str:
        return "Draw each lane's id axis (found, holes, unvisited, start, cut, bounds) as SVG or HTML"

    def long_desc(self) -> str:
        return (
            "Draw one row per lane, grouped per target: found, missing, failed, disallowed and unvisited ids "
            "as coloured segments, the start point, the cut, min/max and the bound still to crawl. "
            "The format follows the output file's extension. Without -o: one row per lane (what each row's "
            "caption says) as a table, tab-separated rows or JSON (--format). The state file is only read."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_state_options(parser)
        parser.add_argument("-o", "--output", metavar="FILE", help="map.svg or map.html (without it: print the lanes)")
        parser.add_argument("--width", metavar="PX", type=int, default=1000,
                            help="pixels of the id axis; at most one bucket of ids per pixel (default: 1000)")
        parser.add_argument("--bucket", choices=MODES, default="dominant",
                            help="colour a bucket by the dominant outcome of its ids, or by the worst one")
        add_format_options(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        check_args(args)
        form = output_format(opts)
        if opts.output is None:
            self.print_lanes(args, opts, form)
            return
        if opts.format is not None or opts.json:
            raise UsageError(f"-o {opts.output} and --format {form}: give one (-o draws the map, --format "
                             "prints the lanes)", print_help=False)
        output = Path(opts.output)
        kind = FORMATS.get(output.suffix.lower())
        if kind is None:
            raise UsageError(f"-o {opts.output}: the file name must end in .svg or .html", print_help=False)
        if opts.width < 50:
            raise UsageError(f"--width must be at least 50, not {opts.width}", print_help=False)
        if not apply_command_profile(self, "idcoverage"):
            return
        path = resolve_state(self.settings, opts)
        if output.exists() and path.exists() and output.resolve() == path.resolve():
            raise UsageError(f"-o {opts.output} is the state file", print_help=False)
        try:
            views = load_views(path, args, opts.job)
        except CommandFailed as exc:
            fail(self, "idcoverage", exc)
            return
        say_reading("idcoverage", path)
        render = svg_document if kind == "svg" else html_document
        try:
            output.write_bytes(render(views, width=opts.width, mode=opts.bucket))
        except OSError as exc:
            fail(self, "idcoverage", OSError(f"cannot write {str(output)!r}: {exc.strerror or exc}"))
            return
        lanes = sum(len(view.lanes) for view in views)
        plural = {True: "", False: "s"}
        print(f"wrote {safe(output)} ({len(views)} target{plural[len(views) == 1]}, {lanes} lane{plural[lanes == 1]})")

    def print_lanes(self, args: list[str], opts: argparse.Namespace, form: str) -> None:
        """The lanes, one row each (``--format``): what the map's captions say, for a terminal or a script."""
        if not apply_command_profile(self, "idcoverage"):
            return
        path = resolve_state(self.settings, opts)
        try:
            views = load_views(path, args, opts.job)
        except CommandFailed as exc:
            fail(self, "idcoverage", exc)
            return
        say_reading("idcoverage", path, json=form != "table")
        rows = coverage_rows(views)
        if form == "tsv":
            print_tsv(rows)
        elif form == "json":
            sys.stdout.write(json.dumps(coverage_document(views, state=mask_secrets(str(path))), indent=2) + "\n")
        else:
            from rich.table import Table

            table = Table()
            for column in rows[0]:
                table.add_column(column, overflow="fold")
            for row in rows[1:]:
                table.add_row(*row)
            make_console().print(table)
