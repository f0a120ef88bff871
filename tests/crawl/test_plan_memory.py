"""``scrapy idplan`` and ``scrapy idcoverage`` on a 10,000,000-id lane stay in bounded memory (peak RSS of
the real command, measured in its own process; the bench figures: bench/plan_memory.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.states import REPO, write_big_lane

#: Far above what the commands take (about 75 MB) and far below what listing the lane's ids took (700 MB).
LIMIT_MB = 200


def peak_rss_mb(cwd: Path, *args: str) -> float:
    """Run ``scrapy ARGS`` from a small Python process and return the command's peak RSS (its children's)."""
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    probe = ("import resource, subprocess, sys\n"
             "proc = subprocess.run([sys.executable, '-m', 'scrapy', *sys.argv[1:]], stdout=subprocess.DEVNULL)\n"
             "print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    proc = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    code, kilobytes = proc.stdout.split()
    assert code == "0", proc.stderr[-2000:]
    return int(kilobytes) / 1024


@pytest.fixture(scope="module")
def big_lane(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_big_lane(tmp_path_factory.mktemp("big") / "state.sqlite")


@pytest.mark.parametrize("args", [[], ["--json"], ["--json", "--ranges", "0"]], ids=["table", "json", "json-all"])
def test_idplan_on_a_ten_million_id_lane_stays_in_bounded_memory(big_lane: Path, tmp_path: Path,
                                                                  args: list[str]) -> None:
    assert peak_rss_mb(tmp_path, "idplan", "--state", str(big_lane), *args) < LIMIT_MB


def test_idcoverage_on_a_ten_million_id_lane_stays_in_bounded_memory(big_lane: Path, tmp_path: Path) -> None:
    assert peak_rss_mb(tmp_path, "idcoverage", "--state", str(big_lane), "-o", "map.svg") < LIMIT_MB
    assert (tmp_path / "map.svg").stat().st_size > 0


def test_every_run_of_the_lane_is_in_the_json(big_lane: Path, tmp_path: Path) -> None:
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "scrapy", "idplan", "--state", str(big_lane), "--json", "--ranges",
                           "0"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=True)
    [lane] = json.loads(proc.stdout)["targets"][0]["lanes"]
    content, missing = lane["content"], lane["holes"]["missing"]
    assert len(content["head"]) == content["runs"] and len(missing["head"]) == missing["runs"]
    assert content["count"] + missing["count"] == 10_000_000
    assert sum(last - first + 1 for first, last in content["head"]) == content["count"]
