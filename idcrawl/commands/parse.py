"""``scrapy parse <url> --spider <id spider>``: that one page through the spider's id path, no crawl.

No engine runs and no state is opened; other spiders get Scrapy's ``parse``. Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy.commands.parse import Command as ScrapyParse
from scrapy.exceptions import UsageError
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils import display
from scrapy.utils.spider import spidercls_for_request

from idcrawl.core.safetext import safe
from idcrawl.errors import BadInputError

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings

    from idcrawl.recorded import RecordedPage
    from idcrawl.spiders.idseq import IdSeqSpider

__all__ = ["ID_CALLBACKS", "OFFLINE_SETTINGS", "Command", "given_settings", "id_spidercls"]

#: ``-c`` values that mean the id path itself (any other callback of an id spider is refused).
ID_CALLBACKS = frozenset({"parse", "parse_found"})


#: What an offline page run sets over the project: no Scrapy extension (nothing runs them: no engine).
OFFLINE_SETTINGS: dict[str, Any] = {"EXTENSIONS_BASE": {}}


def given_settings(settings: BaseSettings) -> dict[str, Any]:
    """The settings the project and the command line set (above Scrapy's and the command's defaults), with
    :data:`OFFLINE_SETTINGS` over them."""
    values = settings.copy_to_dict()
    floor = SETTINGS_PRIORITIES["command"]
    given = {name: values[name] for name in values if (settings.getpriority(name) or 0) > floor}
    return {**given, **OFFLINE_SETTINGS}


def id_spidercls(command: Any, name: str | None, url: str) -> type[IdSeqSpider] | None:
    """The id spider ``--spider`` names (or that Scrapy would pick for ``url``), or None for another spider."""
    from idcrawl.spiders.idseq import IdSeqSpider

    loader = command.crawler_process.spider_loader
    try:
        spidercls = loader.load(name) if name else spidercls_for_request(loader, Request(url))
    except KeyError:
        return None  # Scrapy's parse says so
    return spidercls if isinstance(spidercls, type) and issubclass(spidercls, IdSeqSpider) else None


class Command(ScrapyParse):
    """Scrapy's ``parse``; for an id spider, the page through the id path (see the module docstring)."""

    def short_desc(self) -> str:
        return "Parse URL (using its spider) and print the results; an id spider's page through its id path"

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError
        spidercls = id_spidercls(self, opts.spider, args[0])
        if spidercls is None:
            super().run(args, opts)
            return
        if opts.callback and opts.callback not in ID_CALLBACKS:
            raise UsageError(f"-c {opts.callback}: an id spider's page goes through its id path "
                             "(outcome rules, parse_found): leave -c out", print_help=False)
        from idcrawl.recorded import RecordedCrawl, page_arguments

        url = args[0]
        assert self.settings is not None
        try:
            with RecordedCrawl(spidercls, settings=given_settings(self.settings),
                               **page_arguments(url, opts.spargs)) as crawl:
                target, id_ = crawl.locate(url)
                page = crawl.fetch(id_, target.name)
        except (BadInputError, ValueError, OSError) as exc:
            print(f"parse: error: {safe(exc)}", file=sys.stderr)
            self.exitcode = 1
            return
        self.print_page(page, target.name, id_, opts)

    def print_page(self, page: RecordedPage, target: str, id_: int, opts: argparse.Namespace) -> None:
        colour = not opts.nocolour
        print(f"\n>>> {safe(page.response.url)}: target {safe(target)!r}, id {id_}: {page.outcome} "
              f"(status {page.response.status}) <<<")
        if not opts.noitems:
            print("# Scraped Items ", "-" * 60)
            display.pprint([ItemAdapter(item).asdict() for item in page.items], colorize=colour)
        if not opts.nolinks:
            print("# Requests ", "-" * 65)
            display.pprint([out for out in page.output if isinstance(out, Request)], colorize=colour)
