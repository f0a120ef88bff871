"""``scrapy check``: the contracts of an id spider's ``parse_found`` run on their ``@url`` page, no crawl.

Other spiders get Scrapy's ``check``. How: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import functools
import time
import types
from typing import TYPE_CHECKING, Any, cast
from unittest import TextTestRunner

from scrapy.commands.check import Command as ScrapyCheck
from scrapy.commands.check import TextTestResult
from scrapy.contracts import ContractsManager
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from twisted.python.failure import Failure

from idcrawl._scrapy import contract_testcase
from idcrawl.commands.parse import ID_CALLBACKS, given_settings
from idcrawl.errors import BadInputError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from scrapy import Request

    from idcrawl.recorded import RecordedCrawl
    from idcrawl.spiders.idseq import IdSeqSpider

__all__ = ["Command"]


class Command(ScrapyCheck):
    """Scrapy's ``check``; an id spider's contracts through the id path (see the module docstring)."""

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from idcrawl.spiders.idseq import IdSeqSpider

        assert self.crawler_process is not None
        loader = self.crawler_process.spider_loader
        names = args or loader.list()
        ids = [name for name in names if issubclass(loader.load(name), IdSeqSpider)]
        others = [name for name in names if name not in ids]
        if opts.list or not ids:
            super().run(args, opts)
            return
        code = self.check_id_spiders([cast("type[IdSeqSpider]", loader.load(name)) for name in ids], opts)
        if others:
            super().run(others, opts)
        self.exitcode = max(code, self.exitcode)

    def check_id_spiders(self, spiders: list[type[IdSeqSpider]], opts: argparse.Namespace) -> int:
        assert self.settings is not None
        contracts = build_component_list(self.settings.get_component_priority_dict_with_base("SPIDER_CONTRACTS"))
        manager = ContractsManager(load_object(contract) for contract in contracts)
        runner = TextTestRunner(verbosity=2 if opts.verbose else 1)
        result = TextTestResult(runner.stream, runner.descriptions, runner.verbosity)
        started = time.monotonic()
        for spidercls in spiders:
            for name in manager.tested_methods_from_spidercls(spidercls):
                self.check_method(spidercls, name, manager, result, opts)
        stopped = time.monotonic()
        result.printErrors()
        result.printSummary(started, stopped)
        return int(not result.wasSuccessful())

    def check_method(self, spidercls: type[IdSeqSpider], name: str, manager: ContractsManager,
                     result: TextTestResult, opts: argparse.Namespace) -> None:
        """Run the contracts of ``spidercls.name`` on the page of their ``@url``."""
        from idcrawl.recorded import RecordedCrawl, page_arguments

        # the contracts are read from a stand-in bound to the spider's name: the spider is made for their @url
        stand_in = types.MethodType(_named(getattr(spidercls, name)), types.SimpleNamespace(name=spidercls.name))
        url = next((contract.args[0] for contract in manager.extract_contracts(stand_in)
                    if contract.name == "url" and contract.args), None)
        if url is None:
            return  # no request to make: Scrapy's check skips it too
        assert self.settings is not None
        try:
            settings = {**given_settings(self.settings), "LOG_ENABLED": self.settings.getbool("LOG_ENABLED")}
            crawl = RecordedCrawl(spidercls, settings=settings, **page_arguments(url, opts.spargs))
        except (BadInputError, ValueError) as exc:
            result.addError(contract_testcase(stand_in, "contract"), _exc_info(exc))
            return
        with crawl:
            method = getattr(crawl.spider, name)
            if name in ID_CALLBACKS:
                method = types.MethodType(_id_path(method, crawl), crawl.spider)
            request = manager.from_method(method, result)
            if request is None:
                return
            try:
                response = _fetch(crawl, request, id_path=name in ID_CALLBACKS)
            except (ValueError, OSError) as exc:
                assert request.errback is not None
                request.errback(Failure(exc))  # type: ignore[no-untyped-call]
                return
            assert request.callback is not None
            request.callback(response)


def _id_path(method: Callable[..., Any], crawl: RecordedCrawl) -> Callable[..., Any]:
    """A callback of one response that runs the id path (outcome, ``base_item``, ``parse_found``), named and
    documented as ``method`` (whose docstring holds the contracts)."""

    def id_path(self: Any, response: Any) -> list[Any]:
        return crawl.judge(response.request, response).output

    return _named(method, id_path)


def _named(method: Callable[..., Any], function: Callable[..., Any] | None = None) -> Callable[..., Any]:
    def stand_in(self: Any, *args: Any) -> None:
        return None

    wrapped = function or stand_in
    functools.update_wrapper(wrapped, method, assigned=("__module__", "__name__", "__qualname__", "__doc__"),
                             updated=())
    return wrapped


def _fetch(crawl: RecordedCrawl, request: Request, *, id_path: bool) -> Any:
    """The response to a contract's request: for the id path, the request of the id its URL renders
    (the target's ``make_id_request``, after its soft-404 probe), as a crawl fetches it."""
    if not id_path:
        return crawl.fetch_response(request)
    target, id_ = crawl.locate(request.url)
    crawl.settle_probes()
    return crawl.fetch_response(crawl.request(id_, target.name))


def _exc_info(exc: BaseException) -> tuple[type[BaseException], BaseException, Any]:
    return type(exc), exc, exc.__traceback__
