"""Distributed crawls: real redis-server, real ``scrapy crawl`` workers, local sites with request logs."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.exits import exit_status
from idcrawl.demo.site import Reply
from idcrawl.state.keys import JobKeys
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


class HeldModel(FlakyModel):
    """:class:`FlakyModel` whose pages answer only once :attr:`opened` is set (set at first)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.opened = threading.Event()
        self.opened.set()

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        self.opened.wait(120)
        return super().reply(id_, host, nth)


def open_when_registered(redis_server: Any, job: str, workers: int, *models: HeldModel) -> threading.Thread:
    """Hold the sites' pages until ``workers`` workers of ``job`` are registered (a worker that starts
    late under load would otherwise find the job done); opened after 120 s whatever happens."""
    import redis

    for model in models:
        model.opened.clear()

    def watch() -> None:
        try:
            # a cluster (tests/support/redis_cluster.py) needs its own client: the key may live on any node
            cluster = redis_server.settings.get("IDCRAWL_REDIS_CLUSTER")
            client = redis_server.client() if cluster else redis.Redis.from_url(redis_server.url)
            key = JobKeys(f"idcrawl:{{{job}}}:").workers
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and client.zcard(key) < workers:
                time.sleep(0.05)  # a poll of a condition, not a wait for time to pass
        finally:  # whatever happens, the sites answer: a failure shows in the assertions, not as a hang
            for model in models:
                model.opened.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def job_file(path: Path, site_a, site_b) -> Path:
    path.write_text(f"""
[defaults]
direction = "both"
attempts = 3
cooldown = 1.0  # a retry whose due time passed before it reached the scheduler is retried locally, not shared
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
        **redis_server.settings,  # REDIS_URL (and IDCRAWL_REDIS_CLUSTER for a tests.support.redis_cluster)
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


def run_fleet(tmp_path: Path, args: dict[str, Any], settings: dict[str, Any], workers: int = 3) -> list[CrawlResult]:
    """``workers`` workers started together on one job (``tmp_path / "w<n>"``), each run to its end; each
    must exit with 0."""
    procs = [start_worker(tmp_path / f"w{n}", args, settings) for n in range(workers)]
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    return results


def truth() -> set[tuple[str, int]]:
    a = target_truth(FlakyModel(1900, 2100, GAPS_A).exists, 2000, "both", 5)
    b = target_truth(FlakyModel(400, 600, GAPS_B).exists, 500, "both", 4)
    return {("a", i) for i in a} | {("b", i) for i in b}


def test_three_workers_produce_the_single_process_result_fetching_each_id_once(
    make_site, redis_server, tmp_path: Path
) -> None:
    model_a, model_b = HeldModel(1900, 2100, GAPS_A), HeldModel(400, 600, GAPS_B)
    site_a, site_b = make_site(model_a), make_site(model_b)
    job = job_file(tmp_path / "job.toml", site_a, site_b)
    (tmp_path / "single").mkdir()
    single = run_crawl(tmp_path / "single", {"job": job})
    assert single.returncode == 0, single.stderr[-3000:]
    single_items = {(i["target"], i["id"]) for i in single.items}
    assert single_items == truth()
    for site in (site_a, site_b):
        site.log.clear()
        site._counts.clear()

    open_when_registered(redis_server, "acc", 3, model_a, model_b)
    results = run_fleet(tmp_path, {"job": job}, worker_settings(redis_server))
    for result in results:
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
    # every retry waited in the job's shared delayed set (any worker may have taken it)
    busy = sum(1 for site in (site_a, site_b) for e in site.log if e.status == 503)
    assert busy == len(FLAKY)
    assert sum(r.stats.get("idcrawl/redis/retries_shared", 0) for r in results) == busy
    # the workers' counts add up to the job's
    assert sum(r.stats.get("idcrawl/emitted", 0) for r in results) == len(single_items)
    assert sum(r.stats.get("idcrawl/found", 0) for r in results) == len(single_items)


class SlowModel(GapModel):
    """A few ms per page, so a worker can be killed mid-crawl."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, 0.004)


KILL_GAPS = {1010, 1011, 1040, 1041, 1042, 1100, 1101, 1102, 1230, 1231, 1390, 1391, 1392, 1393, 1394,
             950, 951, 952, 953}


@pytest.mark.parametrize("kill_after", [40, 160])
def test_a_worker_killed_with_sigkill_loses_nothing_after_the_lease(
    make_site, redis_server, tmp_path: Path, kill_after: int
) -> None:
    model = SlowModel(900, 1400, KILL_GAPS)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "reg"}
    # a lease of 3 s: a live worker stalled that long by a loaded machine would be reclaimed too
    settings = worker_settings(redis_server, job="kill", IDCRAWL_REDIS_LEASE_TIMEOUT=3.0,
                               IDCRAWL_STATE_COMMIT_ITEMS=10, IDCRAWL_STATE_COMMIT_INTERVAL=0.3)
    procs = [start_worker(tmp_path / f"w{n}", args, settings) for n in range(3)]
    import redis

    client = redis.Redis.from_url(redis_server.url)
    victim = f"{socket.gethostname()}:{procs[0].pid}:".encode()

    def victim_holds_ids() -> bool:
        owners = [*client.hvals("idcrawl:{kill}:L:reg:asc:own"), *client.hvals("idcrawl:{kill}:L:reg:desc:own")]
        return any(owner.startswith(victim) for owner in owners)

    deadline = time.monotonic() + 60
    while (len(site.ids()) < kill_after or not victim_holds_ids()) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert victim_holds_ids(), "the worker to kill never claimed an id"
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(timeout=30)
    killed_items = read_items(tmp_path / "w0" / "items.jsonl")
    survivors = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs) if n]
    for result in survivors:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    got = {i["id"] for i in killed_items} | {i["id"] for r in survivors for i in r.items}
    assert sorted(got) == target_truth(model.exists, 1000, "both", 5), f"killed after {kill_after} requests"
    job = client.hgetall("idcrawl:{kill}:job")
    # the killed worker was taken back; a live worker that a loaded machine stalled past the 3 s lease may
    # be taken back too (it then rejoins: docs/distributed.md), so the count is at least one, not exactly
    assert int(job.get(b"reclaimed_workers", 0)) >= 1


