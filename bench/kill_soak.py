"""Items twice after SIGKILL: the trial's scenario (issue 12, item 7), with counts.

    .venv/bin/python bench/kill_soak.py [--seeds 1 2 3] [--kills 6] [--high 12799] [-s KEY=VALUE ...]

One demo site (ids 10000..HIGH, ~8% gaps, 3 ms per page); per seed, a crawl
(``start=10000 direction=asc margin=10``, the project's settings, so
``IDCRAWL_STATE_COMMIT_ITEMS=100`` and ``IDCRAWL_STATE_COMMIT_INTERVAL=5``
unless ``-s`` says otherwise) is SIGKILLed ``--kills`` times, each after a
seeded number of requests (100..600 since the run started), and resumed each
time with ``resume=bound``; a last run goes to the end. Printed per seed:
items over all runs' feeds, distinct (target, id), duplicates, the largest
number of duplicate ids one kill caused, and ids lost (existing ids in no
feed). The kill points vary with the machine's speed only in where the
commits fall, not in the counts the seed asks for.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

from idcrawl.demo.site import IdSite  # noqa: E402
from tests.support.killsoak import SlowDemo, kill_soak  # noqa: E402
from tests.support.reference import target_truth  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--high", type=int, default=12_799)
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    options = parser.parse_args()
    settings: dict[str, object] = {"LOG_LEVEL": "INFO"}
    for pair in options.settings:
        key, _, value = pair.partition("=")
        settings[key] = value
    rows = []
    for seed in options.seeds:
        model = SlowDemo(10_000, options.high)
        site = IdSite(model)
        site.handle_error = lambda *args: None  # type: ignore[method-assign]  # resets by the kills
        site.start()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                args = {"url": site.url(), "start": 10_000, "direction": "asc", "margin": 10, "name": "trial"}
                soak = kill_soak(Path(tmp), site, args, settings, seed=seed, kills=options.kills,
                                 between=(100, 600))
        finally:
            site.stop()
        truth = set(target_truth(model.exists, 10_000, "asc", 10))
        copies = soak.copies()
        per_run = [len(run) - len({(i["target"], i["id"]) for i in run}) for run in soak.runs]
        # duplicates a kill caused: ids of run k that a later run emitted again
        caused = []
        for k in range(len(soak.runs) - 1):
            ids = {(i["target"], i["id"]) for i in soak.runs[k]}
            later = {(i["target"], i["id"]) for run in soak.runs[k + 1:] for i in run}
            caused.append(len(ids & later))
        for run, status in soak.ended:
            if status:
                print(f"seed {seed}: run {run} ended by itself with status {status}:\n{soak.logs[run][-3000:]}")
        row = {
            "seed": seed, "kill_points": soak.kill_points, "killed": soak.killed, "ended": soak.ended,
            "items": len(soak.items), "distinct": len(copies), "duplicates": soak.duplicates,
            "max_per_kill": max(caused, default=0), "per_kill": caused, "within_run": sum(per_run),
            "lost": len(truth - {id_ for _, id_ in copies}), "final_rc": soak.final_returncode,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    total = sum(r["items"] for r in rows)
    dup = sum(r["duplicates"] for r in rows)
    print(f"total: {total} items, {dup} duplicates ({100 * dup / max(total, 1):.1f}%), "
          f"{sum(r['lost'] for r in rows)} lost, {sum(r['killed'] for r in rows)} kills")


if __name__ == "__main__":
    main()
