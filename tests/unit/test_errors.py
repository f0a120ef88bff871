"""Bad input is one line: the log filter of :mod:`idcrawl.errors`, and when it is installed.

The crawls that check the line itself are in ``test_input_errors.py``,
``test_crawl_errors.py`` and ``test_dupefilter.py``; here: no idcrawl module
installs a log filter when imported, a crawl installs it as it starts, and
the filter rewrites only records that carry a :class:`BadInputError`.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from idcrawl import errors
from idcrawl.errors import BadInputError

REPO = Path(__file__).resolve().parents[2]
LOGGERS = ("asyncio", "scrapy.crawler", "twisted")


def run_python(code: str) -> str:
    """``code`` in a fresh interpreter (no filter installed by this test process); its stdout."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


FILTERS = """
import logging
names = ["", *logging.Logger.manager.loggerDict]
print(sorted(n for n in names if getattr(logging.getLogger(n), "filters", None)))
"""


def test_importing_idcrawl_installs_no_log_filter() -> None:
    code = """
import importlib, pkgutil, idcrawl
for module in pkgutil.walk_packages(idcrawl.__path__, "idcrawl."):
    if not module.name.endswith(".__main__"):
        importlib.import_module(module.name)
""" + FILTERS
    assert run_python(code) == "[]"


def test_making_a_crawler_of_an_idseq_spider_installs_it() -> None:
    code = """
from scrapy.crawler import Crawler
from idcrawl.spiders.idseq import IdSeqSpider
Crawler(IdSeqSpider, {})
""" + FILTERS
    assert run_python(code) == str(sorted(LOGGERS))


def test_the_addon_installs_it_for_any_spider() -> None:
    code = """
from scrapy.settings import Settings
from idcrawl.addon import IdCrawl
IdCrawl().update_settings(Settings())
""" + FILTERS
    assert run_python(code) == str(sorted(LOGGERS))


def test_installing_twice_adds_one_filter() -> None:
    errors.install_log_filter()
    errors.install_log_filter()
    for name in LOGGERS:
        assert logging.getLogger(name).filters.count(errors._FILTER) == 1


def record_of(exc: BaseException | None, msg: str = "Task exception was never retrieved") -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, (), exc_info)


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_bad_input_error_becomes_its_message() -> None:
    record = record_of(raised(BadInputError("bad setting: IDCRAWL_WINDOW='abc': must be an integer >= 1")))
    assert errors._FILTER.filter(record)
    assert (record.getMessage(), record.exc_info, record.exc_text) == (
        "bad setting: IDCRAWL_WINDOW='abc': must be an integer >= 1", None, None,
    )


def test_a_refusal_is_shown_under_idcrawls_logger() -> None:
    """Not as ``[asyncio] ERROR`` (asyncio's report of a task's exception) but as idcrawl's line."""
    record = record_of(raised(BadInputError("idseq: bad input: margin='-1': must be an integer >= 0")))
    assert errors._FILTER.filter(record)
    assert record.name == errors.REFUSAL_LOGGER == "idcrawl"
    other = record_of(raised(ValueError("other")))
    assert errors._FILTER.filter(other) and other.name == "asyncio"


def test_an_error_raised_while_handling_one_becomes_its_message() -> None:
    """The crawler's clean-up after a refusal while the engine opens: "Engine slot not assigned"."""
    try:
        try:
            raise BadInputError("job/idcrawl-seen.pybloom: corrupt header")
        except BadInputError:
            raise RuntimeError("Engine slot not assigned")  # noqa: B904
    except RuntimeError as exc:
        record = record_of(exc)
    assert errors._FILTER.filter(record)
    assert record.getMessage() == "job/idcrawl-seen.pybloom: corrupt header" and record.exc_info is None


@pytest.mark.parametrize("exc", [None, raised(ValueError("other")), raised(RuntimeError("Engine slot not assigned"))])
def test_any_other_record_passes_unchanged(exc: BaseException | None) -> None:
    record = record_of(exc, "something %s")
    record.args = ("else",)
    exc_info = record.exc_info
    assert errors._FILTER.filter(record)
    assert (record.getMessage(), record.exc_info) == ("something else", exc_info)