def test_a_replacement_for_a_sigkilled_worker_takes_its_ids_at_once(
    make_site, redis_server, tmp_path: Path
) -> None:
    """One of 3 workers is SIGKILLed while it holds ids; a replacement starts at once. The lease is
    long (60 s): only the replacement's take-over at join frees the dead worker's ids. Nothing is
    lost; an item is in two feeds only if the killed worker wrote it (at least once, docs/distributed.md)."""
    model = SlowModel(900, 1400, KILL_GAPS)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "reg"}
    settings = worker_settings(redis_server, job="replace", IDCRAWL_REDIS_LEASE_TIMEOUT=60,
                               IDCRAWL_STATE_COMMIT_ITEMS=10, IDCRAWL_STATE_COMMIT_INTERVAL=0.3)
    procs = [start_worker(tmp_path / f"w{n}", args, settings) for n in range(3)]
    import redis

    client = redis.Redis.from_url(redis_server.url)
    victim = f"{socket.gethostname()}:{procs[0].pid}:".encode()

    def victim_holds_ids() -> bool:
        owners = [*client.hvals("idcrawl:{replace}:L:reg:asc:own"),
                  *client.hvals("idcrawl:{replace}:L:reg:desc:own")]
        return any(owner.startswith(victim) for owner in owners)

    seen: set[bytes] = set()

    def all_joined() -> bool:
        # a survivor opening after the kill would take the dead worker over itself: every worker has
        # claimed an id, so it has opened (its take-over comes before its first claim); being in
        # P workers is not enough: a worker is registered there when it joins the run, before it opens
        seen.update(owner.split(b":")[1] for owner in [*client.hvals("idcrawl:{replace}:L:reg:asc:own"),
                                                        *client.hvals("idcrawl:{replace}:L:reg:desc:own")])
        return all(str(proc.pid).encode() in seen for proc in procs)

    deadline = time.monotonic() + 60
    while (len(site.ids()) < 80 or not victim_holds_ids() or not all_joined()) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert victim_holds_ids(), "the worker to kill never claimed an id"
    assert all_joined(), "a worker never joined"
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(timeout=30)
    replacement = start_worker(tmp_path / "w3", args, settings)
    killed_items = read_items(tmp_path / "w0" / "items.jsonl")
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in [(1, procs[1]), (2, procs[2]), (3, replacement)]]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    assert results[2].stats.get("idcrawl/redis/taken_over_workers") == 1
    assert results[2].stats.get("idcrawl/redis/taken_over_ids", 0) > 0
    job = client.hgetall("idcrawl:{replace}:job")
    assert int(job.get(b"reclaimed_workers", 0)) == 1
    assert client.zcard("idcrawl:{replace}:workers") == 0
    living = [i["id"] for r in results for i in r.items]
    assert len(living) == len(set(living)), "a living worker emitted an item twice"
    killed = [i["id"] for i in killed_items]
    assert len(killed) == len(set(killed))
    assert sorted(set(living) | set(killed)) == target_truth(model.exists, 1000, "both", 5)


