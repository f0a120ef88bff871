"""Run the real ``scrapy crawl`` in a subprocess and collect what it produced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass
class CrawlResult:
    returncode: int
    stderr: str
    items: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return sorted(item["id"] for item in self.items)

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if " ERROR: " in line]


def crawl_command(
    workdir: Path,
    args: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    *,
    spider: str = "idseq",
    runspider: Path | None = None,
    output: str | None = "items.jsonl",
    overwrite: bool = True,
    project_defaults: Sequence[str] = (),
) -> tuple[list[str], dict[str, str]]:
    """The ``scrapy crawl SPIDER -a k=v ... -s K=V ... -O output`` command line and its environment.

    ``project_defaults`` names settings of the tests' base (``LOG_LEVEL``,
    ``IDCRAWL_PROGRESS_INTERVAL``, ``IDCRAWL_POLITENESS_FACTOR``) left at the project's value instead.
    """
    base_settings: dict[str, Any] = {
        # the tests' own local sites, hundreds of ids per host: politeness (on by default, a second or
        # more between two requests to a host) off, as for a site you own; tests of the defaults drop it
        "IDCRAWL_POLITENESS_FACTOR": 0,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "IDCRAWL_PROGRESS_INTERVAL": 0,
        "EXTENSIONS": {"tests.support.statsdump.StatsDump": 0},
        "STATS_DUMP_PATH": str(workdir / "stats.json"),
    }
    for name in project_defaults:
        base_settings.pop(name, None)
    merged = {**base_settings, **(settings or {})}
    if "idcrawl.extensions.progress.IdProgress" not in merged["EXTENSIONS"]:
        merged["EXTENSIONS"] = {**merged["EXTENSIONS"], "idcrawl.extensions.progress.IdProgress": 500}
    command = [sys.executable, "-m", "scrapy"]
    command += ["runspider", str(runspider)] if runspider else ["crawl", spider]
    for key, value in (args or {}).items():
        command += ["-a", f"{key}={value}"]
    for key, value in merged.items():
        text = json.dumps(value) if isinstance(value, dict | list | bool) else str(value)
        command += ["-s", f"{key}={text}"]
    if output is not None:  # None: no feed (then IDCRAWL_DISCARD_ITEMS or a pipeline must keep the crawl going)
        command += ["-O" if overwrite else "-o", f"{workdir / output}:jsonlines"]
    env = {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return command, env


def read_items(path: Path) -> list[dict[str, Any]]:
    """Items of a JSON lines file; a line cut short by a kill is skipped."""
    items = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return items


def run_crawl(
    workdir: Path,
    args: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    *,
    spider: str = "idseq",
    runspider: Path | None = None,
    timeout: float = 180,
    output: str | None = "items.jsonl",
    overwrite: bool = True,
    project_defaults: Sequence[str] = (),
) -> CrawlResult:
    """Run ``scrapy crawl`` in ``workdir`` to the end and collect items, stats and stderr
    (``overwrite`` False: ``-o``, the feed appended to; its items are all the file holds then)."""
    stats_path = workdir / "stats.json"
    for stale in (workdir / output, stats_path) if overwrite and output is not None else (stats_path,):
        stale.unlink(missing_ok=True)
    command, env = crawl_command(workdir, args, settings, spider=spider, runspider=runspider, output=output,
                                 overwrite=overwrite, project_defaults=project_defaults)
    proc = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    result = CrawlResult(proc.returncode, proc.stderr, read_items(workdir / output) if output is not None else [])
    if stats_path.exists():
        result.stats = json.loads(stats_path.read_text())
    return result
