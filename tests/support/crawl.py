"""Run the real ``scrapy crawl`` in a subprocess and collect what it produced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def run_crawl(
    workdir: Path,
    args: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    *,
    spider: str = "idseq",
    runspider: Path | None = None,
    timeout: float = 180,
) -> CrawlResult:
    """``scrapy crawl SPIDER -a k=v ... -s K=V ... -O items.jsonl`` in ``workdir``."""
    output = workdir / "items.jsonl"
    stats_path = workdir / "stats.json"
    for stale in (output, stats_path):
        stale.unlink(missing_ok=True)
    base_settings: dict[str, Any] = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "IDCRAWL_PROGRESS_INTERVAL": 0,
        "EXTENSIONS": {"tests.support.statsdump.StatsDump": 0},
        "STATS_DUMP_PATH": str(stats_path),
    }
    merged = {**base_settings, **(settings or {})}
    if "idcrawl.extensions.IdProgress" not in merged["EXTENSIONS"]:
        merged["EXTENSIONS"] = {**merged["EXTENSIONS"], "idcrawl.extensions.IdProgress": 500}
    command = [sys.executable, "-m", "scrapy"]
    command += ["runspider", str(runspider)] if runspider else ["crawl", spider]
    for key, value in (args or {}).items():
        command += ["-a", f"{key}={value}"]
    for key, value in merged.items():
        text = json.dumps(value) if isinstance(value, dict | list | bool) else str(value)
        command += ["-s", f"{key}={text}"]
    command += ["-O", f"{output}:jsonlines"]
    env = {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    result = CrawlResult(proc.returncode, proc.stderr)
    if output.exists():
        result.items = [json.loads(line) for line in output.read_text().splitlines() if line.strip()]
    if stats_path.exists():
        result.stats = json.loads(stats_path.read_text())
    return result
