"""A demo register that holds a crawl mid-way (its lock taken), for the one-process-per-state tests."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import DemoModel, Reply
from tests.support.crawl import CrawlResult, crawl_command

START, LOW, HIGH, GATE = 10_050, 10_000, 10_099, 10_060
SECOND_AGENT = "second-crawl"


class GatedModel(DemoModel):
    """The demo register whose page ``GATE`` answers only once :attr:`opened` is set (the first
    crawl is held mid-way, its lock taken); every id request's User-Agent is kept."""

    def __init__(self) -> None:
        super().__init__(LOW, HIGH)
        self.reached, self.opened = threading.Event(), threading.Event()
        self.agents: list[str] = []

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        self.agents.append(headers.get("User-Agent", ""))
        if id_ == GATE and nth == 1:
            self.reached.set()
            self.opened.wait(120)
        return super().reply_to(id_, host, nth, headers)


def gate_args(site: Any) -> dict[str, Any]:
    return {"url": site.url(), "start": START, "direction": "both", "margin": 10, "name": "reg"}


def held_crawl(tmp_path: Path, site: Any, model: GatedModel, settings: dict[str, Any]) -> subprocess.Popen[bytes]:
    """The first crawl, started and held at the gate (it has its lock by then)."""
    command, env = crawl_command(tmp_path, gate_args(site), settings, output="items.jsonl")
    with (tmp_path / "first.log").open("wb") as log:
        first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log)
    if not model.reached.wait(120):
        first.kill()
        pytest.fail("the first crawl never reached the gate: " + (tmp_path / "first.log").read_text()[-3000:])
    return first




def refused_run(tmp_path: Path, site: Any, settings: dict[str, Any], output: str = "items.jsonl") -> CrawlResult:
    """The same command again as a second process (its requests marked by ``SECOND_AGENT``), to its end; the
    feed is left as it is (not deleted as :func:`tests.support.crawl.run_crawl` does)."""
    command, env = crawl_command(tmp_path, gate_args(site), {**settings, "USER_AGENT": SECOND_AGENT}, output=output)
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    return CrawlResult(proc.returncode, proc.stderr)
