"""Distributed crawls: real redis-server, real ``scrapy crawl`` workers, local sites with request logs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import CrawlResult, crawl_command, read_items, run_crawl
from tests.support.reference import target_truth

pytest.importorskip("redis")

GAPS_A = {2010, 2011, 2012, 2030, 2031, 2032, 2033, 2034, 2035,  # asc cut at 2034 (margin 5)
          1990, 1970, 1971, 1972, 1973, 1974}  # desc cut at 1974
GAPS_B = {520, 521, 522, 523, 540, 541, 542, 543, 544, 545, 546,  # asc cut at 543 (margin 4)
          480, 481, 482, 483}  # desc cut at 482
FLAKY = {2005, 2020, 1995, 510, 495}


class FlakyModel(GapModel):
    """Gaps, a few ms per page (so responses cross), and ids that answer 503 on their first request."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ in FLAKY and nth == 1:
            return Reply(503, b"busy")
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, (id_ * 7919 % 7) / 1000)


def job_file(path: Path, site_a, site_b) -> Path:
    path.write_text(f"""
[defaults]
direction = "both"
attempts = 3
cooldown = 0.3
backoff = 1.0
window = 12

[[targets]]
name = "a"
url = "{site_a.url()}"
start = 2000
margin = 5

[[targets]]
name = "b"
url = "{site_b.url()}"
start = 500
margin = 4
""")
    return path


def worker_settings(redis_server, job: str = "acc", **extra: Any) -> dict[str, Any]:
    return {
        "IDCRAWL_DISTRIBUTED": True,
        "REDIS_URL": redis_server.url,
        "IDCRAWL_REDIS_JOB": job,
        "IDCRAWL_REDIS_POLL_INTERVAL": 0.1,
        "IDCRAWL_REDIS_CLAIM_BLOCK": 2,
        "CONCURRENT_REQUESTS": 4,
        **extra,
    }


def start_worker(workdir: Path, args: dict[str, Any], settings: dict[str, Any]) -> subprocess.Popen[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    command, env = crawl_command(workdir, args, settings)
    return subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen[str], workdir: Path, timeout: float = 120) -> CrawlResult:
    _, stderr = proc.communicate(timeout=timeout)
    result = CrawlResult(proc.returncode, stderr, read_items(workdir / "items.jsonl"))
    stats = workdir / "stats.json"
    if stats.exists():
        result.stats = json.loads(stats.read_text())
    return result


def truth() -> set[tuple[str, int]]:
    a = target_truth(FlakyModel(1900, 2100, GAPS_A).exists, 2000, "both", 5)
    b = target_truth(FlakyModel(400, 600, GAPS_B).exists, 500, "both", 4)
    return {("a", i) for i in a} | {("b", i) for i in b}


def test_three_workers_produce_the_single_process_result_fetching_each_id_once(
    make_site, redis_server, tmp_path: Path
) -> None:
    site_a, site_b = make_site(FlakyModel(1900, 2100, GAPS_A)), make_site(FlakyModel(400, 600, GAPS_B))
    job = job_file(tmp_path / "job.toml", site_a, site_b)
    (tmp_path / "single").mkdir()
    single = run_crawl(tmp_path / "single", {"job": job})
    assert single.returncode == 0, single.stderr[-3000:]
    single_items = {(i["target"], i["id"]) for i in single.items}
    assert single_items == truth()
    for site in (site_a, site_b):
        site.log.clear()
        site._counts.clear()

    procs = [start_worker(tmp_path / f"w{n}", {"job": job}, worker_settings(redis_server)) for n in range(3)]
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    union = [(i["target"], i["id"]) for r in results for i in r.items]
    assert set(union) == single_items
    assert len(union) == len(set(union)), "an item was emitted twice"
    assert all(r.stats.get("idcrawl/dispensed", 0) > 0 for r in results), "a worker did nothing"
    for site in (site_a, site_b):
        answered = Counter(e.id for e in site.log if e.id is not None and e.status != 503)
        assert max(answered.values()) == 1, "an id was fetched twice (apart from retries)"
        retried = Counter(e.id for e in site.log if e.status == 503)
        assert set(retried) <= FLAKY
    # the workers' counts add up to the job's
    assert sum(r.stats.get("idcrawl/emitted", 0) for r in results) == len(single_items)
    assert sum(r.stats.get("idcrawl/found", 0) for r in results) == len(single_items)
