"""What ``IDCRAWL_REDIS_WAIT_REPLICAS = 1`` costs a worker: wall time, round trips and commands per request.

A private primary and its replica on 127.0.0.1 (tests/support/redis_server.py), a local site of ``--ids``
ids answering at once (the demo model's found ids, so the worker is CPU-bound and the WAIT's wait shows), one worker
(``scrapy crawl idseq -a start=1 -a max=N -a margin=0``, distributed) per run, ``WAIT`` off and on
alternately, ``--reps`` times each; a fresh job each run. Printed: each side's median elapsed time
(``elapsed_time_seconds``), Redis round trips and commands per request (the worker's own counts), and
the ratio of the medians.

    python bench/wait_cost.py [--ids 1000] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

from idcrawl.demo.site import DemoModel, IdSite  # noqa: E402
from tests.support.crawl import run_crawl  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from tests.support.sentinels import FAST_SYNC  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    opts = parser.parse_args()
    primary = RedisServer(extra_args=FAST_SYNC).start()
    replica = RedisServer(extra_args=("--replicaof", "127.0.0.1", str(primary.port))).start()
    model = DemoModel(1, opts.ids)
    found = sum(model.exists(id_) for id_ in range(1, opts.ids + 1))
    site = IdSite(model).start()
    rows: dict[int, list[tuple[float, float, float]]] = {0: [], 1: []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(opts.reps):
                for wait in (0, 1):
                    work = Path(tmp) / f"r{rep}w{wait}"
                    work.mkdir()
                    args = {"url": site.url(), "start": 1, "max": opts.ids, "margin": 0, "direction": "asc"}
                    settings = {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": primary.url,
                                "IDCRAWL_REDIS_JOB": f"wait{rep}{wait}", "IDCRAWL_REDIS_WAIT_REPLICAS": wait}
                    result = run_crawl(work, args, settings)
                    if result.returncode != 0 or len(result.items) != found:
                        print(result.returncode, len(result.items), result.stderr[-300:], file=sys.stderr)
                        return 1
                    stats = result.stats
                    requests = stats["downloader/request_count"]
                    rows[wait].append((stats["elapsed_time_seconds"], stats["idcrawl/redis/calls"] / requests,
                                       stats["idcrawl/redis/commands"] / requests))
    finally:
        site.stop()
        replica.stop()
        primary.stop()
    print(f"{opts.ids} ids, one worker, {opts.reps} runs each (medians)\n")
    print("| WAIT | elapsed (s) | round trips / request | commands / request |")
    print("|---|---:|---:|---:|")
    medians = {}
    for wait, runs in rows.items():
        medians[wait] = [statistics.median(column) for column in zip(*runs, strict=True)]
        elapsed, trips, commands = medians[wait]
        print(f"| {'off' if wait == 0 else '1 replica'} | {elapsed:.2f} | {trips:.2f} | {commands:.2f} |")
    print(f"\nelapsed ratio (WAIT 1 / off): {medians[1][0] / medians[0][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
