"""Throughput of a collection alone on its host against the same walk without collections.

A yield probability only matters when URLs of several collections (or crawl profiles) contend for
a host slot; a collection alone on its host gets every slot (docs/scope.md). This benchmark checks
that it also costs nothing measurable: both sides crawl the same local site, a front page that
links to ``--pages`` pages on the same host, as a page target with one crawl profile
(``max_hops = 1``), with the same settings:

* ``plain``: the crawl profile belongs to no collection, yield probabilities 0;
* ``collection``: the crawl profile belongs to collection ``news`` (yield probability 0.9) and has
  a yield probability of 0.5 itself: every dispatch goes through the yield model, which has
  nothing to decide.

Runs alternate (plain, collection, plain, ...) against one server process. Each run's rate is
``response_received_count / elapsed_time_seconds`` (``bench/benchstats.py`` writes the stats when
the spider closes), each run has a fresh state file, and both sides must fetch every page (else
the script exits with 1). The result is the median over rounds of collection/plain (the target:
>= 0.95, within 5%). A ratio within one run, never a pass/fail threshold of the test suite.

    python bench/scope_yields.py --pages 5000 --rounds 5 --concurrency 16

``python bench/scope_yields.py --serve N`` (internal) runs the site alone: it prints ``PORT <n>``
and stops when its stdin closes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from throughput import POLITENESS_OFF  # noqa: E402


def _serve(pages: int) -> int:
    front = "".join(f'<a href="/p/{i}">{i}</a>\n' for i in range(1, pages + 1)).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/":
                body = b"<html><body>" + front + b"</body></html>"
            elif self.path.startswith("/p/"):
                body = f"<html><body><h1>page {self.path[3:]}</h1></body></html>".encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    def watch_stdin() -> None:
        sys.stdin.read()  # EOF: the benchmark has finished or died
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


def start_server(pages: int) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", str(pages)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"scope_yields: the benchmark server did not start ({line!r})")
    return proc, int(line.split()[1])


def job_file(path: Path, port: int, side: str) -> None:
    collection = side == "collection"
    path.write_text(
        ('[[collections]]\nname = "news"\nyield_probability = 0.9\n\n' if collection else "")
        + '[[crawl_profiles]]\nname = "site"\nmax_hops = 1\n'
        + ('collection = "news"\nyield_probability = 0.5\n' if collection else "")
        + f'\n[[targets]]\nname = "front"\nurl = "http://127.0.0.1:{port}/"\ncrawl_profiles = ["site"]\n'
    )


def run(side: str, port: int, args: argparse.Namespace, workdir: Path, round_: int) -> dict[str, Any]:
    job, stats_file = workdir / f"{side}-{round_}.toml", workdir / f"{side}-{round_}-stats.json"
    job_file(job, port, side)
    settings = {
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": "False",
        "ROBOTSTXT_OBEY": "True",
        "STATS_CLASS": "benchstats.BenchStatsCollector",
        "BENCH_STATS_FILE": str(stats_file),
        "IDCRAWL_STATE_PATH": str(workdir / f"{side}-{round_}.sqlite"),
        "IDCRAWL_PROGRESS_INTERVAL": 0,
        "IDCRAWL_DISCARD_ITEMS": "True",  # measured without a feed, as before items had to go somewhere
        **POLITENESS_OFF,  # on by default: one request a second to the one host
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "idseq", "-a", f"job={job}"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    path = os.pathsep.join([str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PYTHONPATH": path}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server, still running, is not counted
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0 or not stats_file.exists():
        raise SystemExit(f"scope_yields: the {side} crawl failed:\n{proc.stderr[-3000:]}")
    stats = json.loads(stats_file.read_text())["stats"]
    fetched = stats.get("idcrawl/crawl_profiles/site/fetched", 0)
    elapsed = stats.get("elapsed_time_seconds", 0.0)
    responses = stats.get("response_received_count", 0)
    return {
        "side": side,
        "round": round_,
        "fetched": fetched,
        "responses": responses,
        "elapsed": elapsed,
        "rate": responses / elapsed if elapsed else 0.0,
        "cpu_rate": responses / cpu if cpu else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        return _serve(args.serve)
    server, port = start_server(args.pages)
    ratios, cpu_ratios = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="idcrawl-scope-bench-") as tmp:
            for round_ in range(args.rounds):
                runs = {side: run(side, port, args, Path(tmp), round_) for side in ("plain", "collection")}
                for result in runs.values():
                    if result["fetched"] != args.pages:
                        print(f"scope_yields: {result['side']} fetched {result['fetched']} of {args.pages} pages")
                        return 1
                ratio = runs["collection"]["rate"] / runs["plain"]["rate"]
                cpu_ratio = runs["collection"]["cpu_rate"] / runs["plain"]["cpu_rate"]
                ratios.append(ratio)
                cpu_ratios.append(cpu_ratio)
                print(
                    f"round {round_}: plain {runs['plain']['rate']:.0f}/s {runs['plain']['cpu_rate']:.0f}/CPU-s, "
                    f"collection {runs['collection']['rate']:.0f}/s {runs['collection']['cpu_rate']:.0f}/CPU-s, "
                    f"ratio {ratio:.3f}, per CPU-s {cpu_ratio:.3f}",
                    flush=True,
                )
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(10)
    print(
        f"median collection/plain over {len(ratios)} rounds: pages per CPU-second of the crawl process "
        f"{statistics.median(cpu_ratios):.3f} (target >= 0.95), wall pages/s {statistics.median(ratios):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
