"""``scrapy idplan [TARGET ...] [--job FILE] [--state PATH] [--json]``: the resume plan."""

from __future__ import annotations

import argparse
import sys
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
    make_console,
    output_format,
    print_tsv,
    read_state,
    resolve_state,
    say_reading,
    table_rows,
)
from idcrawl.commands.report import collect, plan_document, plan_rows, render_plan, write_json
from idcrawl.commands.scope_report import (
    last_refusals,
    render_refusals,
    render_scope,
    scope_document,
    scope_table,
    url_counts,
)
from idcrawl.core.jobfile import parse_job


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[TARGET ...] [--job FILE] [--state PATH] [--spider NAME] [--format table|tsv|json]"

    def short_desc(self) -> str:
        return "Print the resume plan of a job's state: content, holes and bound per lane"

    def long_desc(self) -> str:
        return (
            "Print, per target and lane, the crawled span, the content (found ids), the holes "
            "(missing, failed, disallowed), the bound still to crawl, why the lane stopped, and the last run; "
            "with crawl scope, the queued, postponed and harvested URLs per target, crawl profile, "
            "collection and hops. "
            "Without TARGET: every target of the state file (or of --job). The state file is only read."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_state_options(parser)
        add_format_options(parser)
        parser.add_argument("--ranges", metavar="N", type=int, default=3,
                            help="id runs shown at each end of a list (default: 3; 0: all)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        check_args(args)
        form = output_format(opts)
        if opts.ranges < 0:
            raise UsageError(f"--ranges must be >= 0, not {opts.ranges}", print_help=False)
        if not apply_command_profile(self, "idplan"):
            return
        path = resolve_state(self.settings, opts)
        try:
            job = parse_job(opts.job) if opts.job else []
            with read_state(path) as store:  # read once: the plan and the URL queue
                urls, pages_only = url_counts(store, args)  # crawl scope: by target, crawl profile, hops
                refusals = last_refusals(store) if urls else {}  # traps and redirects of the last run
                plan_args = [name for name in args if name not in pages_only]  # page targets have no lanes
                views = collect(store, plan_args, job) if plan_args or not args or job else []
        except CommandFailed as exc:
            fail(self, "idplan", exc)
            return
        say_reading("idplan", path, json=form != "table")
        if form == "tsv":
            print_tsv(plan_rows(views, opts.ranges) if views or not urls else [])
            if urls:  # the crawl scope's counts: a table of their own, after an empty line
                print_tsv(([[]] if views else []) + table_rows(scope_table(urls)))
        elif form == "json":
            document = plan_document(views, state=str(path), keep=opts.ranges, stream=True)
            document["scope"] = scope_document(urls)
            if refusals:
                document["scope_refusals"] = refusals
            write_json(document, sys.stdout)
        else:
            console = make_console()
            if views or not urls:
                render_plan(views, console, keep=opts.ranges)  # the first line named the state
            render_scope(urls, console)
            render_refusals(refusals, console)