def test_a_target_pushed_through_the_feed_key_is_crawled_by_idle_workers(
    make_site, redis_server, tmp_path: Path
) -> None:
    import redis

    model = GapModel(0, 400, {150, 151, 152, 153, 40, 41, 42})
    site = make_site(model)
    settings = worker_settings(redis_server, job="feed", IDCRAWL_REDIS_IDLE_TIMEOUT=5)
    procs = [start_worker(tmp_path / f"w{n}", {}, settings) for n in range(2)]
    client = redis.Redis.from_url(redis_server.url)
    deadline = time.monotonic() + 60
    while client.zcard("idcrawl:{feed}:workers") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.zcard("idcrawl:{feed}:workers") == 2, "the workers did not start waiting"
    assert site.ids() == []
    client.rpush("idcrawl:{feed}:feed", json.dumps(
        {"name": "pushed", "url": site.url(), "start": 100, "direction": "both", "margin": 3, "window": 8}))
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "idcrawl_idle_timeout"
    items = [i["id"] for r in results for i in r.items]
    assert sorted(items) == target_truth(model.exists, 100, "both", 3)
    assert len(items) == len(set(items))
    assert sum(r.stats.get("idcrawl/redis/feed_taken", 0) for r in results) == 1
    assert all(r.stats.get("idcrawl/dispensed", 0) > 0 for r in results), "a worker did not join the pushed target"


def test_a_pushed_target_with_bad_keys_is_refused_with_a_log_line(make_site, redis_server, tmp_path: Path) -> None:
    import redis

    settings = worker_settings(redis_server, job="bad", IDCRAWL_REDIS_IDLE_TIMEOUT=1.5)
    client = redis.Redis.from_url(redis_server.url)
    client.rpush("idcrawl:{bad}:feed", json.dumps({"name": "x", "url": "http://127.0.0.1:1/n", "start": 1}))
    result = finish(start_worker(tmp_path, {}, settings), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats.get("idcrawl/redis/feed_refused") == 1
    assert "pushed target refused" in result.stderr and "must contain exactly one {id} field" in result.stderr


def test_politeness_holds_for_the_fleet_not_per_worker(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 1000, set()))
    args = {"url": site.url(), "start": 10, "max": 33, "margin": 0}
    settings = worker_settings(redis_server, job="polite", DOWNLOAD_DELAY=0.3, RANDOMIZE_DOWNLOAD_DELAY=False)
    results = run_fleet(tmp_path, args, settings)
    times = [e.at for e in site.log if e.id is not None]
    assert sorted(e.id for e in site.log if e.id is not None) == list(range(10, 34))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # the reservation is made just before the request leaves: local latency (tens of ms on a busy
    # machine) may shorten one gap, never the fleet's pace; per worker, 3 workers would give ~0.1 s
    assert min(gaps) >= 0.2, sorted(gaps)[:5]
    assert times[-1] - times[0] >= (len(times) - 1) * 0.3 * 0.97
    assert sum(1 for r in results if r.stats.get("idcrawl/dispensed", 0)) >= 2, "one worker did everything"


