"""``scrapy idwacz WARC [WARC ...] -o FILE.wacz [--state PATH] [--title TEXT]``: a job's WARC files as one WACZ.

The found pages of the state go into pages.jsonl (idcrawl/waczpack.py; docs/archiving.md, "WACZ packages");
the state is only read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from idcrawl.commands._common import (
    CommandFailed,
    add_state_options,
    apply_command_profile,
    check_args,
    fail,
    read_state,
    resolve_state,
    say_reading,
)
from idcrawl.core.safetext import safe
from idcrawl.waczpack import WaczError, found_pages, pack, warc_files

__all__ = ["Command"]


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "WARC [WARC ...] -o FILE.wacz [--state PATH] [--spider NAME] [--title TEXT]"

    def short_desc(self) -> str:
        return "Pack a job's WARC files into one WACZ file, its found pages in pages.jsonl"

    def long_desc(self) -> str:
        return (
            "Pack the *.warc.gz files named (or in the folders named, such as the crawl's WARC folder) into one WACZ "
            "file with py-wacz. Its pages.jsonl lists the found pages of the state file (found ids, crawl-scope "
            "pages harvested), each at its first capture in the files; found pages with no capture are counted "
            "on stderr. The state file is only read."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_state_options(parser)
        parser.add_argument("-o", "--output", metavar="FILE.wacz", help="the package to write (required)")
        parser.add_argument("--title", default="idcrawl job", help="the package's title (default: idcrawl job)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        check_args(args)
        if not args:
            raise UsageError("name the WARC files or their folder", print_help=False)
        if not opts.output:
            raise UsageError("-o FILE.wacz is required", print_help=False)
        if opts.job:
            raise UsageError("--job: idwacz lists the found pages of every target of the state", print_help=False)
        if not apply_command_profile(self, "idwacz"):
            return
        path = resolve_state(self.settings, opts)
        try:
            files = warc_files([Path(arg) for arg in args])
            with read_state(path) as store:
                found = found_pages(store)
            say_reading("idwacz", path, json=True)
            packed = pack(files, found, Path(opts.output), opts.title)
        except (*CommandFailed, WaczError, OSError) as exc:
            fail(self, "idwacz", exc)
            return
        print(
            f"idwacz: {safe(str(packed.path))}: {packed.warcs} WARC files, {packed.pages} pages"
            + (f"; {packed.uncaptured} found pages have no capture in these files" if packed.uncaptured else ""),
            file=sys.stderr,
        )
