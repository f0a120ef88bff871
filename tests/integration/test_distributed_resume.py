"""``resume=holes|all|bound`` of a distributed job on a real redis-server, without Scrapy: a
first run leaves failed ids, workers started with a resume refetch each hole once across
the fleet, with the requests and items of a single process resuming the same state."""

from __future__ import annotations

import json
import pickle
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyroaring import BitMap64

from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord, merge_outcomes
from idcrawl.core.resume import resume_specs
from idcrawl.core.targets import Target, parse_target
from idcrawl.distributed.frontier import RedisFrontier, TargetConflict
from idcrawl.distributed.job import RedisJob
from idcrawl.distributed.state import JobStateStore
from tests.conftest import FlakyOnce
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.integration.test_idjob import redis_settings, scrapy
from tests.support.crawl import run_crawl
from tests.support.fleet_runs import wait_out_the_runs_grace

redis = pytest.importorskip("redis")

GAPS = {1003, 1010, 1011, 1012, 1020, 1021, 1022, 1023, 1024, 1025, 995, 990, 989, 988, 987, 986}
Rule = Callable[[int], Outcome]


def exists(id_: int) -> bool:
    return 900 <= id_ <= 1100 and id_ not in GAPS


def flaky(failing: set[int]) -> Rule:
    """Found where the id exists, missing elsewhere, failed for the ids of ``failing``."""
    def rule(id_: int) -> Outcome:
        if id_ in failing:
            return Outcome.FAILED
        return Outcome.FOUND if exists(id_) else Outcome.MISSING
    return rule


def target(**extra: object) -> Target:
    raw = {"name": "reg", "url": "http://127.0.0.1:1/n/{id}", "start": 1000, "direction": "both", "margin": 5,
           "window": 8, **extra}
    return parse_target(raw)


def frontier(server, worker: str, block: int = 3, lease_ms: int = 60_000) -> RedisFrontier:
    client = redis.Redis.from_url(server.url)
    return RedisFrontier(
        RedisJob(client, "t:{job}:"), worker, block=block, lease_ms=lease_ms,
        encode=lambda payload: pickle.dumps(payload[2]),
        decode=lambda lane, id_, blob: (lane, id_, pickle.loads(blob)),
    )


def join(workers: list[RedisFrontier], t: Target) -> list[str | None]:
    verdicts = []
    for w in workers:
        w.add_target(t)
        verdicts.append(w.resume(t) if t.resume != "none" else None)
    return verdicts


def drive(
    workers: list[RedisFrontier], rng: random.Random, rule: Rule, die_after: int | None = None
) -> tuple[list[int], list[int]]:
    """Dispense and decide ids in a random order across workers until the job is done:
    (emitted ids, fetched ids). An item is the id itself, acknowledged as soon as it is released.
    ``die_after``: worker 0 stops answering after that many dispatches, holding what it claimed."""
    emitted: list[int] = []
    fetched: list[int] = []
    held: dict[int, list[tuple[str, int]]] = {i: [] for i in range(len(workers))}
    dead: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        alive = [i for i in range(len(workers)) if i not in dead]
        for i in alive:
            workers[i].poll()
        if all(workers[i].status.finished for i in alive) and not any(held[i] for i in alive):
            return emitted, fetched
        i = rng.choice(alive)
        w = workers[i]
        if held[i] and rng.random() < 0.6:
            lane, id_ = held[i].pop(rng.randrange(len(held[i])))
            outcome = rule(id_)
            rec = w.record(lane, id_, outcome, (lane, id_, [id_]) if outcome is Outcome.FOUND else None)
            emitted += [item for _, _, items in rec.released for item in items]
            w.job.client.delete(w.job.keys.emit(w.worker))  # written: acknowledged
            continue
        step = w.next()
        dispatch = step.dispatch
        emitted += [item for _, _, items in step.released for item in items]
        if dispatch is not None:
            held[i].append((dispatch.lane, dispatch.id))
            fetched.append(dispatch.id)
            if i == 0 and die_after is not None and len(fetched) >= die_after:
                dead.add(0)  # killed holding its claims: they come back after the lease
        elif not held[i]:
            time.sleep(0.005)
    raise AssertionError("the job did not finish")


