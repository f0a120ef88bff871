"""Exactness of distributed runs: requests and items of 1 and 3 workers against one process.

Two cases on one local site (``idcrawl.demo.site``, a few ms per page, per-host concurrency 8
per worker), each crawled by one single process and by 1 and 3 workers of a Redis job
(a fresh private ``redis-server``):

* **overlap**: targets ``a`` (1..200) and ``b`` (100..300) on one template, ids 50, 150, 151
  and 250 missing (the single process: 300 requests, 296 items, 101 deduplicated).
* **small**: 200 small targets on one template: seeded starts in 1..6000, direction ``both``,
  margin 5; the site has a run of 6 missing ids every 20-40 ids (seeded), so every lane stops
  after a few dozen ids and many targets overlap.

For each run: requests the site saw, ids requested twice, items, items twice, and the
workers' ``idcrawl/past_cut`` and ``idcrawl/deduplicated``. The ratio is requests / the single
process's requests (the acceptance bound is <= 1.05 with 3 workers, no id twice).

    python bench/distributed_exact.py [--block 8] [--workers 1,3] [--targets 200]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from idcrawl.demo.site import DemoModel, IdSite, Reply
from tests.support.crawl import crawl_command, read_items
from tests.support.redis_server import RedisServer


class Model(DemoModel):
    def __init__(self, low: int, high: int, gaps: set[int]) -> None:
        super().__init__(low, high)
        self.gaps = gaps

    def exists(self, id_: int) -> bool:
        return self.low <= id_ <= self.high and id_ not in self.gaps

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, 0.002 + (id_ * 7919 % 5) / 1000)


def overlap_case(url: str) -> str:
    return f"""
[defaults]
direction = "asc"
margin = 5
window = 12

[[targets]]
name = "a"
url = "{url}"
start = 1
max = 200

[[targets]]
name = "b"
url = "{url}"
start = 100
max = 300
"""


def small_gaps(rng: random.Random, high: int) -> set[int]:
    gaps: set[int] = set()
    at = rng.randint(20, 40)
    while at < high:
        gaps.update(range(at, at + 6))
        at += 6 + rng.randint(20, 40)
    return gaps


def small_case(url: str, rng: random.Random, targets: int, high: int) -> str:
    blocks = ['[defaults]\ndirection = "both"\nmargin = 5\nwindow = 12\n']
    for n in range(targets):
        blocks.append(f'[[targets]]\nname = "t{n}"\nurl = "{url}"\nstart = {rng.randint(1, high)}\n')
    return "\n".join(blocks)


def run(site: IdSite, job: Path, workdir: Path, workers: int, block: int, server: RedisServer | None,
        name: str) -> dict[str, object]:
    site.log.clear()
    site._counts.clear()
    settings: dict[str, object] = {"CONCURRENT_REQUESTS": 8, "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
                                   "IDCRAWL_PROGRESS_INTERVAL": 0}
    if server is not None:
        settings |= {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": server.url, "IDCRAWL_REDIS_JOB": name,
                     "IDCRAWL_REDIS_CLAIM_BLOCK": block, "IDCRAWL_REDIS_POLL_INTERVAL": 0.2}
    procs = []
    for n in range(workers):
        where = workdir / f"{name}-{n}"
        where.mkdir(parents=True)
        command, env = crawl_command(where, {"job": job}, settings)
        procs.append((where, subprocess.Popen(command, cwd=where, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL)))
    items: list[tuple[str, int]] = []
    stats: list[dict[str, object]] = []
    for where, proc in procs:
        if proc.wait(timeout=900) != 0:
            raise SystemExit(f"{name}: a crawl failed in {where}")
        items += [(i["target"], i["id"]) for i in read_items(where / "items.jsonl")]
        stats.append(json.loads((where / "stats.json").read_text()))
    requested = Counter(e.id for e in site.log if e.id is not None)
    return {
        "requests": sum(requested.values()),
        "ids_twice": sum(1 for c in requested.values() if c > 1),
        "items": len(items),
        "items_twice": len(items) - len({id_ for _, id_ in items}),
        "distinct_items": sorted({id_ for _, id_ in items}),  # the target may differ: the lane that fetched
        "past_cut": sum(int(s.get("idcrawl/past_cut", 0)) for s in stats),  # type: ignore[call-overload]
        "deduplicated": sum(int(s.get("idcrawl/deduplicated", 0)) for s in stats),  # type: ignore[call-overload]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--workers", default="1,3")
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--cases", default="overlap,small")
    args = parser.parse_args()
    rng = random.Random(14)
    high = 6000
    gaps = small_gaps(rng, high)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for case in args.cases.split(","):
            model = Model(1, 300, {50, 150, 151, 250}) if case == "overlap" else Model(1, high, gaps)
            with IdSite(model) as site:
                job = workdir / f"{case}.toml"
                job.write_text(overlap_case(site.url()) if case == "overlap"
                               else small_case(site.url(), rng, args.targets, high))
                single = run(site, job, workdir, 1, args.block, None, f"{case}-single")
                print(f"{case}: single process: requests {single['requests']}, items {single['items']}, "
                      f"past_cut {single['past_cut']}, deduplicated {single['deduplicated']}")
                for workers in (int(w) for w in args.workers.split(",")):
                    server = RedisServer().start()
                    try:
                        fleet = run(site, job, workdir, workers, args.block, server, f"{case}-w{workers}")
                    finally:
                        server.stop()
                    same = fleet["distinct_items"] == single["distinct_items"]
                    ratio = int(fleet["requests"]) / int(single["requests"])  # type: ignore[call-overload]
                    print(f"{case}: {workers} workers (block {args.block}): requests {fleet['requests']} "
                          f"(x{ratio:.3f}), ids twice {fleet['ids_twice']}, items {fleet['items']} "
                          f"(twice {fleet['items_twice']}, the single process's: {same}), "
                          f"past_cut {fleet['past_cut']}, deduplicated {fleet['deduplicated']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