@pytest.mark.parametrize("delay_from", ["DOWNLOAD_DELAY", "DOWNLOAD_SLOTS", "IDCRAWL_POLITENESS"])
def test_robots_txt_fetches_keep_the_fleets_gaps_too(
    make_site, redis_server, tmp_path: Path, delay_from: str
) -> None:
    """Every worker fetches the host's robots.txt first: those fetches take their place in the fleet's
    gaps like any request, whether the gap is DOWNLOAD_DELAY or the host's DOWNLOAD_SLOTS entry (a
    slot Scrapy has not made yet when the first request of the host, robots.txt, leaves)."""
    site = make_site(GapModel(0, 1000, set()), robots_txt="User-agent: *\nDisallow: /private\n")
    args = {"url": site.url(), "start": 10, "max": 21, "margin": 0}
    gap = {
        "DOWNLOAD_DELAY": {"DOWNLOAD_DELAY": 0.3},
        "DOWNLOAD_SLOTS": {"DOWNLOAD_DELAY": 0, "DOWNLOAD_SLOTS": {"127.0.0.1": {"delay": 0.3}}},
        "IDCRAWL_POLITENESS": {"DOWNLOAD_DELAY": 0, "IDCRAWL_POLITENESS_FACTOR": 2,
                               "IDCRAWL_POLITENESS_MIN_DELAY": 0.3, "IDCRAWL_POLITENESS_MAX_DELAY": 0.3},
    }[delay_from]
    settings = worker_settings(redis_server, job=f"robots-{delay_from}", ROBOTSTXT_OBEY=True,
                               RANDOMIZE_DOWNLOAD_DELAY=False, DOWNLOAD_DELAY_JITTER=0, **gap)
    results = run_fleet(tmp_path, args, settings)
    assert sorted(e.id for e in site.log if e.id is not None) == list(range(10, 22))
    # each worker that sent anything fetched robots.txt once: a worker that starts once the job is done
    # (a slow start) sends nothing, robots.txt included (test_a_worker_joining_a_finished_job_...)
    senders = sum(1 for result in results if result.stats.get("downloader/request_count", 0))
    assert [e.path for e in site.log].count("/robots.txt") == senders >= 1
    times = [e.at for e in site.log]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # as in the test above: local latency may shorten one gap a little, never halve it
    assert min(gaps) >= 0.2, [(e.path, round(e.at - times[0], 3)) for e in site.log]


#: The fleet's clock counts whole ms (the script's now_ms): two requests' moments of leaving, a gap apart
#: to the ms, are at least gap - 1 ms apart; 2 ms also covers the rate at which NTP may slew Redis's clock
#: (TIME) against the monotonic clock of the site's log and the workers' stamps (<= 500 ppm, 0.15 ms per
#: gap).
CLOCK_RESOLUTION = 0.002


