"""Peak memory and time of ``scrapy idplan`` and ``scrapy idcoverage`` on one 10,000,000-id lane.

    .venv/bin/python bench/plan_memory.py [--ids N] [--gaps 0.01] [--state PATH] [--keep]

Writes the state with the store API (1% scattered missing ids by default, seeded), then runs each
command in its own process under ``/usr/bin/time -v`` and prints its peak RSS, wall time, output
size and the output's SHA-256 (equal hashes: byte-identical output). ``--keep`` keeps the state.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.states import write_big_lane  # noqa: E402 - after the path


def measure(args: list[str], cwd: Path) -> tuple[int, float, float, int, str]:
    """Peak RSS (kB), wall and CPU seconds, stdout bytes and its SHA-256 of ``scrapy ARGS``."""
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "COLUMNS": "120",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env,
                          capture_output=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(proc.stderr.decode()[-2000:])
    rss = int(re.search(rb"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    cpu = sum(float(m) for m in re.findall(rb"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr))
    out = proc.stdout
    for name in ("map.svg", "map.html"):
        if name in args[-1]:
            out = (cwd / name).read_bytes()
    return rss, wall, cpu, len(out), hashlib.sha256(out).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=10_000_000)
    parser.add_argument("--gaps", type=float, default=0.01)
    parser.add_argument("--state", type=Path, help="use (or write) the state here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary state")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="plan-memory-"))
    path = args.state or tmp / "state.sqlite"
    if not path.exists():
        write_big_lane(path, args.ids, args.gaps)
    commands = [
        ["idplan", "--state", str(path)],
        ["idplan", "--state", str(path), "--json"],
        ["idplan", "--state", str(path), "--json", "--ranges", "0"],
        ["idplan", "--state", str(path), "--ranges", "0"],
        ["idcoverage", "--state", str(path), "-o", "map.svg"],
    ]
    print(f"state {path}: {args.ids:,} ids, {args.gaps:.0%} missing")
    for command in commands:
        rss, wall, cpu, size, digest = measure(command, tmp)
        print(f"{' '.join(command[:1] + command[3:]):32} peak {rss / 1024:6.1f} MB  {wall:6.2f} s ({cpu:6.2f} s CPU)  "
              f"{size:>10,} bytes  sha256 {digest}")
    if not args.keep and not args.state:
        for child in tmp.iterdir():
            child.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
