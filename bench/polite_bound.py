"""Polite speed at the bound: many loopback hosts of mixed speeds, idcrawl's own politeness, wall against the floor.

The site: ``--hosts`` hosts (60 by default) on loopback addresses (127.0.0.10, 127.0.0.11, ...,
one server per address, all on one port, in a process of its own that logs every request's
arrival). Each host answers after its own delay, drawn from ``--seed``: most fast (2-50 ms),
some medium (0.1-0.3 s), a few slow (0.4-1.0 s), and one very slow (2.5 s); every id exists, and
robots.txt answers at once. Each host gets as many ids as its gaps fit into about ``--seconds``
(some fewer), split into up to 4 targets of consecutive ids: 200+ targets of one job file.

The policy, set explicitly (the ``default`` profile's values before 0.2, shorter than today's 5x within 1-30 s
so that a run fits in minutes): ``IDCRAWL_POLITENESS_FACTOR=2``,
``_MIN_DELAY=0.5``, ``_MAX_DELAY=10``, ``ROBOTSTXT_OBEY``, ``CONCURRENT_REQUESTS=16``; and
``DOWNLOAD_DELAY_JITTER=0`` (exact gaps: Scrapy's default jitter, 0.5, lengthens each gap by up to
half; ``--jitter`` sets it). A host's gap after a fetch that took ``d`` s is ``g(d) = clamp(2d, 0.5,
10)``, from the start of one request to the start of the next.

* **Floor** = start-up + the largest over hosts of the chain its policy calls for: robots.txt,
  a gap ``g(0)``, then ``n - 1`` gaps ``g(d)`` and the last fetch ``d`` (``n`` ids).
  **Start-up** = the wall of a crawl of 1 id (launch to exit, same settings and workers, a host
  answering at once) minus that crawl's own chain (``g(0)``): the fixed cost of the processes.
* **Runs**: one process (SQLite state) and fleets of 2 and 3 workers of one job
  (``IDCRAWL_PROFILE=distributed``, a private ``redis-server`` started here, fresh per run),
  sharing each host's gaps through Redis. Wall = launch -> last worker's exit.
  The union of the items must be exactly the job's ids, each once, or the script exits with 1.
* **Why not at the floor**, from the server's log (one monotonic clock): *first* = launch -> the
  first request's arrival; *chain* = the critical host's first -> last arrival + its delay;
  *tail* = the last response -> exit; per host, each gap's lateness (arrival gap - ``g`` of the
  previous answer's delay) and the worst host's chain against its own floor.
  CPU ms per request: user + system of the crawl processes / requests the site saw.

    python bench/polite_bound.py [--hosts 60] [--seconds 10] [--rounds 3] [--workers 1,2,3]
    python bench/polite_bound.py --hosts 300 --workers 1 --rounds 1 --profile out.prof   # cProfile
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT)]

from throughput import environment  # noqa: E402

FACTOR, MIN_DELAY, MAX_DELAY = 2.0, 0.5, 10.0  # the default profile's before 0.2, set explicitly
TARGETS_PER_HOST = 4


def gap(latency: float) -> float:
    """The gap the policy calls for after a fetch of ``latency`` s (start to start; at least the fetch)."""
    return max(latency, min(max(FACTOR * latency, MIN_DELAY), MAX_DELAY))


@dataclass(frozen=True)
class Host:
    address: str
    delay: float  # seconds each id's answer takes
    ids: int  # ids 1..ids of this host

    def chain(self, workers: int = 1) -> float:
        """Each worker's robots.txt (answered at once) one gap apart, then the ids one gap apart, and the last
        fetch: the best order (a fleet's robots.txt fetches all first)."""
        return workers * gap(0.0) + (self.ids - 1) * gap(self.delay) + self.delay


def address(i: int) -> str:
    return f"127.0.{i // 240}.{i % 240 + 10}"


def plan(hosts: int, seconds: float, seed: int) -> list[Host]:
    rng = random.Random(seed)
    out = []
    for i in range(hosts):
        r = rng.random()
        if i == 0:
            delay = 2.5
        elif r < 0.6:
            delay = rng.uniform(0.002, 0.05)
        elif r < 0.9:
            delay = rng.uniform(0.1, 0.3)
        else:
            delay = rng.uniform(0.4, 1.0)
        delay = round(delay, 3)
        most = max(1, int((seconds - gap(0.0) - delay) / gap(delay)) + 1)
        ids = most if rng.random() < 0.5 else max(1, most - rng.randint(1, max(1, most // 3)))
        out.append(Host(address(i), delay, ids))
    return out


def targets(host: Host, port: int) -> list[tuple[int, int]]:
    """Up to TARGETS_PER_HOST ranges of consecutive ids (start, max) covering 1..ids."""
    parts = min(TARGETS_PER_HOST, host.ids)
    bounds = [round(k * host.ids / parts) for k in range(parts + 1)]
    return [(a + 1, b) for a, b in pairwise(bounds) if b > a]


def job_file(hosts: list[Host], port: int, path: Path) -> int:
    lines = ["[defaults]", "margin = 0", ""]
    count = 0
    for host in hosts:
        for start, stop in targets(host, port):
            count += 1
            lines += ["[[targets]]", f'name = "t{count}"', f'url = "http://{host.address}:{port}/notice/{{id}}"',
                      f"start = {start}", f"max = {stop}", ""]
    path.write_text("\n".join(lines))
    return count


# -- the site ---------------------------------------------------------------------


def _serve(spec: str) -> int:
    from idcrawl.demo.site import DemoModel, IdSite, Reply

    delays = dict(json.loads(spec))

    class Model(DemoModel):
        def __init__(self) -> None:
            super().__init__(low=1, high=10**9)

        def exists(self, id_: int) -> bool:
            return id_ >= 1

        def reply(self, id_: int, host: str, nth: int) -> Reply:
            r = super().reply(id_, host, nth)
            return Reply(r.status, r.body, r.headers, delays.get(host, 0.0))

    log: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    class Site(IdSite):
        bind_address = "127.0.0.1"

        def server_bind(self) -> None:
            self.server_address = (self.bind_address, self.server_address[1])
            super().server_bind()

        def record(self, entry: object) -> None:
            with lock:
                log.append((entry.at, entry.host, entry.path))  # type: ignore[attr-defined]

    port = 0
    sites = []
    for addr in delays:
        cls = type("HostSite", (Site,), {"bind_address": addr})
        site = cls(Model(), port=port)
        port = site.port
        site.start()
        sites.append(site)
    print(f"PORT {port}", flush=True)
    for line in sys.stdin:  # "dump PATH": write the log since the last dump; EOF: exit
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "dump":
            with lock:
                taken = log[:]
                log.clear()
            Path(arg).write_text(json.dumps(taken))
            print("OK", flush=True)
    os._exit(0)


class Server:
    def __init__(self, hosts: list[Host]) -> None:
        spec = json.dumps([[h.address, h.delay] for h in hosts] + [[address(len(hosts)), 0.0]])
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", spec],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit(f"polite_bound: the site did not start ({line!r})")
        self.port = int(line.split()[1])

    def dump(self, path: Path) -> list[tuple[float, str, str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"dump {path}\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "OK":
            raise SystemExit("polite_bound: the site did not answer")
        return [tuple(e) for e in json.loads(path.read_text())]  # type: ignore[misc]

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- the crawls ---------------------------------------------------------------------


@dataclass(frozen=True)
class RedisUse:
    cpu: float  # CPU seconds of redis-server (user + system), start-up included
    evalsha: int  # script calls (every fleet call but set-up and item acknowledgements is one)
    commands: int  # every command executed, those inside scripts included


@dataclass
class Run:
    label: str
    wall: float
    cpu: float
    log: list[tuple[float, str, str]]
    launched: float
    exited: float
    redis: RedisUse | None = None


def settings(args: argparse.Namespace) -> dict[str, object]:
    return {
        "IDCRAWL_POLITENESS_FACTOR": FACTOR, "IDCRAWL_POLITENESS_MIN_DELAY": MIN_DELAY,
        "IDCRAWL_POLITENESS_MAX_DELAY": MAX_DELAY, "ROBOTSTXT_OBEY": "True", "AUTOTHROTTLE_ENABLED": "False",
        "CONCURRENT_REQUESTS": args.concurrency, "DOWNLOAD_DELAY_JITTER": args.jitter,
        "RANDOMIZE_DOWNLOAD_DELAY": str(args.jitter > 0), "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": "False",
        "IDCRAWL_PROGRESS_INTERVAL": 0,
    }


def crawl(label: str, job: Path, workers: int, args: argparse.Namespace, server: Server, workdir: Path,
          expected: set[tuple[str, int]] | None, profile: Path | None = None, root: Path = ROOT) -> Run:
    """``workers`` = 0: one process (SQLite state); else a fleet of that many on a fresh redis-server."""
    from tests.support.redis_server import RedisServer

    redis = RedisServer().start() if workers else None
    procs = []
    items = []
    try:
        launched = time.monotonic()
        before = os.times()
        for n in range(max(1, workers)):
            extra = {"IDCRAWL_STATE_PATH": str(workdir / f"{label}-{n}.sqlite")}
            if redis is not None:
                extra = {"IDCRAWL_PROFILE": "distributed", "REDIS_URL": redis.url, "IDCRAWL_REDIS_JOB": label}
            out = workdir / f"{label}-{n}.jsonl"
            out.unlink(missing_ok=True)
            items.append(out)
            argv = [sys.executable, "-m"]
            if profile is not None:
                argv += ["cProfile", "-o", str(profile), "-m"]
            argv += ["scrapy", "crawl", "idseq", "-a", f"job={job}", "-O", str(out)]
            for key, value in {**settings(args), **extra}.items():
                argv += ["-s", f"{key}={value}"]
            log = (workdir / f"{label}-{n}.log").open("w")
            procs.append(subprocess.Popen(argv, cwd=workdir, env=environment(root), stdout=log,
                                          stderr=subprocess.STDOUT))
        for proc in procs:
            if proc.wait(args.timeout) != 0:
                raise SystemExit(f"polite_bound: {label} failed; logs in {workdir}")
        exited = time.monotonic()
        after = os.times()
        redis_use = None
        if redis is not None:  # what Redis itself spent (a fresh server: all of it is this job's)
            import redis as redis_py

            client = redis_py.Redis.from_url(redis.url)
            cpu_info, commands = client.info("cpu"), client.info("commandstats")
            redis_use = RedisUse(float(cpu_info["used_cpu_user"]) + float(cpu_info["used_cpu_sys"]),
                                 int(commands.get("cmdstat_evalsha", {}).get("calls", 0)),
                                 sum(int(c.get("calls", 0)) for c in commands.values()))
            if args.commands:
                top = sorted(commands.items(), key=lambda c: -int(c[1].get("usec", 0)))[:12]
                print(f"{label}: Redis " + ", ".join(f"{k[8:]} {v['calls']} calls {v['usec']} us" for k, v in top))
            client.close()
    finally:
        if redis is not None:
            redis.stop()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    log = server.dump(workdir / f"{label}.log.json")
    if expected is not None:
        got = []
        for path in items:
            for line in path.read_text().splitlines():
                item = json.loads(line)
                got.append((item["url"].split("/")[2].split(":")[0], int(item["id"])))
        if sorted(got) != sorted(expected):
            raise SystemExit(f"polite_bound: {label}: {len(got)} items, {len(set(got))} distinct, "
                             f"not the job's {len(expected)} ids; logs in {workdir}")
    return Run(label, exited - launched, cpu, log, launched, exited, redis_use)


@dataclass
class Analysis:
    first: float  # launch -> first arrival
    active: float  # first arrival -> last response
    tail: float  # last response -> exit
    worst_host: str
    worst_ratio: float  # that host's chain (first -> last arrival + delay) / its own floor
    late_median: float  # lateness of the gaps, all hosts (s)
    late_p90: float
    late_max: float
    requests: int
    short: int  # gaps shorter than the policy's (by more than 5 ms: the way of a request to the server varies)
    spread: float  # first arrival -> the last host's first arrival (hosts started late)
    cpu_request: float = 0.0  # CPU s per request past start-up: (CPU of the run - CPU of the 1-id crawl) / requests
    redis: tuple[float, float, float] | None = None  # per id past the 1-id crawl: Redis CPU s, EVALSHA, commands


def analyse(run: Run, hosts: list[Host], workers: int) -> Analysis:
    delays = {h.address: h.delay for h in hosts}
    by_host: dict[str, list[tuple[float, str]]] = {}
    for at, host, path in run.log:
        by_host.setdefault(host, []).append((at, path))
    late, short, worst, worst_ratio = [], 0, "", 0.0
    last_end = 0.0
    for h in hosts:
        seen = sorted(by_host.get(h.address, []))
        if not seen:
            continue
        for (a, pa), (b, _) in pairwise(seen):
            wanted = gap(0.0 if pa == "/robots.txt" else delays[h.address])
            late.append(b - a - wanted)
            short += b - a < wanted - 0.005
        end = seen[-1][0] + (0.0 if seen[-1][1] == "/robots.txt" else h.delay)
        last_end = max(last_end, end)
        # against its own floor, the host's first request included (robots.txt, once per worker)
        ratio = (end - seen[0][0]) / h.chain(workers)
        if ratio > worst_ratio:
            worst, worst_ratio = h.address, ratio
    first = min(at for at, _, _ in run.log)
    spread = max(min(at for at, _ in seen) for seen in by_host.values()) - first
    late.sort()
    return Analysis(first - run.launched, last_end - first, run.exited - last_end, worst, worst_ratio,
                    statistics.median(late), late[int(0.9 * (len(late) - 1))], late[-1], len(run.log), short,
                    spread)


def redis_capacity(requests: int) -> int:
    """``--redis-capacity``: one redis-server's calls per second and CPU per call on this machine
    (redis-benchmark, 50 clients, no pipelining), for trivial calls and for scripts of the size the
    job's are (a script of 18 commands: ~21 commands inside scripts per id over ~1.2 calls)."""
    import redis as redis_py

    from tests.support.redis_server import RedisServer

    script = "for i = 1, tonumber(ARGV[1]) do redis.call('HINCRBY', KEYS[1], 'f' .. (i % 4), 1) end return 1"
    polite = ("local h = redis.call('GET', KEYS[1]) "
              "redis.call('SET', KEYS[1], ARGV[1], 'PX', 1000) return 0")
    server = RedisServer().start()
    try:
        client = redis_py.Redis.from_url(server.url)
        sha, polite_sha = client.script_load(script), client.script_load(polite)
        cases = [("PING", ["PING"]), ("SET", ["SET", "k", "v"]), ("GET", ["GET", "k"]),
                 ("EVALSHA of 1 command", ["EVALSHA", sha, "1", "h", "1"]),
                 ("EVALSHA like POLITE (GET + SET PX)", ["EVALSHA", polite_sha, "1", "p", "123 w#1"]),
                 ("EVALSHA of 18 commands", ["EVALSHA", sha, "1", "h", "18"])]
        print(f"redis-server {client.info('server')['redis_version']}, {os.cpu_count()} cores, "
              f"{requests} calls per case, 50 clients, no pipelining")
        print("| call | calls/s (redis-benchmark) | redis-server CPU us per call | calls/s at 100% of one core |")
        print("|---|---|---|---|")
        for name, argv in cases:
            before = client.info("cpu")
            out = subprocess.run(["redis-benchmark", "-p", str(server.port), "-q", "-n", str(requests), "-c", "50",
                                  *argv], capture_output=True, text=True, check=True).stdout
            after = client.info("cpu")
            cpu = sum(float(after[k]) - float(before[k]) for k in ("used_cpu_user", "used_cpu_sys"))
            rate = float(out.strip().splitlines()[-1].split(":", 1)[1].split()[0])
            print(f"| {name} | {rate:,.0f} | {cpu / requests * 1e6:.1f} | {requests / cpu:,.0f} |", flush=True)
        client.close()
    finally:
        server.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=10.0, help="the longest host chain, about (default 10)")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", default="1,2,3", help="1 = one process; 2, 3: fleets through Redis")
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS per process (default 16)")
    parser.add_argument("--jitter", type=float, default=0.0, help="DOWNLOAD_DELAY_JITTER (default 0: exact gaps)")
    parser.add_argument("--profile", type=Path, help="run the one-process crawl under cProfile into this file")
    parser.add_argument("--base", type=Path, help="also run one process with idcrawl from this checkout (before)")
    parser.add_argument("--commands", action="store_true", help="print each fleet run's top Redis commands")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (logs, items, job file)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--redis-capacity", type=int, metavar="N",
                        help="only measure one redis-server's calls/s and CPU per call (N calls per case)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return _serve(args.serve)
    if args.redis_capacity:
        return redis_capacity(args.redis_capacity)
    counts = [int(n) for n in args.workers.split(",")]
    hosts = plan(args.hosts, args.seconds, args.seed)
    server = Server(hosts)
    chains = sorted(((h.chain(), h) for h in hosts), key=lambda c: c[0])
    bound, critical = chains[-1]
    near = sum(c >= 0.9 * bound for c, _ in chains)
    bounds = {n: max(h.chain(n) for h in hosts) for n in {1, *counts}}
    try:
        with tempfile.TemporaryDirectory(prefix="idcrawl-polite-") as tmp:
            workdir = args.keep or Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            job = workdir / "job.toml"
            n_targets = job_file(hosts, server.port, job)
            expected = {(h.address, i) for h in hosts for i in range(1, h.ids + 1)}
            one = workdir / "one.toml"
            one.write_text(f'[defaults]\nmargin = 0\n\n[[targets]]\nurl = "http://{address(len(hosts))}:'
                           f'{server.port}/notice/{{id}}"\nstart = 1\nmax = 1\n')
            print(f"{len(hosts)} hosts, {n_targets} targets, {len(expected)} ids; floor chain {bound:.2f} s "
                  f"(host {critical.address}: {critical.ids} ids, {critical.delay} s each); {near} hosts within "
                  f"10% of it; {os.cpu_count()} cores", flush=True)
            modes = [(f"before ({args.base})", 1, args.base)] if args.base else []
            modes += [("one process" if n == 1 else f"{n} workers (Redis)", n, ROOT) for n in counts]
            rows: dict[str, list[tuple[float, float, Run, Analysis]]] = {name: [] for name, _, _ in modes}
            for round_ in range(args.rounds):
                for name, n, root in modes:
                    mode = 0 if n == 1 else n
                    tag = f"{n}{'b' if root != ROOT else ''}-{round_}"
                    start = crawl(f"s{tag}", one, mode, args, server, workdir, None, root=root)
                    startup = start.wall - gap(0.0)
                    run = crawl(f"r{tag}", job, mode, args, server, workdir, expected,
                                args.profile if n == 1 and round_ == 0 and root == ROOT else None, root=root)
                    a = analyse(run, hosts, n)
                    a.cpu_request = (run.cpu - start.cpu) / max(1, a.requests - len(start.log))
                    if run.redis is not None and start.redis is not None:  # past the 1-id crawl's
                        ids = len(expected) - 1
                        a.redis = ((run.redis.cpu - start.redis.cpu) / ids,
                                   (run.redis.evalsha - start.redis.evalsha) / ids,
                                   (run.redis.commands - start.redis.commands) / ids)
                    floor = startup + bounds[n]
                    rows[name].append((floor, startup, run, a))
                    print(f"round {round_ + 1}, {name}: wall {run.wall:.2f} s, floor {floor:.2f} s "
                          f"(start-up {startup:.2f} s) -> {run.wall / floor:.3f}; first request {a.first:.2f} s, "
                          f"active {a.active:.2f} s (chain {bounds[n]:.2f}), tail {a.tail:.2f} s; last host started "
                          f"{a.spread:.2f} s after the first; worst host "
                          f"{a.worst_host} at {a.worst_ratio:.3f}x its own chain; gap lateness median "
                          f"{a.late_median * 1000:.0f} ms, p90 {a.late_p90 * 1000:.0f} ms, max "
                          f"{a.late_max * 1000:.0f} ms; {a.short} gaps short; {a.requests} requests, "
                          f"{a.cpu_request * 1000:.2f} CPU ms per request past start-up", flush=True)
    finally:
        server.stop()
    med = statistics.median
    print()
    print(f"{len(hosts)} hosts, {n_targets} targets, {len(expected)} ids, floor chain {bound:.2f} s, "
          f"{args.rounds} round(s), medians")
    print("| run | wall s | start-up s | floor s | wall / floor | first request s | active s | tail s "
          "| last host started s | worst host / its chain | gap lateness median / p90 ms | CPU ms per request |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rs in rows.items():
        print(f"| {name} | {med(r.wall for _, _, r, _ in rs):.2f} | {med(s for _, s, _, _ in rs):.2f} "
              f"| {med(f for f, _, _, _ in rs):.2f} | **{med(r.wall / f for f, _, r, _ in rs):.3f}** "
              f"| {med(a.first for *_, a in rs):.2f} | {med(a.active for *_, a in rs):.2f} "
              f"| {med(a.tail for *_, a in rs):.2f} | {med(a.spread for *_, a in rs):.2f} "
              f"| {med(a.worst_ratio for *_, a in rs):.3f} "
              f"| {med(a.late_median for *_, a in rs) * 1000:.0f} / {med(a.late_p90 for *_, a in rs) * 1000:.0f} "
              f"| {med(a.cpu_request for *_, a in rs) * 1000:.2f} |")
    fleets = {name: rs for name, rs in rows.items() if all(a.redis for *_, a in rs)}
    if fleets:
        print()
        print("| run | Redis CPU us per id | EVALSHA per id | commands executed per id (scripts' included) |")
        print("|---|---|---|---|")
        for name, rs in fleets.items():
            use = [a.redis for *_, a in rs if a.redis]
            print(f"| {name} | {med(u[0] for u in use) * 1e6:.0f} | {med(u[1] for u in use):.2f} "
                  f"| {med(u[2] for u in use):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
