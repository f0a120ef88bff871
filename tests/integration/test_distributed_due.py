"""``resume=due`` in a distributed job (issue 17): fleets of 2-3 ``scrapy crawl`` workers on one Redis,
the clock fixed with ``IDCRAWL_NOW`` and moved by the test between runs (no test sleeps through simulated
days). The due tails are planned once for the fleet, each due tail's lane is walked once by the fleet, a
tail not due gets no request from any worker, and each walk moves its tail's schedule exactly once."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.clock import format_time, parse_time
from idcrawl.core.recrawl import DAY, Kind, Schedule, record_of
from idcrawl.core.targets import parse_target
from idcrawl.distributed.state import JobStateStore
from idcrawl.distributed.tails import applied_walk, settle_tail
from tests.conftest import GapModel
from tests.crawl.test_resume_crawl import SlowModel
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.integration.test_distributed_resume import drive, flaky, frontier, target
from tests.integration.test_idjob import redis_settings, scrapy
from tests.support.crawl import CrawlResult
from tests.support.fleet_runs import wait_out_the_runs_grace

redis = pytest.importorskip("redis")

T0 = parse_time("2026-01-12T07:00:00Z")
MARGIN = 3
HOSTS = {"127.0.0.1": "a", "localhost": "b"}


def two_tails(workdir: Path, site, window: int | None = 1) -> Path:
    """Two targets on the site, one per host name (each its own download slot); ``window = 1``: one id of a
    lane undecided at a time in the whole fleet (the claim script's window), so a walk's requests are
    exactly its ids, however many workers claim (see the single process's test_recrawl_crawl.py);
    ``window=None``: the default window."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "job.toml"
    path.write_text(f"[defaults]\nstart = 1000\nmargin = {MARGIN}\n{'' if window is None else f'window = {window}'}\n"
                    f'[[targets]]\nname = "a"\nurl = "{site.url()}"\n'
                    f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\n')
    return path


def fleet(tmp_path: Path, run: str, redis_server, job: Path, at: float, workers: int = 3,
          resume: str | None = "due", **settings: Any) -> list[CrawlResult]:
    """One run of the fleet: ``workers`` workers started together with the clock at ``at``; all finish.

    A fleet started within the grace of the last run (``IDCRAWL_REDIS_LEASE_TIMEOUT`` after a worker of it
    joined or left: run.lua) would join that run and its plan, as a late worker of the same fleet does; so
    each run first waits, on Redis's clock, until the previous run's grace (1 s here) has passed."""
    settings = {"IDCRAWL_REDIS_LEASE_TIMEOUT": 1, **settings}
    wait_out_the_runs_grace(redis_server, "due", float(settings["IDCRAWL_REDIS_LEASE_TIMEOUT"]))
    merged = worker_settings(redis_server, job="due", IDCRAWL_NOW=format_time(at), CONCURRENT_REQUESTS_PER_DOMAIN=1,
                             **settings)
    args: dict[str, Any] = {"job": job, **({"resume": resume} if resume else {})}
    procs = [start_worker(tmp_path / f"{run}{n}", args, merged) for n in range(workers)]
    results = [finish(proc, tmp_path / f"{run}{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
    return results


def client_of(redis_server) -> Any:
    return redis.Redis.from_url(redis_server.url)


def tails(redis_server) -> dict[str, Schedule]:
    return JobStateStore(client_of(redis_server), "idcrawl:{due}:", read_only=True).tail_schedules()


def walks(redis_server) -> dict[str, int | None]:
    return {name: applied_walk(client_of(redis_server), "idcrawl:{due}:", name) for name in ("a", "b")}


def requests(site) -> dict[str, list[int]]:
    """Each target's page requests, sorted (the site's log of every worker's requests)."""
    by: dict[str, list[int]] = {"a": [], "b": []}
    for entry in site.log:
        if entry.id is not None:
            by[HOSTS[entry.host]].append(entry.id)
    return {name: sorted(ids) for name, ids in by.items()}


def items(results: list[CrawlResult]) -> list[tuple[str, int]]:
    return sorted((item["target"], item["id"]) for r in results for item in r.items)


def iddue(tmp_path: Path, redis_server, at: float) -> dict[str, Any]:
    listed = scrapy(tmp_path, "iddue", "--at", format_time(at), "--json", settings=redis_settings(redis_server, "due"))
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def test_a_fleet_sends_nothing_before_a_tail_is_due_and_margin_requests_per_tail_when_due(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = GapModel(1000, 1019, set())
    site = make_site(model)
    job = two_tails(tmp_path, site)
    first = fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None)  # a plain first crawl
    assert items(first) == sorted((name, i) for name in "ab" for i in range(1000, 1020))
    assert tails(redis_server) == {name: Schedule(Kind.TAIL, name, T0, DAY, last_found=1019) for name in "ab"}
    assert walks(redis_server) == {"a": 0, "b": 0}, "the lanes' first walks, applied once each"

    # not due (now - last_crawled <= the 1-day initial duration): no worker sends anything
    for k, at in enumerate((T0 + 3600, T0 + DAY)):
        assert iddue(tmp_path, redis_server, at)["due"] == []
        site.log.clear()
        quiet = fleet(tmp_path, f"quiet{k}", redis_server, job, at)
        assert site.log == [] and items(quiet) == [], at
        assert all(r.stats.get("downloader/request_count", 0) == 0 for r in quiet)
        assert any("tail not due until 2026-01-13T07:00:00Z, nothing to fetch" in r.stderr for r in quiet), [
            line for r in quiet for line in r.stderr.splitlines() if "resume" in line]
    assert tails(redis_server) == {name: Schedule(Kind.TAIL, name, T0, DAY, last_found=1019) for name in "ab"}

    # due, no new ids: exactly the margin's ids after last_found per tail, each by one worker of the fleet
    at = T0 + DAY + 1
    assert sorted(iddue(tmp_path, redis_server, at)["due"]) == ["a", "b"]
    site.log.clear()
    due = fleet(tmp_path, "due", redis_server, job, at)
    assert items(due) == []
    # the tail: exactly the margin's ids after last_found; and the found pages, due too (1 day), revisited
    # once each across the fleet, unchanged: no item (idcrawl.distributed.pagerecords)
    found = list(range(1000, 1020))
    assert requests(site) == {"a": [*found, 1020, 1021, 1022], "b": [*found, 1020, 1021, 1022]}
    assert {e.path for e in site.log if e.id is None} <= {"/robots.txt"}
    # penalised once (x 1.8), not once per worker
    assert tails(redis_server) == {name: Schedule(Kind.TAIL, name, at, DAY * 1.8, last_found=1019) for name in "ab"}
    assert walks(redis_server) == {"a": 1, "b": 1}
    assert sum(r.stats.get("idcrawl/redis/tails_settled", 0) for r in due) == 2


def test_a_fleet_walks_a_due_tail_to_exactly_its_margin_with_the_default_window(
    make_site, redis_server, tmp_path: Path
) -> None:
    """Per-host concurrency 1 in each worker, the default window: a worker's claim takes no id past the
    lane's earliest possible cut, so the fleet's requests stop at the cut (before, a claim made while the
    last miss was parsed took the id after it: 1023)."""
    model = GapModel(1000, 1019, set())
    site = make_site(model)
    job = two_tails(tmp_path, site, window=None)
    fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None)
    site.log.clear()
    due = fleet(tmp_path, "due", redis_server, job, T0 + DAY + 1, workers=2)
    assert items(due) == []
    tail = {name: [i for i in ids if i > 1019] for name, ids in requests(site).items()}
    assert tail == {"a": [1020, 1021, 1022], "b": [1020, 1021, 1022]}
    assert sum(r.stats.get("idcrawl/past_cut", 0) for r in due) == 0
    assert walks(redis_server) == {"a": 1, "b": 1}


def test_a_fleet_gives_exactly_the_new_ids_each_run_and_iddue_lists_what_it_fetches(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = GapModel(1000, 1009, {1004})
    site = make_site(model)
    job = two_tails(tmp_path, site)
    fleet(tmp_path, "r0", redis_server, job, T0, workers=2)  # resume=due on a fresh job: crawled from the start
    seen = {i for i in range(1000, 1010) if i != 1004}
    durations = [DAY]
    for run, (grown, gaps) in enumerate(((1012, {1011}), (1012, set()), (1020, {1014, 1015})), start=1):
        model.high = grown
        model.gaps |= gaps
        new = [i for i in range(max(seen) + 1, grown + 1) if model.exists(i)]
        at = max(s.due_at() for s in tails(redis_server).values()) + 1
        listed = iddue(tmp_path, redis_server, at)
        assert sorted(listed["due"]) == ["a", "b"]
        assert {t["tail"]["walk_from"] for t in listed["targets"]} == {max(seen) + 1}
        site.log.clear()
        results = fleet(tmp_path, f"r{run}", redis_server, job, at, workers=2 + run % 2)
        assert items(results) == sorted((name, i) for name in "ab" for i in new), "the new ids, once across the fleet"
        last = max(seen | set(new))
        walked = list(range(max(seen) + 1, last + MARGIN + 1))
        # from last_found + 1 to the margin, and the found pages due for a revisit (what iddue listed), each once
        revisits = {t["name"]: t["pages"]["due"] for t in listed["targets"]}
        assert all(set(ids) <= seen for ids in revisits.values())
        assert requests(site) == {name: sorted([*revisits[name], *walked]) for name in "ab"}
        assert Counter(e.id for e in site.log if e.id is not None).most_common(1)[0][1] <= 2  # one per host
        seen |= set(new)
        durations.append(durations[-1] * (0.8 if new else 1.8))
        assert {(s.last_crawled, s.update_duration, s.last_found) for s in tails(redis_server).values()} == {
            (at, durations[-1], last)}
        assert walks(redis_server) == {"a": run, "b": run}
        # just after the run: nothing due, and a fleet started then sends nothing
        assert iddue(tmp_path, redis_server, at + 60)["due"] == []


def test_a_sigkilled_worker_causes_neither_a_double_update_nor_a_lost_one(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = SlowModel(1000, 1009, set())
    site = make_site(model)
    job = tmp_path / "job.toml"
    job.write_text(f'[[targets]]\nname = "a"\nurl = "{site.url()}"\nstart = 1000\nmargin = {MARGIN}\n')
    fleet(tmp_path, "first", redis_server, job, T0, workers=1, resume=None)
    model.high = 1400  # 391 new ids, a few ms each: long enough to kill workers mid-walk
    at = T0 + DAY + 1
    settings = worker_settings(redis_server, job="due", IDCRAWL_NOW=format_time(at), IDCRAWL_REDIS_LEASE_TIMEOUT=1)

    def start(run: str, n: int) -> subprocess.Popen[str]:
        return start_worker(tmp_path / f"{run}{n}", {"job": job, "resume": "due"}, settings)

    def wait_for(count: int, procs: list[subprocess.Popen[str]]) -> None:
        deadline = time.monotonic() + 120
        while len(site.ids()) < count and all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.01)

    # run 1: both workers SIGKILLed mid-walk: the walk has not ended, no schedule moves
    site.log.clear()
    procs = [start("k", n) for n in range(2)]
    wait_for(60, procs)
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert len(site.ids()) >= 60 and max(site.ids()) < 1400
    assert tails(redis_server)["a"] == Schedule(Kind.TAIL, "a", T0, DAY, last_found=1009)
    # run 2 (same clock): two workers join the walk in progress; one is SIGKILLed, the other ends the walk
    procs = [start("j", n) for n in range(2)]
    wait_for(200, procs)
    procs[0].send_signal(signal.SIGKILL)
    procs[0].communicate(timeout=30)
    survivor = finish(procs[1], tmp_path / "j1")
    assert survivor.returncode == 0, survivor.stderr[-3000:]
    assert "joined the fleet's resume in progress" in survivor.stderr
    assert set(range(1010, 1400 + MARGIN + 1)) <= set(site.ids()), "the walk to its margin, nothing lost"
    # motivated exactly once (x 0.8), at the clock of the walk's end
    assert tails(redis_server)["a"] == Schedule(Kind.TAIL, "a", at, DAY * 0.8, last_found=1400, revision=1)
    assert applied_walk(client_of(redis_server), "idcrawl:{due}:", "a") == 1
    # a fleet started again at the same time: the tail is not due and nothing moves; no page is due either
    # (a page's record is written with its outcome, so the killed workers left none unwritten): it sends nothing
    listed = iddue(tmp_path, redis_server, at)
    assert listed["targets"][0]["name"] == "a"
    assert listed["targets"][0]["pages"]["due"] == []
    site.log.clear()
    again = fleet(tmp_path, "again", redis_server, job, at, workers=2)
    assert requests(site)["a"] == []
    # the killed worker's items it had not acknowledged: when the survivor finished before the dead worker's
    # lease ran out, this fleet takes them back and emits them (at least once), never one the survivor wrote
    assert not {id_ for _, id_ in items(again)} & {item["id"] for item in survivor.items}
    assert tails(redis_server)["a"] == Schedule(Kind.TAIL, "a", at, DAY * 0.8, last_found=1400, revision=1)


def test_settling_a_walk_from_many_workers_at_once_applies_the_rule_once(redis_server) -> None:
    """Workers that see a walk end at the same moment race in ``settle_tail``: exactly one applies it
    (``WATCH``/``MULTI``), in every round; whatever the interleaving, so the test cannot fail by chance."""
    client = client_of(redis_server)
    prefix = "idcrawl:{race}:"
    target = parse_target({"name": "a", "url": "http://127.0.0.1:1/n/{id}", "start": 1000, "margin": 3})
    lane = prefix + "L:a:asc"
    client.hset(prefix + "tails", "a", json.dumps(record_of(Schedule(Kind.TAIL, "a", T0, DAY, last_found=1019))))
    client.hset(prefix + "tailwalk", "a", 0)
    expected = DAY
    for walk in range(1, 31):
        client.hset(lane, mapping={"cut": 1022, "reason": "", "last": 1019, "walk": walk})
        assert settle_tail(client, prefix, target, "a:asc", T0 + walk * DAY) is None, "the walk has not ended"
        client.hset(lane, "reason", "margin")
        applied: list[Schedule | None] = []

        def worker(now: float, out: list[Schedule | None]) -> None:
            out.append(settle_tail(redis.Redis.from_url(redis_server.url), prefix, target, "a:asc", now))

        threads = [threading.Thread(target=worker, args=(T0 + walk * DAY, applied)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(s is not None for s in applied) == 1, walk
        expected = min(expected * 1.8, 365 * DAY)
        stored = JobStateStore(client, prefix, read_only=True).tail_schedules()["a"]
        assert (stored.update_duration, stored.last_crawled) == (pytest.approx(expected), T0 + walk * DAY)
        assert applied_walk(client, prefix, "a") == walk
        assert settle_tail(client, prefix, target, "a:asc", T0 + walk * DAY + 5) is None, "applied already"


@pytest.mark.parametrize("first_walks", [True, False])
def test_workers_that_join_take_the_first_workers_plan_whatever_their_clock_says(redis_server,
                                                                                  first_walks: bool) -> None:
    """The plan is the first worker's (RESUME): a worker whose clock says otherwise joins it, and walks the
    tail's lane with the fleet only when that plan walks it. Seeded orders, no Scrapy."""
    rng = random.Random(21 + first_walks)
    run1 = [frontier(redis_server, f"a{i}") for i in range(2)]
    for w in run1:
        w.add_target(target(direction="asc"))
    drive(run1, rng, flaky(set()))
    for w in run1:
        w.job.leave(w.worker)
    asc = "reg:asc"
    cut = int(run1[0].job.client.hget(run1[0].job.keys.lane(asc), "cut"))
    due = target(direction="asc", resume="due")
    first, late = frontier(redis_server, "b0"), frontier(redis_server, "b1")
    first.add_target(due)
    assert first.resume(due, walk_tail=first_walks) == "created"
    late.add_target(due)
    assert late.resume(due, walk_tail=not first_walks) == "joined"
    for w in (first, late):
        assert w.lanes[asc].settled is not first_walks, "the first worker's plan, in both workers"
    if first_walks:
        _, fetched = drive([first, late], rng, flaky(set()))
        # the tail from last_found + 1 (1019 + 1) to the margin (5 misses: 1020..1024), each id by one worker
        # (claims may take ids past the cut within the window, 8)
        assert set(range(1020, 1025)) <= set(fetched) and min(fetched) == 1020 and max(fetched) < 1020 + 5 + 8
        assert Counter(fetched).most_common(1)[0][1] == 1, "each id by one worker"
    assert int(first.job.client.hget(first.job.keys.lane(asc), "walk") or 0) == int(first_walks)
    assert int(first.job.client.hget(first.job.keys.lane(asc), "cut")) == cut