def test_a_worker_whose_first_request_leaves_late_keeps_the_fleets_gaps(
    make_site, redis_server, tmp_path: Path
) -> None:
    """Each worker's first request (robots.txt) leaves long after its reservation: held until all three
    workers joined, then 0.2 s more (tests/support/late_send.py). The fleet's gaps run from the moment a
    request leaves for the download handler, as one process's slot delay does; before, they ran from
    reservation to reservation, and the three robots.txt fetches left within milliseconds of each other.

    Checked at the site's log by causality, not timing: each request arrives at least a gap after the
    previous arrival left its worker. A request arrives after it left, and it left (the script let it go)
    at least a gap after the previous one left, which is after that one passed the stamping middleware.
    (The raw gaps between arrivals also carry each request's way from worker to site: a turn of the
    worker's reactor and of the site's thread, up to 85 ms measured at load 9, in one process as in a
    fleet: no bound a test may rely on.)"""
    site = make_site(GapModel(0, 1000, set()), robots_txt="User-agent: *\nDisallow: /private\n")
    args = {"url": site.url(), "start": 10, "max": 40, "margin": 0}
    left_log = tmp_path / "left.log"
    settings = worker_settings(
        redis_server, job="late-send", ROBOTSTXT_OBEY=True, RANDOMIZE_DOWNLOAD_DELAY=False, DOWNLOAD_DELAY_JITTER=0,
        DOWNLOAD_DELAY=0.3, DOWNLOADER_MIDDLEWARES={"tests.support.late_send.LateFirstSend": 960},
        LATE_SEND_WORKERS=3, LATE_SEND_DELAY=0.2, LATE_SEND_LOG=str(left_log))
    results = run_fleet(tmp_path, args, settings)
    assert sorted(e.id for e in site.log if e.id is not None) == list(range(10, 41))
    # one robots.txt per worker that sent anything; at least two did: no id leaves before all three
    # joined (the middleware holds each first request till then), and a worker takes a few ids as it
    # joins (about its concurrency of 4: 31 ids leave a share for each)
    senders = sum(1 for result in results if result.stats.get("downloader/request_count", 0))
    assert [e.path for e in site.log].count("/robots.txt") == senders >= 2
    stamped: dict[str, list[float]] = {}
    for line in left_log.read_text().splitlines():
        at, path = line.split(" ", 1)
        stamped.setdefault(path, []).append(float(at))
    assert sorted(stamped) == sorted({e.path for e in site.log})
    assert all(len(stamps) == 1 for path, stamps in stamped.items() if path != "/robots.txt")
    origin = site.log[0].at
    log = [(e.path, round(e.at - origin, 3), round(min(stamped[e.path]) - origin, 3)) for e in site.log]
    for a, b in itertools.pairwise(site.log):
        # a robots.txt arrival: the earliest stamp of the three is before the one that arrived left
        assert b.at >= min(stamped[a.path]) + 0.3 - CLOCK_RESOLUTION, (a.path, b.path, log)


def test_a_worker_joining_a_finished_job_sends_nothing_not_even_robots_txt(
    make_site, redis_server, tmp_path: Path
) -> None:
    """The robots.txt test's count depended on start-up timing: with three workers started together, a
    worker whose start took longer than the job (3.6 s of gaps) joined it finished, and the site saw 2
    robots.txt fetches, not 3. Reproduced deterministically by starting the third worker once the first
    two are done: it sends no request (the job is finished), so the count is the workers that sent."""
    site = make_site(GapModel(0, 1000, set()), robots_txt="User-agent: *\nDisallow: /private\n")
    args = {"url": site.url(), "start": 10, "max": 21, "margin": 0}
    settings = worker_settings(redis_server, job="robots-late", ROBOTSTXT_OBEY=True, RANDOMIZE_DOWNLOAD_DELAY=False,
                               DOWNLOAD_DELAY_JITTER=0, DOWNLOAD_DELAY=0.3)
    early = [finish(proc, tmp_path / f"w{n}")
             for n, proc in enumerate([start_worker(tmp_path / f"w{n}", args, settings) for n in range(2)])]
    late = finish(start_worker(tmp_path / "w2", args, settings), tmp_path / "w2")
    for result in (*early, late):
        assert result.returncode == 0, result.stderr[-3000:]
    assert late.stats.get("downloader/request_count", 0) == 0
    assert [e.path for e in site.log].count("/robots.txt") == 2
    assert sorted(e.id for e in site.log if e.id is not None) == list(range(10, 22))


