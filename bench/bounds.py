"""Bounds of an id crawl against a hostile local site: peak RSS of huge bodies and a huge robots.txt, and
the time from SIGTERM to exit with a slow-loris download in flight.

    .venv/bin/python bench/bounds.py                       # this checkout
    .venv/bin/python bench/bounds.py --repo /path/to/other # another checkout (its idcrawl), same site

Each case crawls ids 1..9 (``margin=0``) with the project's settings and no profile (``--profile NAME``
for one). Peak RSS is the crawl process's ``ru_maxrss`` (the site runs in this process and streams
its bodies, so it adds nothing to the child's figure). Results in docs/profiles.md ("Bounds").
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.hostile_site import MIB, HostileSite  # noqa: E402

CASES = {
    "none": ({}, "no large body (the baseline)"),
    "length": ({"big": {5: "length"}}, "one 64 MiB body with its Content-Length"),
    "stream": ({"big": {5: "stream"}}, "one 64 MiB body without a Content-Length"),
    "two": ({"big": {5: "stream", 6: "stream"}, "big_size": 100 * MIB}, "two 100 MiB bodies at once"),
    "robots": ({"robots": b"User-agent: *\nDisallow: /notice/3\n", "robots_filler": 50 * MIB}, "a 50 MiB robots.txt"),
}


def command(site: HostileSite, work: Path, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    cmd = [sys.executable, "-m", "scrapy", "crawl", "idseq", "-a", f"url={site.url()}", "-a", "start=1",
           "-a", "max=9", "-a", "margin=0", "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False",
           "-s", f"JOBDIR={work}/job", *extra, "-O", f"{work}/items.jsonl"]
    return cmd, {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PYTHONPATH": str(args.repo)}


def peak_rss(case: str, extra: list[str]) -> str:
    kwargs, label = CASES[case]
    with tempfile.TemporaryDirectory() as tmp, HostileSite(range(1, 10), **kwargs) as site:  # type: ignore[arg-type]
        work = Path(tmp)
        cmd, env = command(site, work, extra)
        with (work / "stderr.txt").open("w") as err:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=err)
            _, _, usage = os.wait4(proc.pid, 0)
        ids = sorted(json.loads(line)["id"] for line in (work / "items.jsonl").read_text().splitlines())
    return f"{label}: peak RSS {usage.ru_maxrss // 1024} MiB, items {ids}"


def sigterm(extra: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp, HostileSite(range(1, 10), slow={4}, trickle_seconds=120) as site:
        work = Path(tmp)
        cmd, env = command(site, work, extra)
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        site.trickling.wait(60)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            return "SIGTERM: not closed after 300 s (killed)"
        return f"SIGTERM with a 120 s trickle in flight: exit after {time.monotonic() - started:.1f} s"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose idcrawl is crawled with")
    parser.add_argument("--profile", help="a settings profile (IDCRAWL_PROFILE)")
    parser.add_argument("--cases", default=",".join([*CASES, "sigterm"]))
    args = parser.parse_args()
    extra = ["-s", f"IDCRAWL_PROFILE={args.profile}"] if args.profile else []
    for case in args.cases.split(","):
        print(sigterm(extra) if case == "sigterm" else peak_rss(case, extra), flush=True)