def single_process(t: Target, rules: list[Rule], modes: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """The single process: run 1 with rules[0], then a resumed run per mode with the next rule,
    each planned from the state the earlier runs left (lane records and merged outcomes)."""
    runs = []
    outcomes: dict[Outcome, BitMap64] = {}
    records: dict[str, LaneRecord] = {}
    for n, rule in enumerate(rules):
        f: Frontier[tuple[str, int, list[int]]] = Frontier([])
        if n == 0:
            f.add_target(t)
        else:
            mode, holes = modes[n - 1]
            specs = resume_specs(t, records, outcomes, mode, holes)
            f.add_target(t, specs, known_found=outcomes.get(Outcome.FOUND, BitMap64()))
        emitted: list[int] = []
        fetched: list[int] = []
        new: dict[Outcome, BitMap64] = {}
        while True:
            step = f.next()
            emitted += [item for _, _, items in step.released for item in items]
            if (d := step.dispatch) is None:
                break
            fetched.append(d.id)
            outcome = rule(d.id)
            rec = f.record(d.lane, d.id, outcome, (d.lane, d.id, [d.id]) if outcome is Outcome.FOUND else None)
            new.setdefault(outcome, BitMap64()).add(d.id)
            emitted += [item for _, _, items in rec.released for item in items]
        outcomes = merge_outcomes(outcomes, new)
        for key, lane in f.lanes.items():
            if f.lane_direction[key] == "holes":
                continue
            cursor = lane.first_undecided if lane.cut_at is None else lane.cut_at + lane.step
            old = records.get(key)
            records[key] = LaneRecord(key, old.start if old else lane.start, lane.step, lane.stop, cursor,
                                      lane.last_found, lane.cut_at, lane.reason if lane.settled else None)
        runs.append((emitted, fetched))
    return runs


FAILING = {1001, 1005, 997, 993, 1015}


@pytest.mark.parametrize(("seed", "mode", "holes"), [(1, "holes", "failed"), (2, "holes", "failed"),
                                                     (3, "all", "failed"), (4, "holes", "all"), (5, "all", "all"),
                                                     (6, "bound", "failed")])
def test_three_workers_resume_with_the_single_process_requests_and_items(
    redis_server, seed: int, mode: str, holes: str
) -> None:
    rng = random.Random(seed)
    first, healed = flaky(FAILING), flaky(set())
    (emitted1, _), (emitted2, fetched2) = single_process(target(), [first, healed], [(mode, holes)])
    run1 = [frontier(redis_server, f"a{i}") for i in range(3)]
    join(run1, target())
    got1, _ = drive(run1, rng, first)
    assert sorted(got1) == sorted(emitted1)
    for w in run1:
        w.job.leave(w.worker)

    resumed = target(resume=mode, holes=holes)
    run2 = [frontier(redis_server, f"b{i}", block=rng.choice([1, 3, 8])) for i in range(3)]
    verdicts = join(run2, resumed)
    assert verdicts == ["created", "joined", "joined"]
    got2, fetched = drive(run2, rng, healed)
    # up to the cuts (986 and 1024, as in run 1), the sequential single process's requests: each
    # hole by exactly one worker; past them, claims may overshoot by the window (8) at most
    inside = Counter(i for i in fetched if 986 <= i <= 1024)
    assert inside == Counter(fetched2), "the single process's requests, each hole by one worker"
    assert len([i for i in fetched if i > 1024]) <= 8
    assert len([i for i in fetched if i < 986]) <= 8
    assert sorted(got2) == sorted(emitted2), "the single process's items, once"
    if mode != "bound":
        assert set(FAILING) <= set(fetched)
    state = JobStateStore(run2[0].job.client, "t:{job}:", read_only=True).load("reg")
    assert state is not None
    failed = state.outcomes.get(Outcome.FAILED, BitMap64())
    if mode == "bound":
        assert set(failed) == FAILING, "bound refetches no hole"
    else:
        assert not failed, "the state shows each refetched hole by its new outcome"
        assert set(state.outcomes[Outcome.FOUND]) >= FAILING - GAPS


def test_a_second_resume_gets_its_own_lane_and_refetches_what_failed_again(redis_server) -> None:
    rng = random.Random(7)
    rules = [flaky(FAILING), flaky({1005, 997}), flaky(set())]
    modes = [("holes", "failed"), ("holes", "failed")]
    expected = single_process(target(), rules, modes)
    ws = [frontier(redis_server, f"a{i}") for i in range(2)]
    join(ws, target())
    drive(ws, rng, rules[0])
    for run, rule in enumerate(rules[1:], start=1):
        for w in ws:
            w.job.leave(w.worker)
        if run == 2:
            # within the grace (the lease) after the first resume's workers left, a worker with
            # the same arguments still joins it: nothing is planned or fetched again
            late = frontier(redis_server, "late", lease_ms=60_000)
            assert join([late], target(resume="holes")) == ["joined"]
            assert not late.list_lanes()
            late.job.leave("late")
            time.sleep(0.3)  # then the grace (0.2 s here) passes
        ws = [frontier(redis_server, f"r{run}w{i}", lease_ms=200) for i in range(3)]
        assert join(ws, target(resume="holes")) == ["created", "joined", "joined"]
        lanes = sorted(key for key in ws[0].lanes if ws[0].lane_direction[key] == "holes")
        assert lanes == (["reg:holes"] if run == 1 else ["reg:holes2"])
        emitted, fetched = drive(ws, rng, rule)
        assert Counter(fetched) == Counter(expected[run][1])
        assert sorted(emitted) == sorted(expected[run][0])
    assert sorted(expected[2][1]) == [997, 1005]


def test_a_worker_with_other_resume_arguments_is_refused_while_the_resume_runs(redis_server) -> None:
    ws = [frontier(redis_server, "a0")]
    join(ws, target())
    drive(ws, random.Random(3), flaky(FAILING))
    ws[0].job.leave("a0")
    first = frontier(redis_server, "b0")
    assert join([first], target(resume="holes")) == ["created"]
    other = frontier(redis_server, "b1")
    other.add_target(target(resume="all"))
    with pytest.raises(TargetConflict, match=r"resume=all, holes=failed differs from the resume the job's workers "
                                             r"are running \(resume=holes, holes=failed\)"):
        other.resume(target(resume="all"))
    # a worker started without resume joins the job as it is, holes included
    plain = frontier(redis_server, "b2")
    plain.add_target(target())
    assert "reg:holes" in plain.lanes
    assert sorted(plain.list_lanes()["reg:holes"]) == sorted(FAILING)


def test_resume_on_a_fresh_job_starts_fresh(redis_server) -> None:
    w = frontier(redis_server, "a0")
    assert join([w], target(resume="holes")) == [None]
    assert sorted(w.lanes) == ["reg:asc", "reg:desc"]


@pytest.mark.parametrize("mode", ["bound", "all", "due"])
def test_a_late_worker_of_a_fresh_jobs_fleet_joins_its_plan_and_walks_no_cut_lane_again(redis_server, mode) -> None:
    """A fleet started with a resume on a fresh job: its first worker registers the plan "start fresh", so a
    worker of the same fleet that starts once the lanes were cut by their margin joins that plan. Planning a
    resume of its own, it reopened the cut lanes and walked their margins a second time in the same run
    (and a tail's walk counted twice: test_distributed_due.py failed on it in a CI run)."""
    first = frontier(redis_server, "a0")
    assert join([first], target(resume=mode)) == [None]
    drive([first], random.Random(7), flaky(set()))
    client = first.job.client
    walks = {lane: client.hget(first.job.keys.lane(lane), "walk") for lane in ("reg:asc", "reg:desc")}
    assert all(first.lanes[lane].settled for lane in walks)
    late = frontier(redis_server, "a1")
    assert join([late], target(resume=mode)) == ["joined"]
    assert {lane: client.hget(late.job.keys.lane(lane), "walk") for lane in walks} == walks, "no lane reopened"
    assert all(late.lanes[lane].settled for lane in walks)


# -- real crawls: scrapy crawl workers on a local site ---------------------------------------------------

FLAKY_IDS = {983, 995, 1003, 1005, 1020, 1029}
SITE_GAPS = {990, 1010, 1011, 1025}




def test_three_workers_resume_holes_as_the_single_process_does(make_site, redis_server, tmp_path: Path) -> None:
    """Run 1 (2 workers) leaves failed ids; run 2 (3 workers, resume=holes) sends the requests of a
    single process resuming the same state, each hole once, its items once; idplan then shows no
    failed hole."""
    model = FlakyOnce(900, 1100, SITE_GAPS, flaky=FLAKY_IDS, pace=True)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 0, "min": 980, "max": 1030,
            "attempts": 1, "name": "reg"}

    def requested() -> Counter[int]:
        return Counter(e.id for e in site.log if e.id is not None)

    single_dir = tmp_path / "single"
    single_dir.mkdir()
    first = run_crawl(single_dir, args, output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["idcrawl/failed"] == len(FLAKY_IDS)
    model.healed = True
    site.log.clear()
    second = run_crawl(single_dir, {**args, "resume": "holes"}, output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    single_requests, single_items = requested(), sorted(i["id"] for i in second.items)
    assert single_requests == Counter(FLAKY_IDS)
    assert single_items == sorted(FLAKY_IDS)

    model.healed = False
    site.log.clear()
    settings = worker_settings(redis_server, job="holes")
    procs = [start_worker(tmp_path / f"a{n}", args, settings) for n in range(2)]
    for n, proc in enumerate(procs):
        result = finish(proc, tmp_path / f"a{n}")
        assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(i for i in requested().elements() if i in FLAKY_IDS) == sorted(FLAKY_IDS)
    plan = scrapy(tmp_path, "idplan", "--json", settings=redis_settings(redis_server, "holes"))
    assert plan.returncode == 0, plan.stderr
    assert failed_holes(json.loads(plan.stdout)) == len(FLAKY_IDS)

    model.healed = True
    site.log.clear()
    procs = [start_worker(tmp_path / f"b{n}", {**args, "resume": "holes"}, settings) for n in range(3)]
    results = [finish(proc, tmp_path / f"b{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    assert requested() == single_requests, "the single process's requests: each hole fetched by one worker"
    items = [i["id"] for r in results for i in r.items]
    assert sorted(items) == single_items, "the single process's items, each once across the fleet"
    plan = scrapy(tmp_path, "idplan", "--json", settings=redis_settings(redis_server, "holes"))
    assert plan.returncode == 0, plan.stderr
    assert failed_holes(json.loads(plan.stdout)) == 0
    status = scrapy(tmp_path, "idjob", "status", settings=redis_settings(redis_server, "holes"))
    assert f"reg:holes: holes {len(FLAKY_IDS)}/{len(FLAKY_IDS)} refetched" in status.stdout, status.stdout
    assert any("resumed (Redis job, resume=holes): registered for the fleet" in r.stderr for r in results)


def failed_holes(plan: dict[str, Any]) -> int:
    (target,) = plan["targets"]
    return sum(lane["holes"]["failed"]["count"] for lane in target["lanes"])


def test_a_worker_running_before_the_resume_joins_its_lanes_at_its_next_poll(redis_server) -> None:
    ws = [frontier(redis_server, "a0")]
    join(ws, target())
    drive(ws, random.Random(5), flaky(FAILING))
    ws[0].job.leave("a0")
    early = frontier(redis_server, "b0")
    early.add_target(target())  # a worker of the job, started without resume
    assert sorted(early.lanes) == ["reg:asc", "reg:desc"]
    late = frontier(redis_server, "b1")
    assert join([late], target(resume="all")) == ["created"]
    early.join_list_lanes()  # what its poll does when the job's target version changed
    assert sorted(early.lanes) == ["reg:asc", "reg:desc", "reg:holes"]
    assert not early.lanes["reg:asc"].stopped, "the reopened lane goes on in the early worker too"
    rng = random.Random(6)
    (_, _), (emitted, _) = single_process(target(), [flaky(FAILING), flaky(set())], [("all", "failed")])
    got, fetched = drive([early, late], rng, flaky(set()))
    assert sorted(got) == sorted(emitted)
    assert all(n == 1 for i, n in Counter(fetched).items() if i in FAILING)


def test_a_worker_started_with_other_resume_arguments_is_refused_with_one_line(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = FlakyOnce(900, 1100, SITE_GAPS, flaky=FLAKY_IDS, pace=True)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 0, "min": 980, "max": 1030,
            "attempts": 1, "name": "reg"}
    settings = worker_settings(redis_server, job="clash")
    first = finish(start_worker(tmp_path / "a", args, settings), tmp_path / "a")
    assert first.returncode == 0, first.stderr[-3000:]
    # a resume in progress: registered by a worker that is alive (its heartbeat is fresh)
    running = frontier(redis_server, "w-alive")
    running.job = RedisJob(running.job.client, "idcrawl:{clash}:")
    resumed = parse_target({**args, "resume": "holes"})
    running.add_target(resumed)
    assert running.resume(resumed) == "created"
    running.poll()
    client = running.job.client
    before = {key: client.dump(key) for key in client.keys("*")}
    site.log.clear()
    refused = finish(start_worker(tmp_path / "b", {**args, "resume": "all"}, settings), tmp_path / "b")
    assert refused.returncode != 0
    errors = [line for line in refused.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, refused.stderr[-2000:]
    assert errors[0].endswith(
        "[idcrawl] ERROR: idseq: bad input: target 'reg': resume=all, holes=failed differs from the resume the "
        "job's workers are running (resume=holes, holes=failed) in Redis job 'idcrawl:{clash}:': start this "
        "worker with the same arguments, or once that resume has finished"
    )
    assert "Traceback" not in refused.stderr
    assert not site.log, "no request sent"
    assert {key: client.dump(key) for key in client.keys("*") if not key.endswith(b"workers")} == {
        key: value for key, value in before.items() if not key.endswith(b"workers")}


@pytest.mark.parametrize("seed", [11, 12])
def test_a_worker_killed_during_the_holes_loses_none_of_them(redis_server, seed: int) -> None:
    rng = random.Random(seed)
    failing = FAILING | {1016, 1017, 1018, 1019, 1002, 1004, 1006, 1007, 998, 996}
    (_, _), (emitted, fetched_single) = single_process(
        target(margin=12), [flaky(failing), flaky(set())], [("holes", "failed")])
    run1 = [frontier(redis_server, "a0")]
    join(run1, target(margin=12))
    drive(run1, rng, flaky(failing))
    run1[0].job.leave("a0")
    run2 = [frontier(redis_server, f"b{i}", block=2, lease_ms=300) for i in range(3)]
    assert join(run2, target(margin=12, resume="holes")) == ["created", "joined", "joined"]
    got, fetched = drive(run2, rng, flaky(set()), die_after=3)
    assert sorted(got) == sorted(emitted), "nothing lost, nothing emitted twice"
    assert set(fetched) == set(fetched_single) == failing


def test_resume_all_reopens_cut_lanes_at_their_last_found_id_as_the_single_process_does(
    make_site, redis_server, tmp_path: Path
) -> None:
    """Run 1 cuts the asc lane after id 1040; new ids 1041..1060 appear and the flaky ids heal. With
    resume=all, 3 workers send the single process's requests up to the new cut (each hole once) and
    emit its items: the holes' and the new tail's."""
    model = FlakyOnce(900, 1040, SITE_GAPS, flaky=FLAKY_IDS - {1029}, pace=True)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "min": 980, "attempts": 1,
            "name": "reg"}

    def requested() -> Counter[int]:
        return Counter(e.id for e in site.log if e.id is not None and e.id <= 1065)

    def run_single() -> tuple[Counter[int], list[int]]:
        single_dir = tmp_path / "single"
        single_dir.mkdir()
        first = run_crawl(single_dir, args, output="run1.jsonl")
        assert first.returncode == 0, first.stderr[-3000:]
        model.healed, model.high = True, 1060
        site.log.clear()
        second = run_crawl(single_dir, {**args, "resume": "all"}, output="run2.jsonl")
        assert second.returncode == 0, second.stderr[-3000:]
        return requested(), sorted(i["id"] for i in second.items)

    single_requests, single_items = run_single()
    assert single_items == sorted((FLAKY_IDS - {1029}) | set(range(1041, 1061)))
    assert max(single_requests.values()) == 1

    model.healed, model.high = False, 1040
    site.log.clear()
    settings = worker_settings(redis_server, job="all")
    for n, proc in enumerate([start_worker(tmp_path / f"a{n}", args, settings) for n in range(2)]):
        assert finish(proc, tmp_path / f"a{n}").returncode == 0
    model.healed, model.high = True, 1060
    site.log.clear()
    procs = [start_worker(tmp_path / f"b{n}", {**args, "resume": "all"}, settings) for n in range(3)]
    results = [finish(proc, tmp_path / f"b{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    assert requested() == single_requests, "up to the new cut, the single process's requests, each once"
    items = [i["id"] for r in results for i in r.items]
    assert sorted(items) == single_items, "the single process's items, each once across the fleet"


def test_items_of_holes_a_stopped_worker_did_not_acknowledge_are_adopted_with_their_ids(redis_server) -> None:
    ws = [frontier(redis_server, "a0")]
    join(ws, target())
    drive(ws, random.Random(8), flaky(FAILING))
    ws[0].job.leave("a0")
    w0, w1 = frontier(redis_server, "b0"), frontier(redis_server, "b1")
    assert join([w0], target(resume="holes")) == ["created"]
    released: list[tuple[str, int, list[int]]] = []
    while (d := w0.next().dispatch) is not None:
        rec = w0.record(d.lane, d.id, Outcome.FOUND, (d.lane, d.id, [d.id]))
        released += rec.released
    assert sorted(id_ for _, id_, _ in released) == sorted(FAILING)
    w0.job.leave("b0")  # stopped before its items were acknowledged: they become orphans
    w1.add_target(target())  # a worker that never joined the holes lane (now settled)
    assert "reg:holes" not in w1.lanes
    adopted = sorted(w1.id_of(item.lane, item.id) for item in w1.job.adopt("b1", 100))
    assert adopted == sorted(FAILING)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_holes_of_overlapping_targets_are_refetched_once_as_in_a_single_process(redis_server, seed: int) -> None:
    """Targets a and b on one template overlap on 1010..1024; ids failing there are holes of both:
    the resumed fleet fetches each once (as a single process resuming the same state does), emits
    its items once, and both targets' state shows its new outcome."""
    rng = random.Random(seed)
    failing = {1001, 997, 1013, 1015, 1016}
    a, b = target(name="a"), target(name="b", start=1010, direction="asc")
    run1 = [frontier(redis_server, f"a{i}") for i in range(3)]
    for w in run1:
        w.add_target(a)
        w.add_target(b)
    drive(run1, rng, flaky(failing))
    for w in run1:
        w.job.leave(w.worker)
    store = JobStateStore(run1[0].job.client, "t:{job}:", read_only=True)
    single: Frontier[tuple[str, int, list[int]]] = Frontier(
        [], rebind=lambda payload, lane, id_: (lane, id_, payload[2] if payload else []))
    for t in (a, b):
        state = store.load(t.name)
        assert state is not None
        single.add_target(t, resume_specs(t, state.lanes, state.outcomes, "holes"),
                          known_found=state.outcomes.get(Outcome.FOUND, BitMap64()))
    fetched1, emitted1 = [], []
    while True:
        step = single.next()
        emitted1 += [item for _, _, items in step.released for item in items]
        if (d := step.dispatch) is None:
            break
        fetched1.append(d.id)
        rec = single.record(d.lane, d.id, Outcome.FOUND, (d.lane, d.id, [d.id]))
        emitted1 += [item for _, _, items in rec.released for item in items]
    assert single.finished and sorted(fetched1) == sorted(failing)

    run2 = [frontier(redis_server, f"b{i}", block=rng.choice([1, 3])) for i in range(3)]
    for w in run2:
        for t in (a, b):
            resumed = target(**{**{"name": t.name, "start": t.start, "direction": str(t.direction)}, "resume": "holes"})
            w.add_target(resumed)
            w.resume(resumed)
    got, fetched = drive(run2, rng, flaky(set()))
    assert Counter(fetched) == Counter(fetched1), "each hole once, as the single process"
    assert sorted(got) == sorted(emitted1), "the single process's items, once"
    for name in ("a", "b"):
        state = store.load(name)
        assert state is not None and not state.outcomes.get(Outcome.FAILED), f"{name}: holes show new outcomes"


LEASE = 2.0


def test_the_default_in_a_fleet_continues_as_in_one_process(make_site, redis_server, tmp_path: Path) -> None:
    """The same command run again (the default, resume=auto) by a fleet: lanes cut by their margin look for
    new ids just after their last found id, as one process does; nothing found is fetched again; reset is
    refused in one line (a fleet is started over with idjob clean)."""
    model = FlakyOnce(900, 1100, SITE_GAPS, flaky=set())
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "asc", "margin": 5, "name": "reg"}
    settings = worker_settings(redis_server, job="auto", IDCRAWL_REDIS_LEASE_TIMEOUT=LEASE)

    def fleet(run: str) -> list[int]:
        procs = [start_worker(tmp_path / f"{run}{n}", args, settings) for n in range(2)]
        results = [finish(proc, tmp_path / f"{run}{n}") for n, proc in enumerate(procs)]
        for result in results:
            assert result.returncode == 0, result.stderr[-3000:]
        return sorted(i["id"] for r in results for i in r.items)

    first = fleet("a")
    assert first == [i for i in range(1000, 1101) if i not in SITE_GAPS]
    wait_out_the_runs_grace(redis_server, "auto", LEASE)  # a worker starting within it joins the ended run
    model.high = 1120  # new ids past the last found one
    site.log.clear()
    second = fleet("b")
    assert second == list(range(1101, 1121)), "the new ids, each once across the fleet"
    assert min(e.id for e in site.log if e.id is not None) == 1101, "nothing found is fetched again"
    refused = finish(start_worker(tmp_path / "c", {**args, "resume": "reset"}, settings), tmp_path / "c")
    assert refused.returncode != 0
    assert "resume=reset: the workers of a distributed job do not start it over: stop them and run scrapy " \
           "idjob clean" in refused.error_lines()[0]