# -- every record made safe to print (SafeRecords) ------------------------------------------------

SECRET = "s3cretPW"


def made(name: str, msg: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    """A record as a logger makes it, through SafeRecords around the standard factory."""
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    factory = errors.SafeRecords(logging.LogRecord)
    return factory(name, logging.WARNING, __file__, 1, msg, args, exc_info)


def shown(record: logging.LogRecord) -> str:
    return logging.Formatter("%(name)s %(message)s").format(record)


def test_a_password_is_masked_in_every_logger_s_lines_and_tracebacks() -> None:
    url = f"redis://:{SECRET}@db:6379/0"
    for name in ("idcrawl.distributed.worker", "scrapy.core.engine", "anything"):
        record = made(name, "Redis at REDIS_URL=%r does not answer", url)
        assert SECRET not in shown(record) and "redis://:***@db:6379/0" in shown(record)
    record = made("scrapy.core.scraper", "Error", exc=raised(ValueError(f"cannot parse {url}")))
    text = shown(record)
    assert SECRET not in text and "Traceback" in text and "redis://:***@db" in text


def test_an_idcrawl_line_stays_one_line_and_sends_no_terminal_escape() -> None:
    record = made("idcrawl.extensions.progress", "plan %s: %s", "t\n2026-01-01 [x] INFO: forged\x1b[2J", 3)
    assert shown(record) == "idcrawl.extensions.progress plan t\\n2026-01-01 [x] INFO: forged\\x1b[2J: 3"


def test_other_loggers_keep_their_line_breaks_but_not_terminal_escapes() -> None:
    record = made("scrapy.statscollectors", "Dumping Scrapy stats:\n%s", "{'a':\t1,\n 'b': '\x1b[2J\x07'}")
    assert shown(record) == "scrapy.statscollectors Dumping Scrapy stats:\n{'a':\t1,\n 'b': '\\x1b[2J\\x07'}"


def test_a_record_with_nothing_to_hide_keeps_its_template_and_args() -> None:
    record = made("idcrawl.runtime", "lane %s: %d ids", "reg:asc", 5)
    assert (record.msg, record.args, record.getMessage()) == ("lane %s: %d ids", ("reg:asc", 5), "lane reg:asc: 5 ids")
    bad = made("idcrawl.runtime", "lane %d", "x")  # a broken format is left for logging to report
    assert (bad.msg, bad.args) == ("lane %d", ("x",))


def test_a_refusal_shows_its_value_escaped_and_masked() -> None:
    record = record_of(raised(BadInputError(f"bad input: url='redis://:{SECRET}@h' name='a\nb'")))
    assert errors._FILTER.filter(record)
    assert record.getMessage() == "bad input: url='redis://:***@h' name='a\\nb'"


def test_installing_wraps_the_record_factory_once() -> None:
    code = """
import logging
from idcrawl import errors
errors.install_log_filter(); errors.install_log_filter()
factory = logging.getLogRecordFactory()
print(type(factory).__name__, type(factory.factory).__name__)
logging.basicConfig(format="%(message)s", level=logging.INFO)
import sys; logging.root.handlers[0].stream = sys.stdout
logging.getLogger("scrapy.core.engine").info("REDIS_URL=redis://:pw@h/0")
"""
    assert run_python(code).splitlines() == ["SafeRecords type", "REDIS_URL=redis://:***@h/0"]


def test_importing_idcrawl_leaves_the_record_factory_alone() -> None:
    code = """
import importlib, logging, pkgutil, idcrawl
for module in pkgutil.walk_packages(idcrawl.__path__, "idcrawl."):
    if not module.name.endswith(".__main__"):
        importlib.import_module(module.name)
print(logging.getLogRecordFactory() is logging.LogRecord)
"""
    assert run_python(code) == "True"
