"""A job file of many targets: time to open, time to stop on CLOSESPIDER_TIMEOUT, peak memory.

``python bench/big_job.py 20000 50000`` writes, for each N, a job file of N small
``[[targets]]`` tables (every URL on 127.0.0.1:9, where nothing listens: each
request fails at once, so the crawl costs what the targets cost), runs
``scrapy crawl idseq -a job=FILE -s CLOSESPIDER_TIMEOUT=5 -s IDCRAWL_MAX_TARGETS=0``
in a fresh work directory and prints one line per N:

    targets  file MB  open s  stop s  close s  peak MB  open peak MB  open cpu s  cpu s  finish_reason

``open s``: from the command to "Spider opened"; ``stop s``: from "Spider opened" to
"Closing spider" (the timeout asked for 5 s); ``close s``: from "Closing spider" to
"Spider closed"; ``peak MB``: the crawl process's maximum RSS; ``cpu s``: the crawl process's user +
system time, start to end (what other load on the machine moves least); ``open cpu s``: its CPU time
when the log says "Spider opened" (start-up and the open: read job file, lanes, first commit), and
``open peak MB`` its peak RSS by then. Log timestamps have a
resolution of one second. ``--base PATH`` runs each N with another checkout too (``tree`` column:
``base`` or ``this``), one after the other: before/after a change in the same run. Figures, not
pass/fail thresholds (the tests assert the finish reason, tests/crawl/test_input_errors.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[scrapy\.core\.engine\] INFO: (Spider opened|Closing spider|"
                    r"Spider closed)")


def write_job(path: Path, count: int) -> None:
    with path.open("w") as fh:
        for i in range(count):
            fh.write(f'[[targets]]\nname = "t{i}"\nurl = "http://127.0.0.1:9/{i}/{{id}}"\n'
                     f"start = {i % 1000}\nmax = {i % 1000 + 50}\n\n")


def run(count: int, workdir: Path, tree: Path = REPO) -> str:
    job = workdir / f"job-{count}.toml"
    if not job.exists():
        write_job(job, count)
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    (workdir / f"state-{count}.sqlite").unlink(missing_ok=True)
    command = [sys.executable, "-m", "scrapy", "crawl", "idseq", "-a", f"job={job}", "-s", "LOG_LEVEL=INFO",
               "-s", "CLOSESPIDER_TIMEOUT=5", "-s", "IDCRAWL_MAX_TARGETS=0", "-s", "TELNETCONSOLE_ENABLED=0",
               "-s", f"IDCRAWL_STATE_PATH={workdir / f'state-{count}.sqlite'}", "-s", "IDCRAWL_DISCARD_ITEMS=True"]
    started = time.time()
    log = workdir / f"log-{count}.txt"
    with log.open("w") as err:
        proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        open_cpu, open_peak = _when_opened(proc, log)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS and CPU time
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = log.read_text()
    peak_kb = usage.ru_maxrss
    cpu = usage.ru_utime + usage.ru_stime
    stamps: dict[str, float] = {}
    for line in stderr.splitlines():
        match = _STAMP.match(line)
        if match:
            at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
            stamps.setdefault(match[2], at)
    reason = re.search(r"'finish_reason': '([^']+)'", stderr)
    opened, closing, closed = (stamps.get(k) for k in ("Spider opened", "Closing spider", "Spider closed"))
    if None in (opened, closing, closed):
        return f"{count:>8}  run failed (exit {proc.returncode}): {stderr[-500:]}"
    assert opened is not None and closing is not None and closed is not None
    peak = f"{peak_kb / 1024:7.0f}"
    return (f"{count:>8}  {job.stat().st_size / 1e6:7.1f}  {opened - started:6.0f}  {closing - opened:6.0f}  "
            f"{closed - closing:7.0f}  {peak}  {open_peak:12.0f}  {open_cpu:10.1f}  {cpu:5.1f}  "
            f"{reason[1] if reason else '?'}")


def _when_opened(proc: subprocess.Popen[str], log: Path) -> tuple[float, float]:
    """The crawl process's user + system CPU seconds and its peak RSS (MB) so far when its log says
    "Spider opened" (read from /proc every 50 ms: start-up and the open); NaN when it never does."""
    ticks = os.sysconf("SC_CLK_TCK")
    while proc.poll() is None:
        try:
            stat = Path(f"/proc/{proc.pid}/stat").read_text()
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            break
        if "[scrapy.core.engine] INFO: Spider opened" in log.read_text(errors="replace"):
            fields = stat.rsplit(")", 1)[1].split()
            hwm = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
            return ((int(fields[11]) + int(fields[12])) / ticks,  # utime, stime (fields 14 and 15)
                    int(hwm[1]) / 1024 if hwm else float("nan"))
        time.sleep(0.05)
    return float("nan"), float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("counts", nargs="*", type=int, default=[5_000, 20_000])
    parser.add_argument("--base", type=Path, help="another checkout, run before this one for each N")
    args = parser.parse_args()
    print(f"{'tree  ' if args.base else ''}targets  file MB  open s  stop s  close s  peak MB  open peak MB  "
          "open cpu s  cpu s  finish_reason")
    with tempfile.TemporaryDirectory() as tmp:
        for count in sorted(args.counts):
            if args.base is not None:
                print("base  " + run(count, Path(tmp), args.base.resolve()), flush=True)
            print(("this  " if args.base else "") + run(count, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
