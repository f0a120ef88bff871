"""The seam between one process and a fleet: one choice of backend, and a runtime lookup without side effect."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from idcrawl import default_settings
from idcrawl.backends import FLEET, LOCAL, STATE_STORES, backend_of, load
from idcrawl.distributed.addon import Distributed
from idcrawl.runtime import IdRuntime, runtime_of, start_runtime
from idcrawl.spiders.idseq import IdSeqSpider

PACKAGE = Path(__file__).resolve().parents[2] / "idcrawl"


def test_one_setting_chooses_the_backend_and_the_addon_sets_its_worker() -> None:
    assert LOCAL.worker == default_settings.IDCRAWL_WORKER_CLASS
    assert backend_of(Settings()) is LOCAL
    fleet = Settings({"IDCRAWL_DISTRIBUTED": True})
    assert backend_of(fleet) is FLEET
    Distributed().update_settings(fleet)
    assert fleet["IDCRAWL_WORKER_CLASS"] == FLEET.worker
    local = Settings()
    Distributed().update_settings(local)
    assert local.get("IDCRAWL_WORKER_CLASS") is None  # the default: LOCAL's


@pytest.mark.parametrize("path", [LOCAL.worker, FLEET.worker, *STATE_STORES.values()])
def test_every_part_of_a_backend_loads(path: str) -> None:
    assert callable(load(path))


def test_the_state_factory_loads_the_redis_store_by_path() -> None:
    for source in [PACKAGE / "state" / "factory.py"]:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [name for name in names if name.startswith("idcrawl.distributed")], source.name


def test_runtime_of_looks_up_and_start_runtime_builds_the_worker() -> None:
    crawler = get_crawler(IdSeqSpider, {"IDCRAWL_STATE": False})
    runtime = IdRuntime(crawler, [])
    assert runtime_of(crawler) is runtime
    with pytest.raises(RuntimeError, match="not started"):
        runtime.worker  # noqa: B018 - a lookup built nothing
    with pytest.raises(Exception, match="no target"):  # LocalWorker: a crawl of its own needs targets
        runtime.missing_targets = ValueError("no target given")
        start_runtime(crawler)
