"""The Scrapy versions idcrawl supports, and ``idcrawl/_scrapy.py``, the one place that touches Scrapy internals.

``make test`` runs this module and the crawl tests twice: in ``.venv`` (the
latest Scrapy) and in ``.venv-floor`` (the floor of ``constraints-floor.txt``),
with ``IDCRAWL_EXPECT_SCRAPY`` set to the version that tier must be testing.

Where the adapter's calls are exercised by real crawls:
``wake_engine`` by every crawl (lanes freed by late outcomes), ``schedule_coro``
by ``test_limits_crawl.py::test_a_job_limit_closes_the_spider_with_its_rule``
and ``test_distributed_crawl.py``'s idle timeout, the slot jitter by
``test_politeness_crawl.py``.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import scrapy
import yaml
from packaging.requirements import Requirement
from packaging.version import Version
from scrapy.core.downloader import Slot

from idcrawl import _scrapy
from idcrawl.core.politeness import lengthen_only

REPO = Path(__file__).resolve().parents[2]


def floor_version() -> Version:
    """The floor Scrapy that ``make test`` installs in .venv-floor (constraints-floor.txt)."""
    lines = [line.split("#", 1)[0].strip() for line in (REPO / "constraints-floor.txt").read_text().splitlines()]
    (pin,) = [Requirement(line) for line in lines if line and Requirement(line).name.lower() == "scrapy"]
    (spec,) = pin.specifier
    assert spec.operator == "==", pin
    return Version(spec.version)


def pyproject_scrapy() -> Requirement:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (scrapy_requirement,) = [Requirement(d) for d in dependencies if Requirement(d).name.lower() == "scrapy"]
    return scrapy_requirement


# -- the versions -------------------------------------------------------------------------


def test_the_floor_in_pyproject_is_the_floor_make_test_checks() -> None:
    floor = floor_version()
    (spec,) = pyproject_scrapy().specifier
    assert (spec.operator, Version(spec.version)) == (">=", floor), (str(spec), str(floor))


def test_the_zyte_stack_is_the_floor_series() -> None:
    """scrapinghub.yml's stack brings a Scrapy of the floor's series (the series tag, or a dated one of it)."""
    config = yaml.safe_load((REPO / "scrapinghub.yml").read_text())
    match = re.fullmatch(r"scrapy:(\d+)\.(\d+)(?:-\d{8})?", str(config["stack"]))
    assert match, config["stack"]
    floor = floor_version()
    assert (int(match[1]), int(match[2])) == floor.release[:2], (config["stack"], str(floor))


def test_the_crawls_run_the_scrapy_of_this_tier() -> None:
    """The crawl tests start ``sys.executable -m scrapy``: the same Scrapy as this process, the expected one."""
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "version"], capture_output=True, text=True, timeout=120, check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == scrapy.__version__, proc.stdout
    print(f"Scrapy {scrapy.__version__} from {Path(scrapy.__file__).parent} (python {sys.executable})")
    expected = os.environ.get("IDCRAWL_EXPECT_SCRAPY")
    if expected:
        assert scrapy.__version__ == expected
    assert pyproject_scrapy().specifier.contains(scrapy.__version__)


# -- the adapter --------------------------------------------------------------------------


def make_slot(delay: float, jitter: float) -> Slot:
    """A download slot of the installed Scrapy, as its downloader builds one."""
    if _scrapy.SLOT_HAS_JITTER:
        return Slot(1, delay, jitter)
    assert jitter in (0.0, 0.5)
    return Slot(1, delay, bool(jitter))


def test_the_feature_test_matches_the_installed_slot() -> None:
    assert (Version(scrapy.__version__) >= Version("2.19")) == _scrapy.SLOT_HAS_JITTER


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_slot_jitter_reads_what_the_downloader_set(jitter: float) -> None:
    assert _scrapy.slot_jitter(make_slot(2.0, jitter)) == jitter


@pytest.mark.parametrize("jitter", [0.0, 0.2, 0.5, 1.0])
def test_a_slot_set_to_lengthen_only_never_waits_less_than_the_gap(jitter: float) -> None:
    gap = 1.0
    slot = make_slot(0.0, 0.5)
    _scrapy.set_slot_delay(slot, *lengthen_only(gap, jitter))
    random.seed(12)  # Scrapy draws with the random module
    draws = [slot.download_delay() for _ in range(2000)]
    assert min(draws) >= gap - 1e-9
    assert max(draws) <= gap * (1 + jitter) + 1e-9
    assert sum(draws) / len(draws) == pytest.approx(gap * (1 + jitter / 2), rel=0.05)
    if _scrapy.SLOT_HAS_JITTER and jitter:
        assert max(draws) - min(draws) > jitter * gap / 2  # the spread is kept where Scrapy has one
    elif not _scrapy.SLOT_HAS_JITTER:
        assert set(draws) == {gap * (1 + jitter / 2)}  # before 2.19: the mean, every time


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_set_slot_delay_round_trips_the_jitters_every_version_has(jitter: float) -> None:
    slot = make_slot(1.0, 0.5 - jitter)
    _scrapy.set_slot_delay(slot, 3.0, jitter)
    assert (slot.delay, _scrapy.slot_jitter(slot)) == (3.0, jitter)


def test_wake_engine_schedules_the_engines_next_call() -> None:
    calls: list[str] = []
    nextcall = SimpleNamespace(schedule=lambda: calls.append("schedule"))
    _scrapy.wake_engine(SimpleNamespace(engine=SimpleNamespace(_slot=SimpleNamespace(nextcall=nextcall))))
    assert calls == ["schedule"]
    _scrapy.wake_engine(SimpleNamespace(engine=None))  # before the spider opens, after it closes
    _scrapy.wake_engine(SimpleNamespace(engine=SimpleNamespace(_slot=None)))
    assert calls == ["schedule"]


def test_the_engine_names_wake_engine_relies_on_exist() -> None:
    """``engine._slot.nextcall`` of the installed Scrapy (the fakes above would pass on any version)."""
    import inspect

    from scrapy.core import engine

    assert "self._slot" in inspect.getsource(engine.ExecutionEngine.__init__)
    assert "nextcall" in inspect.signature(engine._Slot.__init__).parameters
    assert callable(getattr(engine.CallLaterOnce, "schedule", None))