def test_redis_unreachable_at_start_is_one_error_line(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 100, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0},
                       {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert "Redis at REDIS_URL='redis://127.0.0.1:1/0' is unreachable" in errors[0]
    assert site.log == []


def test_two_workers_with_one_target_name_and_other_parameters_are_refused(
    make_site, redis_server, tmp_path: Path
) -> None:
    site = make_site(GapModel(0, 100, set()))
    settings = worker_settings(redis_server, job="clash")
    first = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0, "name": "t"}, settings)
    assert first.returncode == 0, first.stderr[-3000:]
    site.log.clear()
    second = run_crawl(tmp_path, {"url": site.url(), "start": 2, "max": 5, "margin": 0, "name": "t"}, settings)
    assert second.returncode != 0
    assert "target 't': start=2 differs from the job's (start=1)" in second.error_lines()[0]
    assert site.log == []


@pytest.mark.parametrize("persistent", [True, False])
def test_redis_restarting_mid_crawl(make_site, tmp_path: Path, persistent: bool) -> None:
    """With persistence the worker waits for Redis and completes the job; without, the job's state is
    gone and the worker stops with a clear reason instead of finishing a job it did not crawl."""
    from tests.support.redis_server import RedisServer, require_redis_server

    require_redis_server()
    server = RedisServer(persistent=persistent).start()
    try:
        model = SlowModel(900, 1400, KILL_GAPS)
        site = make_site(model)
        args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "reg"}
        proc = start_worker(tmp_path, args, worker_settings(server, job="restart", IDCRAWL_REDIS_LEASE_TIMEOUT=20))
        deadline = time.monotonic() + 60
        while len(site.ids()) < 60 and time.monotonic() < deadline:
            time.sleep(0.005)
        server.restart(downtime=1.0)
        result = finish(proc, tmp_path)
    finally:
        server.stop()
    expected = 0 if persistent else exit_status("idcrawl_redis_state_lost")
    assert result.returncode == expected, result.stderr[-3000:]
    assert "does not answer" in result.stderr
    if persistent:
        assert result.stats["finish_reason"] == "finished"
        assert "Redis answers again" in result.stderr
        assert sorted(i["id"] for i in result.items) == target_truth(model.exists, 1000, "both", 5)
    else:
        assert result.stats["finish_reason"] == "idcrawl_redis_state_lost"
        assert "are gone from Redis" in result.stderr


@pytest.mark.parametrize("exit_code", [None, 3])
def test_a_worker_whose_redis_is_gone_for_good_exits_with_the_failure_status_asked_for(
    make_site, tmp_path: Path, exit_code: int | None
) -> None:
    """Finish reason idcrawl_redis_unavailable after the lease; the exit status is the table's (69), or the
    deprecated IDCRAWL_FAIL_EXIT_CODE when set."""
    from tests.support.redis_server import RedisServer, require_redis_server

    require_redis_server()
    server = RedisServer().start()
    try:
        site = make_site(SlowModel(900, 1400, KILL_GAPS))
        args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "gone"}
        settings = worker_settings(server, job="gone", IDCRAWL_REDIS_LEASE_TIMEOUT=1.0)
        if exit_code:
            settings["IDCRAWL_FAIL_EXIT_CODE"] = exit_code
        proc = start_worker(tmp_path, args, settings)
        deadline = time.monotonic() + 60
        while len(site.ids()) < 20 and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        server.stop()
    result = finish(proc, tmp_path)
    assert result.stats["finish_reason"] == "idcrawl_redis_unavailable", result.stderr[-3000:]
    assert result.returncode == (exit_code or exit_status("idcrawl_redis_unavailable")), result.stderr[-3000:]


