"""idcrawl's pytest plugin: test a site spider on pages recorded once (``pip install idcrawl[testing]``).

The fixture ``recorded_crawl``, registered through the ``pytest11`` entry point, and one hook that makes a
Scrapy project's package importable as ``scrapy`` makes it; docs/testing.md.
How it differs from scrapy-mock's: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from idcrawl.recorded import RecordedCrawl

__all__ = ["cassette_path", "project_folder", "pytest_configure", "recorded_crawl"]

#: scrapy-mock's cassette folder, for a ``vcr_settings`` that names none
DEFAULT_LIBRARY = "tests/fixtures/cassettes"
_MISSING_EXTRA = ("idcrawl's recorded_crawl fixture needs scrapy-mock's plugin (its vcr_settings fixture) and vcrpy: "
                  "pip install 'idcrawl[testing]'")


def project_folder(start: Path) -> Path | None:
    """The Scrapy project ``start`` is in: the nearest folder from ``start`` upwards with a ``scrapy.cfg``."""
    for folder in (start, *start.parents):
        if (folder / "scrapy.cfg").is_file():
            return folder
    return None


def pytest_configure(config: pytest.Config) -> None:
    """A ``scrapy startproject`` project's package is importable in its tests, as ``scrapy`` commands make it
    (the folder of ``scrapy.cfg`` on ``sys.path``): plain ``pytest`` finds ``myproject``, as
    ``python -m pytest`` does from that folder. Nothing outside a Scrapy project; nothing is imported."""
    folder = project_folder(Path.cwd()) or project_folder(config.rootpath)
    if folder is not None and str(folder) not in sys.path:
        sys.path.append(str(folder))


def cassette_name(request: pytest.FixtureRequest) -> str:
    """The test's cassette file name: its name with parameters, made safe (scrapy-mock's rules, plus the characters
    some file systems refuse; a test class by its name, where scrapy-mock writes its repr)."""
    name = re.sub(r"\]", "", request.node.name)
    name = re.sub(r"[\[-]", "__", name)
    name = re.sub(r"[:/.?&=<>'\"\\|*\s]+", "-", name)
    if request.cls is not None:
        name = f"{request.cls.__name__}.{name}"
    return f"{name}.yaml"


def cassette_path(request: pytest.FixtureRequest, library: str | Path) -> Path:
    """Where the test's cassette is: ``library/<module>/<name>.yaml``, a relative ``library`` under the Scrapy
    project's folder (the one with ``scrapy.cfg``), else under pytest's rootdir."""
    folder = Path(library)
    if not folder.is_absolute():
        base = project_folder(request.path.parent) or request.config.rootpath
        folder = base / folder
    return folder / request.path.stem / cassette_name(request)


@pytest.fixture
def recorded_crawl(request: pytest.FixtureRequest) -> Iterator[Callable[..., RecordedCrawl]]:
    """Make recorded crawls of site spiders, their pages recorded in (or replayed from) the test's cassette."""
    try:
        import vcr  # noqa: F401
        settings = request.getfixturevalue("vcr_settings")  # scrapy-mock's cassette settings
    except (ImportError, pytest.FixtureLookupError):
        pytest.fail(_MISSING_EXTRA, pytrace=False)
    from idcrawl.recorded import RecordedCrawl

    path = cassette_path(request, settings.cassette_library_dir or DEFAULT_LIBRARY)
    with ExitStack() as stack:
        opened: list[Any] = []

        def make(spidercls: type[Any], **arguments: Any) -> RecordedCrawl:
            if not opened:  # opened on first use (a test that fetches nothing writes no cassette), saved last
                opened.append(stack.enter_context(settings.use_cassette(str(path))))
            return stack.enter_context(RecordedCrawl(spidercls, cassette=opened[0], **arguments))

        yield make
