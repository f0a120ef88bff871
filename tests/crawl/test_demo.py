"""README command 1: the demo job crawls the bundled site and finds every page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from idcrawl.demo.site import DemoModel

REPO = Path(__file__).resolve().parents[2]


def test_demo_job_writes_every_page_of_the_demo_site_each_time_it_runs(tmp_path: Path) -> None:
    """Run twice, as a user runs ``make demo`` again: each run crawls a new demo site (a new port) from scratch."""
    output = tmp_path / "items.jsonl"
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "idcrawl.demo", "crawl", "-o", str(output)],
            cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    model = DemoModel()
    ids = sorted(json.loads(line)["id"] for line in output.read_text().splitlines())
    assert ids == [i for i in range(model.low, model.high + 1) if model.exists(i)]
    assert len(ids) > 4000
    assert f"{len(ids)} items written to {output}" in proc.stdout
    first = json.loads(output.read_text().splitlines()[0])
    assert first["title"] == f"Procurement notice {first['id']}"