def test_an_id_whose_callback_raises_does_not_hold_the_job_forever(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 100, set()))
    spider = Path(__file__).parents[1] / "support" / "failing_spider.py"
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 8, "margin": 0},
                       worker_settings(redis_server, job="raises"), runspider=spider, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished"
    assert sorted(i["id"] for i in result.items) == [1, 2, 4, 5, 6, 7, 8]
    assert result.stats["idcrawl/lost"] == 1  # id 3: no outcome from its callback, counted as failed


OVERLAP_GAPS = {50, 150, 151, 250}  # 296 of ids 1..300 exist; no run of misses reaches margin 5


def overlap_job(path: Path, url: str) -> Path:
    path.write_text(f"""
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
""")
    return path


@pytest.mark.parametrize("workers", [1, 3])
def test_overlapping_targets_give_the_single_process_requests_and_items_exactly(
    make_site, redis_server, tmp_path: Path, workers: int
) -> None:
    site = make_site(GapModel(1, 300, OVERLAP_GAPS))
    job = overlap_job(tmp_path / "job.toml", site.url())
    (tmp_path / "single").mkdir()
    single = run_crawl(tmp_path / "single", {"job": job})
    assert single.returncode == 0, single.stderr[-3000:]
    single_requests = sorted(site.ids())
    assert single_requests == list(range(1, 301))
    single_items = sorted((i["target"], i["id"]) for i in single.items)
    assert len(single_items) == 296
    assert single.stats["idcrawl/deduplicated"] == 101
    site.log.clear()
    site._counts.clear()

    settings = worker_settings(redis_server, job=f"overlap{workers}")
    results = run_fleet(tmp_path, {"job": job}, settings, workers=workers)
    for result in results:
        assert result.stats["finish_reason"] == "finished"
    assert sorted(site.ids()) == single_requests, "not the single process's requests"
    items = sorted((i["target"], i["id"]) for r in results for i in r.items)
    assert items == single_items, "not the single process's items"
    for name in ("deduplicated", "found", "emitted", "missing"):
        assert sum(r.stats.get(f"idcrawl/{name}", 0) for r in results) == single.stats[f"idcrawl/{name}"], name


def test_the_held_payload_cap_in_a_fleet_gives_the_single_process_items_exactly(
    make_site, redis_server, tmp_path: Path
) -> None:
    """IDCRAWL_MAX_HELD_PAYLOADS = 1 in a fleet of 3 workers: a walks up from 1, b down from 150, so b
    emits 76..150 (nearer to them) and a emits the rest. The site holds b's first id, 150, until the
    fleet holds a payload of a shared id (a passed 76 while b, its fixed window behind 150, had not
    decided it) and a claim was kept from new ids at the cap (conditions read from Redis, not times):
    a waits while b walks down, and the items are the single process's (with the cap too), each once."""
    import redis as redis_lib

    client = redis_lib.Redis.from_url(redis_server.url)
    gate = {"fleet": False, "held": 0, "waits": 0}

    def hold_b_first_id(entry: Any) -> None:
        if entry.id != 150 or not gate["fleet"]:
            return
        for _ in range(3000):  # opens at the condition; the bound only keeps a broken crawl from hanging
            held = sum(client.scard(key) for key in client.keys("*:S:*:held"))
            waits = sum(int(client.hget(key, "held_cap_waits") or 0) for key in client.keys("*:job"))
            if held and waits:
                gate["held"], gate["waits"] = held, waits
                return
            time.sleep(0.02)

    site = make_site(GapModel(1, 300, set()), on_request=hold_b_first_id)
    job = tmp_path / "job.toml"
    job.write_text(f"""
[defaults]
margin = 5
window = 12

[[targets]]
name = "a"
url = "{site.url()}"
start = 1
direction = "asc"
max = 200

[[targets]]
name = "b"
url = "{site.url()}"
start = 150
direction = "desc"
""")
    capped = {"IDCRAWL_MAX_HELD_PAYLOADS": 1, "IDCRAWL_SPECULATION": "window"}
    (tmp_path / "single").mkdir()
    single = run_crawl(tmp_path / "single", {"job": job}, capped)
    assert single.returncode == 0, single.stderr[-3000:]
    single_items = sorted((i["target"], i["id"]) for i in single.items)
    assert single_items == sorted([("a", i) for i in [*range(1, 76), *range(151, 201)]]
                                  + [("b", i) for i in range(76, 151)])
    site.log.clear()
    site._counts.clear()

    gate["fleet"] = True
    settings = worker_settings(redis_server, job="heldcap", **capped)
    results = run_fleet(tmp_path, {"job": job}, settings)
    for result in results:
        assert result.stats["finish_reason"] == "finished"
    assert gate["held"] >= 1 and gate["waits"] >= 1, "the gate opened without the fleet at the cap"
    assert sum(r.stats.get("idcrawl/redis/held_cap_waits", 0) for r in results) >= 1
    items = sorted((i["target"], i["id"]) for r in results for i in r.items)
    assert items == single_items, "not the single process's items"
    assert max(Counter(site.ids()).values()) == 1, "a URL was fetched twice"
    assert not any(client.scard(key) for key in client.keys("*:S:*:held")), "payloads left held"


