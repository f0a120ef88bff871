"""SIGKILL soak: a real crawl killed several times at seeded moments, resumed each time.

A kill is placed by what the server has seen (the ``k``-th request since the
run started, ``k`` drawn from a seeded ``random.Random``), not by wall-clock
sleeps, so a seed always asks for the same kill points. What the checks rely
on holds for every kill moment, so the moments the seed draws do not matter
for passing, only for coverage.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idcrawl.demo.site import DemoModel, IdSite, Reply
from tests.support.crawl import crawl_command, run_crawl


def _items_after(path: Path, offset: int) -> list[dict[str, Any]]:
    """Items on the complete, readable lines of ``path`` past ``offset`` (a line a kill cut is skipped)."""
    items = []
    if path.exists():
        with path.open("rb") as file:
            file.seek(offset)
            for line in file:
                try:
                    items.append(json.loads(line))
                except ValueError:
                    continue
    return items


class SlowDemo(DemoModel):
    """The demo model with a few ms per page, so a crawl lasts long enough to be killed mid-way."""

    def __init__(self, low: int, high: int, delay: float = 0.003) -> None:
        super().__init__(low, high)
        self.delay = delay

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, self.delay)


@dataclass
class Soak:
    runs: list[list[dict[str, Any]]] = field(default_factory=list)  # items of each run, in order
    kill_points: list[int] = field(default_factory=list)  # requests the server saw in the run before its kill
    killed: int = 0  # runs that were still running when their kill came
    ended: list[tuple[int, int]] = field(default_factory=list)  # (run, exit status) of runs that ended by themselves
    logs: dict[int, str] = field(default_factory=dict)  # their stderr
    final_stderr: str = ""
    final_returncode: int = 0

    @property
    def items(self) -> list[dict[str, Any]]:
        return [item for run in self.runs for item in run]

    def copies(self) -> Counter[tuple[str, int]]:
        return Counter((item["target"], item["id"]) for item in self.items)

    @property
    def duplicates(self) -> int:
        """Items beyond the first of each (target, id), over all runs."""
        return sum(n - 1 for n in self.copies().values())


def kill_soak(
    workdir: Path,
    site: IdSite,
    args: dict[str, Any],
    settings: dict[str, Any],
    *,
    seed: int,
    kills: int,
    between: tuple[int, int],
    timeout: float = 120,
    runspider: Path | None = None,
    append: bool = False,
) -> Soak:
    """``kills`` runs each SIGKILLed after a seeded number of requests in ``between``, then a last run
    to the end; every run after the first has ``resume=bound``; run ``i`` writes ``run{i}.jsonl``
    (``append``: every run appends to ``items.jsonl``, ``-o``; a run's items are what it added)."""
    rng = random.Random(seed)
    soak = Soak()
    for run in range(kills):
        kill_after = rng.randint(*between)
        soak.kill_points.append(kill_after)
        run_args = {**args, "resume": "bound"} if run else dict(args)
        output = "items.jsonl" if append else f"run{run}.jsonl"
        if not append:
            (workdir / output).unlink(missing_ok=True)
        before = (workdir / output).stat().st_size if (workdir / output).exists() else 0
        command, env = crawl_command(workdir, run_args, settings, output=output, runspider=runspider,
                                     overwrite=not append)
        seen = len(site.log)
        with (workdir / f"run{run}.log").open("wb") as log:  # stderr, for a run that ended by itself
            proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        while len(site.log) - seen < kill_after and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        running = proc.poll() is None
        if running:
            soak.killed += 1
            proc.kill()  # SIGKILL
        proc.wait(timeout=30)
        if not running:
            soak.ended.append((run, proc.returncode))
            soak.logs[run] = (workdir / f"run{run}.log").read_text(errors="replace")
        soak.runs.append(_items_after(workdir / output, before))
    if append:
        before = (workdir / "items.jsonl").stat().st_size if (workdir / "items.jsonl").exists() else 0
        command, env = crawl_command(workdir, {**args, "resume": "bound"}, settings, output="items.jsonl",
                                     runspider=runspider, overwrite=False)
        proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        soak.runs.append(_items_after(workdir / "items.jsonl", before))
        soak.final_stderr, soak.final_returncode = proc.stderr, proc.returncode
        return soak
    final = run_crawl(workdir, {**args, "resume": "bound"}, settings, output=f"run{kills}.jsonl", timeout=timeout,
                      runspider=runspider)
    soak.runs.append(final.items)
    soak.final_stderr, soak.final_returncode = final.stderr, final.returncode
    return soak