def test_a_shared_ids_items_name_the_target_that_emits_them_in_a_fleet_too(
    make_site, redis_server, tmp_path: Path
) -> None:
    # as in one process (tests/crawl/test_overlap_crawl.py): a, twenty times b's rate, fetches most
    # of the ids b is nearest to; their items are b's
    site = make_site(GapModel(100, 199, set()))
    job = tmp_path / "job.toml"
    job.write_text(f"""
[[targets]]
name = "a"
url = "{site.url()}"
start = 100
max = 160
margin = 4
rate = 20

[[targets]]
name = "b"
url = "{site.url()}"
start = 130
max = 170
margin = 4
""")
    settings = worker_settings(redis_server, job="labels", CONCURRENT_REQUESTS=1, CONCURRENT_REQUESTS_PER_DOMAIN=1)
    result = finish(start_worker(tmp_path / "w0", {"job": job}, settings), tmp_path / "w0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert max(Counter(site.ids()).values()) == 1, "a URL was fetched twice"
    assert {item["id"]: item["target"] for item in result.items} == {i: "a" if i < 130 else "b" for i in range(100, 171)}
    assert result.stats["idcrawl/lanes/b:asc/emitted"] == 41


def test_many_small_overlapping_targets_fetch_no_id_twice(make_site, redis_server, tmp_path: Path) -> None:
    import random

    rng = random.Random(14)
    gaps: set[int] = set()
    at = rng.randint(20, 40)
    while at < 1200:  # a run of 6 missing ids every 20-40 ids: every lane stops within a few dozen ids
        gaps.update(range(at, at + 6))
        at += 6 + rng.randint(20, 40)
    site = make_site(GapModel(1, 1200, gaps))
    blocks = ['[defaults]\ndirection = "both"\nmargin = 5\nwindow = 12\n']
    blocks += [f'[[targets]]\nname = "t{n}"\nurl = "{site.url()}"\nstart = {rng.randint(1, 1200)}\n' for n in range(40)]
    job = tmp_path / "job.toml"
    job.write_text("\n".join(blocks))
    (tmp_path / "single").mkdir()
    single = run_crawl(tmp_path / "single", {"job": job})
    assert single.returncode == 0, single.stderr[-3000:]
    single_ids = sorted(i["id"] for i in single.items)
    site.log.clear()
    site._counts.clear()

    settings = worker_settings(redis_server, job="small", IDCRAWL_REDIS_CLAIM_BLOCK=8)
    results = run_fleet(tmp_path, {"job": job}, settings)
    requested = Counter(site.ids())
    assert max(requested.values()) == 1, "an id was fetched twice"
    assert sorted(i["id"] for r in results for i in r.items) == single_ids, "not the single process's items, once"
