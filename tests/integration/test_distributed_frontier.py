"""The Redis frontier's scripts on a real redis-server, without Scrapy: several
workers, any completion order, stopped workers; the results of the sequential rule."""

from __future__ import annotations

import pickle
import random
import time
from collections.abc import Sequence

import pytest
from pyroaring import BitMap64

from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import plan_lane
from idcrawl.core.targets import parse_target
from idcrawl.distributed.frontier import RedisFrontier, TargetConflict
from idcrawl.distributed.job import RedisJob
from idcrawl.distributed.replies import PoliteReply
from idcrawl.distributed.state import JobStateStore, decode_bits
from idcrawl.state.redis import RedisStateStore
from tests.support.reference import lane_truth, shared_emitter_truth

redis = pytest.importorskip("redis")

GAPS = {1003, 1010, 1011, 1012, 1020, 1021, 1022, 1023, 1024, 1025,  # asc: cut at 1024 (margin 5)
        995, 990, 989, 988, 987, 986}  # desc: cut at 986


def exists(id_: int) -> bool:
    return 900 <= id_ <= 1100 and id_ not in GAPS


def frontier(
    server, worker: str, prefix: str = "t:{job}:", lease_ms: int = 60_000, block: int = 3, adaptive: bool = True,
    max_held: int = 0,
) -> RedisFrontier:
    client = redis.Redis.from_url(server.url)
    return RedisFrontier(
        RedisJob(client, prefix), worker, block=block, lease_ms=lease_ms, adaptive=adaptive, max_held=max_held,
        encode=lambda payload: pickle.dumps(payload[2]),
        decode=lambda lane, id_, blob: (lane, id_, pickle.loads(blob)),
    )


def target(**extra: object):
    raw = {"name": "reg", "url": "http://127.0.0.1:1/n/{id}", "start": 1000, "direction": "both", "margin": 5,
           "window": 8, **extra}
    return parse_target(raw)


def drive(workers: list[RedisFrontier], rng: random.Random, *, stop_after: dict[int, int] | None = None,
          emitters: dict[int, str] | None = None):
    """Dispense and decide ids in a random order across workers until the job is done.

    ``stop_after``: worker index -> number of outcomes after which it stops answering
    once it holds ids (they stay claimed, as with SIGKILL). Returns (emitted ids, dispensed ids);
    ``emitters`` gets the lane that emitted each id."""
    emitted: list[int] = []
    dispensed: list[int] = []
    held: dict[int, list[tuple[str, int]]] = {i: [] for i in range(len(workers))}
    decided = dict.fromkeys(range(len(workers)), 0)
    dead: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        alive = [i for i in range(len(workers)) if i not in dead]
        for i in alive:
            w = workers[i]
            w.poll()
            if w.status.orphans:  # outputs a stopped worker had not acknowledged: emitted again
                adopted = w.job.adopt(w.worker, 100)
                emitted += [item.id for item in adopted]
                w.job.client.delete(w.job.keys.emit(w.worker))
        if all(w.status.finished for w in (workers[i] for i in alive)) and not any(held[i] for i in alive):
            break
        i = rng.choice(alive)
        w = workers[i]
        if held[i] and rng.random() < 0.6:
            lane, id_ = held[i].pop(rng.randrange(len(held[i])))
            outcome = Outcome.FOUND if exists(id_) else Outcome.MISSING
            rec = w.record(lane, id_, outcome, (lane, id_, [f"item{id_}"]) if outcome is Outcome.FOUND else None)
            emitted += [rid for _, rid, _ in rec.released]
            if emitters is not None:
                emitters.update((rid, rlane) for rlane, rid, _ in rec.released)
            decided[i] += 1
            continue
        step = w.next()
        dispatch = step.dispatch
        emitted += [rid for _, rid, _ in step.released]  # released by a claim (an overlapping lane's outcome)
        if emitters is not None:
            emitters.update((rid, rlane) for rlane, rid, _ in step.released)
        if dispatch is not None:
            held[i].append((dispatch.lane, dispatch.id))
            dispensed.append(dispatch.id)
            if stop_after and decided[i] >= stop_after.get(i, 10**9) and len(held[i]) >= 2:
                dead.add(i)  # stops with ids in hand
        elif not held[i]:
            time.sleep(0.01)
    else:
        raise AssertionError("the job did not finish")
    return emitted, dispensed


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_three_workers_in_any_order_emit_exactly_the_sequential_result(redis_server, seed: int) -> None:
    workers = [frontier(redis_server, f"w{i}") for i in range(3)]
    for w in workers:
        w.add_target(target())
    emitted, dispensed = drive(workers, random.Random(seed))
    asc, asc_cut = lane_truth(exists, 1000, 1, None, 5)
    desc, desc_cut = lane_truth(exists, 999, -1, None, 5)
    assert sorted(emitted) == sorted(asc + desc)
    assert len(dispensed) == len(set(dispensed)), "an id was handed out twice"
    for w in workers:
        assert w.lanes["reg:asc"].cut_at == asc_cut == 1024
        assert w.lanes["reg:desc"].cut_at == desc_cut == 986
    # the workers' counts add up to the job's: every id passed once
    found = sum(w.lanes[k].counts.found for w in workers for k in w.lanes)
    assert found == len(asc) + len(desc)
    # bounded waste: ids handed out past each cut <= window
    assert len([i for i in dispensed if i > 1024]) <= 8
    assert len([i for i in dispensed if i < 986]) <= 8


OVERLAPPING = (
    {"name": "a", "start": 950, "direction": "asc", "margin": 6},  # cut at 1025
    {"name": "b", "start": 1000, "direction": "both", "margin": 5},  # cuts at 1024 and 986
    {"name": "c", "start": 1015, "direction": "desc", "margin": 3},  # cut at 1010
)


def single_process(
    targets: list, emitters: dict[int, str] | None = None, adaptive: bool = True
) -> tuple[list[int], dict[str, int | None], dict[str, int], int]:
    """The core frontier's run of overlapping targets, in order: emitted ids, cuts, found per lane, requests."""
    frontier: Frontier = Frontier(targets, rebind=lambda payload, lane, id_: (lane, id_, payload[2] if payload else []),
                                  adaptive=adaptive)
    emitted: list[int] = []
    requests = 0
    while True:
        step = frontier.next()
        released = list(step.released)
        if (dispatch := step.dispatch) is not None:
            requests += 1
            outcome = Outcome.FOUND if exists(dispatch.id) else Outcome.MISSING
            payload = (dispatch.lane, dispatch.id, [dispatch.id]) if outcome is Outcome.FOUND else None
            released += frontier.record(dispatch.lane, dispatch.id, outcome, payload).released
        emitted += [id_ for _, id_, items in released if items]
        if emitters is not None:
            emitters.update((id_, lane) for lane, id_, items in released if items)
        if dispatch is None:
            break
    assert frontier.finished
    cuts = {key: lane.cut_at for key, lane in frontier.lanes.items()}
    found = {key: lane.counts.found for key, lane in frontier.lanes.items()}
    return emitted, cuts, found, requests


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overlapping_targets_share_one_id_space_across_workers(redis_server, seed: int) -> None:
    targets = [target(**t) for t in OVERLAPPING]
    emitted_1, cuts, found, requests = single_process(targets)
    assert len(emitted_1) == len(set(emitted_1))
    workers = [frontier(redis_server, f"w{i}", prefix=f"t:{{ov{seed}}}:") for i in range(3)]
    for w in workers:
        for t in targets:
            w.add_target(t)
    emitted, dispensed = drive(workers, random.Random(seed))
    assert len(emitted) == len(set(emitted)), "an id's items were emitted twice"
    assert sorted(emitted) == sorted(emitted_1)
    assert len(dispensed) == len(set(dispensed)), "an id was fetched twice"
    for key, cut in cuts.items():
        assert all(w.lanes[key].cut_at == cut for w in workers), key
        assert sum(w.lanes[key].counts.found for w in workers) == found[key], key
    # past the cuts: at most a window per lane more than the single process
    assert len(dispensed) <= requests + 8 * len(cuts)
    assert sum(w.deduplicated for w in workers) > 0


class HeldCapWatch:
    """Checks every claim of a fleet against IDCRAWL_MAX_HELD_PAYLOADS (``cap``) as Redis saw it just
    before (the test drives the workers from one thread, so nothing runs in between): a claim for a
    lane whose space held ``cap`` payloads or more while no held id waited for the lane handed out no
    new id (the lane's ``next`` did not move). After every claim and outcome the held set is a subset
    of the space's payloads (the count names no payload that is gone); ``most``: the largest count.
    ``ahead``: a lane that alone holds payloads (a lane nearer to its shared ids decides them): while
    the space is at the cap, the held count plus that lane's ids handed out and not passed by its prefix
    never grows (the lane takes no new ids; each id its prefix passes adds at most one held payload)."""

    def __init__(self, workers: list[RedisFrontier], cap: int, ahead: str | None = None) -> None:
        self.cap, self.most, self.capped_claims, self.steps = cap, 0, 0, 0
        self.ahead, self.last = ahead, (0, 0)
        self.client = workers[0].job.client
        self.job = workers[0].job
        for w in workers:
            w.job.claim = self._claim(w.job.claim)  # type: ignore[method-assign]
            w.job.record = self._record(w.job.record)  # type: ignore[method-assign]

    def space(self, lane: str) -> str | None:
        base = self.client.hget(self.job.keys.lane(lane), "space")
        return base.decode() if base is not None else None

    def held(self, base: str) -> set[bytes]:
        return self.client.smembers(base + ":held")

    def _check(self, base: str) -> None:
        held = self.held(base)
        assert held <= set(self.client.hkeys(base + ":pay")), "a held id without its payload"
        self.most = max(self.most, len(held))
        self.steps += 1
        if self.ahead is not None:
            nxt, fu, step = self.client.hmget(self.job.keys.lane(self.ahead), "next", "fu", "step")
            total = len(held) + (int(nxt) - int(fu)) * int(step)
            if self.last[0] >= self.cap > 0:
                assert total <= self.last[1], "held payloads and the lane's ids out grew at the cap"
            self.last = (len(held), total)

    def _claim(self, claim):
        def watched(worker, lane, n, lease_ms, speculation=None, max_held=0):
            base = self.space(lane)
            if base is None:
                return claim(worker, lane, n, lease_ms, speculation, max_held)
            at_cap = len(self.held(base)) >= self.cap > 0 and not self.client.zcard(f"{base}:blk:{lane}")
            before = self.client.hget(self.job.keys.lane(lane), "next")
            reply = claim(worker, lane, n, lease_ms, speculation, max_held)
            if at_cap:
                assert self.client.hget(self.job.keys.lane(lane), "next") == before, "new ids at the cap"
            if reply and reply.capped:  # the cap kept this claim from new ids: it was at the cap
                assert at_cap
                self.capped_claims += 1
            self._check(base)
            return reply
        return watched

    def _record(self, record):
        def watched(worker, lane, *args, **kwargs):
            reply = record(worker, lane, *args, **kwargs)
            base = self.space(lane)
            if base is not None:
                self._check(base)
            return reply
        return watched


@pytest.mark.parametrize("max_held", [0, 1, 3])
@pytest.mark.parametrize("seed", range(20, 36))
def test_random_overlapping_targets_match_the_core_frontier(redis_server, seed: int, max_held: int) -> None:
    """... and each shared id's items come from the lane the rule names (the reference's), with
    adaptive speculation (even seeds) or the fixed window (odd), lanes of unequal rates; with the
    fleet's cap on held payloads (IDCRAWL_MAX_HELD_PAYLOADS 1 or 3) too: lanes wait at the cap (no
    claim hands a capped lane new ids), the job still ends with the same items, cuts and emitters."""
    rng = random.Random(seed)
    adaptive = seed % 2 == 0
    targets = [
        target(name=f"t{n}", start=rng.randint(960, 1040), direction=rng.choice(["asc", "desc", "both"]),
               margin=rng.randint(2, 7), window=rng.randint(2, 10), rate=rng.choice([1, 1, 4]))
        for n in range(rng.randint(2, 4))
    ]
    emitters_1: dict[int, str] = {}
    emitted_1, cuts, found, _ = single_process(targets, emitters_1, adaptive=adaptive)
    workers = [frontier(redis_server, f"w{i}", prefix=f"t:{{rnd{seed}c{max_held}}}:", block=rng.randint(1, 4),
                        adaptive=adaptive, max_held=max_held) for i in range(3)]
    for w in workers:
        for t in targets:
            w.add_target(t)
    watch = HeldCapWatch(workers, max_held)
    emitters: dict[int, str] = {}
    emitted, dispensed = drive(workers, random.Random(seed), emitters=emitters)
    base = watch.space(f"{targets[0].name}:asc") or watch.space(f"{targets[0].name}:desc")
    assert base is not None and watch.steps > 0
    assert not watch.held(base), "payloads left held at the end"
    assert sorted(emitted) == sorted(emitted_1), "not the core's items, once"
    specs = [(key, w.lanes[key].start, w.lanes[key].step, w.lanes[key].stop, t.margin)
             for t in targets for key in (f"{t.name}:asc", f"{t.name}:desc") if key in (w := workers[0]).lanes]
    truth = shared_emitter_truth(specs, exists)
    assert emitters_1 == truth, "the core's emitting lanes"
    assert emitters == truth, "the fleet's emitting lanes"
    assert len(dispensed) == len(set(dispensed)), "an id was fetched twice"
    for key, cut in cuts.items():
        assert all(w.lanes[key].cut_at == cut for w in workers), key
        assert sum(w.lanes[key].counts.found for w in workers) == found[key], key


def drive_bounded(workers: list[RedisFrontier], rng: random.Random, concurrency: int) -> dict[int, str]:
    """Dispense and decide ids across workers with at most ``concurrency`` requests in flight in the
    fleet, completed in a seeded random order; returns each emitted id's lane (an id emitted twice fails)."""
    emitters: dict[int, str] = {}
    inflight: list[tuple[RedisFrontier, str, int]] = []

    def take(released: Sequence) -> None:
        for lane, id_, _ in released:
            assert id_ not in emitters, "emitted twice"
            emitters[id_] = lane

    for _ in range(100_000):
        for w in rng.sample(workers, len(workers)):
            while len(inflight) < concurrency:
                step = w.next()
                take(step.released)
                if (dispatch := step.dispatch) is None:
                    break
                inflight.append((w, dispatch.lane, dispatch.id))
        if not inflight:
            for w in workers:
                w.poll()  # the job's own answer wakes parked lanes
            if all(w.status.finished for w in workers):
                return emitters
            continue
        w, lane, id_ = inflight.pop(rng.randrange(len(inflight)))
        found = exists(id_)
        take(w.record(lane, id_, Outcome.FOUND if found else Outcome.MISSING,
                      (lane, id_, [id_]) if found else None).released)
    raise AssertionError("the job did not finish")


@pytest.mark.parametrize("seed", range(4))
def test_the_fleet_s_cap_on_held_payloads_bounds_them_and_changes_no_item(redis_server, seed: int) -> None:
    """a walks 900..1100 at eight times b's rate, b 950..1100 (margin 7, no cut before the bounds): b is
    nearer to 950..1100, so a holds the items of those it reaches first for b. Without a cap the job
    holds many at once; with the cap at 1 the fleet's claims give a no new ids while it is at the cap
    (b, which the held ids wait for, goes on): at the cap the held payloads and a's ids out never grow
    (HeldCapWatch), the job ends, and the items and their emitting lanes are the reference's (seeded
    completion orders, two workers, 6 requests in flight)."""
    targets = [target(name="a", start=900, direction="asc", max=1100, margin=7, window=64, rate=8),
               target(name="b", start=950, direction="asc", max=1100, margin=7, window=64)]
    specs = [("a:asc", 900, 1, 1100, 7), ("b:asc", 950, 1, 1100, 7)]
    truth = shared_emitter_truth(specs, exists)
    concurrency, block = 6, 3

    def crawl(max_held: int) -> HeldCapWatch:
        workers = [frontier(redis_server, f"w{i}", prefix=f"t:{{cap{seed}c{max_held}}}:", block=block,
                            max_held=max_held) for i in range(2)]
        for w in workers:
            for t in targets:
                w.add_target(t)
        watch = HeldCapWatch(workers, max_held, ahead="a:asc")
        emitters = drive_bounded(workers, random.Random(seed), concurrency)
        assert emitters == truth, "not the reference's items and emitting lanes"
        assert not watch.held(watch.space("a:asc") or ""), "payloads left held at the end"
        return watch

    free, capped = crawl(0), crawl(1)
    assert free.most > 10, "the case holds many payloads without the cap"
    assert capped.capped_claims > 0


@pytest.mark.parametrize("seed", [5, 6])
def test_overlapping_targets_with_a_stopped_worker_finish_with_the_single_process_result(
    redis_server, seed: int
) -> None:
    targets = [target(**t) for t in OVERLAPPING]
    emitted_1, cuts, _, _ = single_process(targets)
    workers = [frontier(redis_server, f"w{i}", prefix=f"t:{{ovs{seed}}}:", lease_ms=300) for i in range(3)]
    for w in workers:
        for t in targets:
            w.add_target(t)
    emitted, _ = drive(workers, random.Random(seed), stop_after={0: 10})
    assert sorted(set(emitted)) == sorted(emitted_1)
    for key, cut in cuts.items():
        assert all(w.lanes[key].cut_at == cut for w in workers[1:]), key


def test_a_stopped_worker_s_ids_are_taken_back_after_the_lease(redis_server) -> None:
    workers = [frontier(redis_server, f"w{i}", lease_ms=300) for i in range(2)]
    for w in workers:
        w.add_target(target())
    emitted, dispensed = drive(workers, random.Random(7), stop_after={0: 6})
    asc, _ = lane_truth(exists, 1000, 1, None, 5)
    desc, _ = lane_truth(exists, 999, -1, None, 5)
    assert sorted(set(emitted)) == sorted(asc + desc)
    client = redis.Redis.from_url(redis_server.url)
    assert int(client.hget("t:{job}:job", "reclaimed_workers") or 0) == 1
    assert len(dispensed) > len(set(dispensed)), "the stopped worker's ids were handed out again"


def test_items_released_to_a_worker_that_stops_become_orphans(redis_server) -> None:
    a, b = frontier(redis_server, "a", lease_ms=200), frontier(redis_server, "b", lease_ms=200)
    a.add_target(target(direction="asc", max=1002, margin=0))
    b.add_target(target(direction="asc", max=1002, margin=0))
    ids = [a.next().dispatch.id for _ in range(3)]
    assert ids == [1000, 1001, 1002]
    released = []
    for id_ in ids:
        released += a.record("reg:asc", id_, Outcome.FOUND, ("reg:asc", id_, [id_])).released
    assert [r[1] for r in released] == ids  # a holds them, unacknowledged
    time.sleep(0.3)
    b.poll()  # a's heartbeat is too old: its outputs go to the orphans
    client = redis.Redis.from_url(redis_server.url)
    assert client.hlen("t:{job}:orphans") == 3
    adopted = b.job.adopt("b", 10)
    assert sorted(pickle.loads(item.blob) for item in adopted) == [[1000], [1001], [1002]]


def test_the_same_target_name_with_other_parameters_is_refused(redis_server) -> None:
    a, b = frontier(redis_server, "a"), frontier(redis_server, "b")
    a.add_target(target())
    with pytest.raises(TargetConflict, match=r"target 'reg': margin=6 differs from the job's \(margin=5\)"):
        b.add_target(target(margin=6))
    b.add_target(target(rate="2:1", attempts=5))  # interleaving and retries may differ per worker


def test_the_store_reads_a_distributed_job_as_a_resume_plan(redis_server) -> None:
    workers = [frontier(redis_server, f"w{i}") for i in range(2)]
    for w in workers:
        w.add_target(target())
    drive(workers, random.Random(3))
    store = JobStateStore(redis.Redis.from_url(redis_server.url), "t:{job}:", read_only=True)
    assert store.targets() == ["reg"]
    state = store.load("reg")
    assert state is not None and state.params["start"] == 1000
    asc = state.lanes["reg:asc"]
    assert (asc.cut_at, asc.reason, asc.last_found, asc.cursor) == (1024, "margin", 1019, 1025)
    plan = plan_lane(asc, state.outcomes)
    assert plan.span == (1000, 1024)
    assert plan.content == BitMap64(i for i in range(1000, 1025) if exists(i))
    assert plan.holes[Outcome.MISSING] == BitMap64(i for i in range(1000, 1025) if not exists(i))
    assert plan.bound == (1020, None)
    desc = plan_lane(state.lanes["reg:desc"], state.outcomes)
    assert desc.span == (999, 986)


def test_the_store_commits_and_loads_single_process_state(redis_server) -> None:
    from idcrawl.core.ranges import LaneRecord

    store = RedisStateStore(redis.Redis.from_url(redis_server.url), "s:{job}:")
    run = store.begin_run("2026-11-26T00:00:00.000Z", ["x"])
    record = LaneRecord("x:asc", 1, 1, 100, 11, 9, None, None)
    store.commit({"x": {"url": "u", "start": 1}}, {"x": {Outcome.FOUND: BitMap64(range(1, 10))}}, {"x": {"x:asc": record}})
    store.commit({}, {"x": {Outcome.MISSING: BitMap64([10]), Outcome.FOUND: BitMap64([5])}}, {})
    store.end_run(run, "2026-11-26T00:01:00Z", "finished", {"found": 9})
    state = store.load("x")
    assert state is not None
    assert state.outcomes[Outcome.FOUND] == BitMap64(range(1, 10))
    assert state.outcomes[Outcome.MISSING] == BitMap64([10])
    assert state.lanes["x:asc"] == record
    assert [(r.id, r.finish_reason, r.counts, r.targets) for r in store.runs()] == [(1, "finished", {"found": 9}, ["x"])]
    store.begin_run("2026-11-26T00:02:00.000Z")  # a run that does not say which targets it crawls
    assert store.runs()[-1].targets is None
    store.reset("x")
    assert store.load("x").outcomes == {}


def test_decode_bits_reads_two_bits_per_id_in_lane_order() -> None:
    # positions 0..7: found, missing, found, failed | disallowed, found, found, missing
    bits = bytes([0b00_01_00_10, 0b11_00_00_01])
    out = decode_bits(bits, 100, -1, 8)
    assert out[Outcome.FOUND] == BitMap64([100, 98, 95, 94])
    assert out[Outcome.MISSING] == BitMap64([99, 93])
    assert out[Outcome.FAILED] == BitMap64([97])
    assert out[Outcome.DISALLOWED] == BitMap64([96])


def test_a_worker_stopped_with_ids_of_a_cut_lane_that_another_lane_waits_for_is_taken_back(redis_server) -> None:
    """Lane a is cut while a stopped worker still holds ids of it that lane b waits for: the
    worker's release hands them to b (a settled lane keeps the claims of its fetches in flight).
    With the fixed window (adaptive lanes would hand out only one id past lane a's possible cut)."""
    targets = [target(name="a", start=1010, direction="asc", margin=2), target(name="b", start=1000, direction="asc")]
    emitted_1, cuts, _, _ = single_process(targets)
    workers = [frontier(redis_server, f"w{i}", prefix="t:{cutheld}:", lease_ms=300, adaptive=False) for i in range(3)]
    for w in workers:
        for t in targets:
            w.add_target(t)
    live, dead = workers[1], workers[0]
    assert list(live.job.claim("w1", "a:asc", 3, 300).ids) == [1010, 1011, 1012]
    assert list(dead.job.claim("w0", "a:asc", 3, 300).ids) == [1013, 1014, 1015]  # then w0 stops
    for id_ in (1010, 1011, 1012):  # missing: lane a is cut at 1011 while w0 holds 1013..1015
        live.job.record("w1", "a:asc", id_, 1, b"")  # 1: missing
    emitted, _ = drive(workers[1:], random.Random(9))
    assert sorted(set(emitted)) == sorted(emitted_1)
    for key, cut in cuts.items():
        assert all(w.lanes[key].cut_at == cut for w in workers[1:]), key


def test_polite_reserves_a_slot_and_moves_its_next_start_to_a_gap_after_a_request_leaves(redis_server) -> None:
    """``POLITE`` (the fleet's politeness): a request reserves the slot's next start, and again as it
    leaves. No time passes in the test: a gap of 60 s, and the stored start moved back by hand where a
    gap would have run out."""
    client = redis.Redis.from_url(redis_server.url)
    job = RedisJob(client, "t:{polite}:")
    key, gap_ms = job.keys.polite("h"), 60_000

    def polite(token: str, op: str = "reserve") -> int:
        return job.polite(op, "h", token, gap_ms=gap_ms, cap=0, life_ms=1, lease_ms=8000).wait_ms

    def stored() -> tuple[int, str]:
        at, _, token = client.get(key).decode().partition(" ")
        return int(at), token

    assert polite("a") == 0  # a reserves: the next start is a gap later
    reserved_at, holder = stored()
    assert holder == "a"
    assert 0 < polite("b") <= gap_ms  # b waits for it
    assert polite("a", "go") == 0  # a leaves (nobody took the slot since): a gap from now
    assert stored()[0] >= reserved_at and stored()[1] == "a"
    # a leaves late: its gap ran out and b took the slot meanwhile; a waits for b's gap, then reserves anew
    client.set(key, f"{stored()[0] - gap_ms} a")
    assert polite("b") == 0
    assert stored()[1] == "b"
    assert 0 < polite("a") <= gap_ms
    assert stored()[1] == "b"
    # a slot whose key expired (or a start stored without a token): the first to ask goes
    client.set(key, "1")
    assert polite("c") == 0 and stored()[1] == "c"


def test_polite_holds_a_slots_places_in_flight_for_the_fleet(redis_server) -> None:
    """``POLITE`` with a cap: at most ``cap`` requests of a slot in flight fleet-wide, a place given back
    when its download ends (``done``), the place of a worker that stopped (no heartbeat within the lease)
    or of a request past its life free again. No gap: the places alone."""
    client = redis.Redis.from_url(redis_server.url)
    job = RedisJob(client, "t:{busy}:")
    now_ms = int(client.time()[0]) * 1000
    client.zadd(job.keys.workers, {"w1": now_ms, "w2": now_ms})

    def polite(op: str, token: str, life_ms: int = 60_000) -> tuple[int, int, int]:
        reply = job.polite(op, "h", token, gap_ms=0, cap=2, life_ms=life_ms, lease_ms=8000)
        return reply.wait_ms, reply.why, reply.flying

    assert polite("go", "w1#1") == (0, 0, 1)
    assert polite("go", "w2#1") == (0, 0, 2)
    wait, why, flying = polite("go", "w2#2")  # both places taken: wait
    assert wait > 0 and why == PoliteReply.FULL and flying == 2
    assert polite("reserve", "w2#2")[1] == PoliteReply.FULL  # a reservation sees it too, and takes none
    assert polite("done", "w1#1")[2] == 1
    assert polite("go", "w2#2") == (0, 0, 2)  # w1's place went back
    assert polite("done", "w1#1")[2] == 2  # given back twice: nothing more
    # w1 stops (its heartbeat past the lease): its places are free
    assert polite("done", "w2#1")[2] == 1
    assert polite("go", "w1#2") == (0, 0, 2)
    client.zadd(job.keys.workers, {"w1": now_ms - 60_000})
    assert polite("go", "w2#3") == (0, 0, 2)  # w1#2 dropped
    assert not client.hexists(job.keys.busy("h"), "w1#2")
    # a place past its life (a release lost with a live worker) is free too
    assert polite("done", "w2#3")[2] == 1
    client.zadd(job.keys.workers, {"w1": now_ms + 60_000})
    assert polite("go", "w1#3", life_ms=1) == (0, 0, 2)
    time.sleep(0.01)
    assert polite("go", "w1#4") == (0, 0, 2)
    assert client.hget(job.keys.busy("h"), "lat") is not None  # how long requests last, for the waits
    # a place given back riding on another call (the worker's next): given back before the check
    assert polite("go", "w2#4")[1] == PoliteReply.FULL
    reply = job.polite("go", "h", "w2#4", gap_ms=0, cap=2, life_ms=60_000, lease_ms=8000, releases=[("h", "w1#4")])
    assert (reply.wait_ms, reply.flying) == (0, 2)
    assert sorted(k for k in client.hkeys(job.keys.busy("h")) if k not in (b"lat", b"wait")) == [b"w2#2", b"w2#4"]


def test_polite_a_full_slot_waits_for_a_notification_or_the_earliest_place_that_frees_itself(redis_server) -> None:
    """A request that finds a slot full is told to wait until a place frees itself (its life, its worker's
    lease), not to ask again soon; the next place given back publishes on ``P busy:<slot>`` once."""
    client = redis.Redis.from_url(redis_server.url)
    job = RedisJob(client, "t:{notes}:")
    now_ms = int(client.time()[0]) * 1000
    client.zadd(job.keys.workers, {"w1": now_ms, "w2": now_ms})
    notes = client.pubsub(ignore_subscribe_messages=True)
    notes.psubscribe(job.keys.busy("") + "*")
    assert notes.get_message(timeout=1) is None  # the subscription confirmed

    def polite(op: str, token: str, life_ms: int = 60_000) -> PoliteReply:
        return job.polite(op, "h", token, gap_ms=0, cap=1, life_ms=life_ms, lease_ms=8000)

    assert polite("go", "w1#1").wait_ms == 0
    done = polite("done", "w1#1")  # nobody waits: nothing published
    assert done.flying == 0 and notes.get_message(timeout=0.2) is None
    assert polite("go", "w1#2", life_ms=5_000).wait_ms == 0
    full = polite("go", "w2#1")
    assert full.why == PoliteReply.FULL
    assert 4_000 <= full.wait_ms <= 5_001  # the place's life (5 s) ends before w1's lease (8 s) runs out
    assert 2 <= full.estimate_ms <= 1000  # a worker without notifications asks again by the slot's latency
    assert polite("go", "w2#2").why == PoliteReply.FULL
    assert polite("done", "w1#2").flying == 0
    message = notes.get_message(timeout=5)
    assert message is not None and message["channel"] == job.keys.busy("h").encode()
    assert polite("done", "w1#2").flying == 0 and notes.get_message(timeout=0.2) is None  # once
    assert polite("go", "w2#1").wait_ms == 0
    notes.close()


def test_polite_gap_and_places_together(redis_server) -> None:
    """A request that finds no free place does not move the slot's next start; one that leaves takes a
    place and moves it a gap after now."""
    client = redis.Redis.from_url(redis_server.url)
    job = RedisJob(client, "t:{both}:")
    now_ms = int(client.time()[0]) * 1000
    client.zadd(job.keys.workers, {"w1": now_ms + 60_000, "w2": now_ms + 60_000})

    def polite(op: str, token: str) -> PoliteReply:
        return job.polite(op, "h", token, gap_ms=60_000, cap=1, life_ms=60_000, lease_ms=8000)

    assert polite("reserve", "w1#1").wait_ms == 0
    assert polite("go", "w1#1").wait_ms == 0
    next_start = client.get(job.keys.polite("h"))
    client.set(job.keys.polite("h"), b"1 w1#1")  # the gap ran out; w1#1 still in flight
    reply = polite("go", "w2#1")
    assert reply.why == PoliteReply.FULL and client.get(job.keys.polite("h")) == b"1 w1#1"
    polite("done", "w1#1")
    assert polite("go", "w2#1").wait_ms == 0
    assert client.get(job.keys.polite("h")).decode().endswith(" w2#1") and next_start is not None


def test_a_due_resume_s_reach_keeps_the_claims_whole_on_the_way_to_it(redis_server) -> None:
    """A due tail's lane reopened with a reach (a sitemap listed an id far past its margin): the fleet's
    workers read it with the lane, the claims keep the whole block through the misses before it (no cut
    can come there), and shrink past it as for any lane end; the walk stops margin misses past it."""
    raw = {"name": "reg", "url": "http://127.0.0.1:1/n/{id}", "start": 1, "margin": 2, "window": 40}
    first = frontier(redis_server, "w0", block=8)
    first.add_target(parse_target(raw))
    walk(first, {1, 2}, [])
    assert first.lanes["reg:asc"].cut_at == 4
    due = parse_target({**raw, "resume": "due"})
    planner, joiner = frontier(redis_server, "w1", block=8), frontier(redis_server, "w2", block=8)
    for w, verdict in ((planner, "created"), (joiner, "joined")):
        w.add_target(due)
        assert w.resume(due, reach=30 if w is planner else None) == verdict
        assert w.lanes["reg:asc"].reach == 30, "read from the job's lane"
    sizes: list[tuple[int, int]] = []
    walk(joiner, {30}, sizes)
    assert joiner.lanes["reg:asc"].cut_at == 32
    assert all(size == 8 for fu, size in sizes if fu <= 30) and sizes[-1][1] < 8, sizes


def walk(w: RedisFrontier, found: set[int], sizes: list[tuple[int, int]]) -> None:
    """One worker walks the job's lanes, an id at a time (found: ``found``), noting the claim size of
    the tail's lane before each dispatch (its first undecided id, size)."""
    for _ in range(1000):
        w.poll()
        if w.status.finished:
            return
        sizes.append((w.lanes["reg:asc"].first_undecided, w.claim_size("reg:asc")))
        dispatch = w.next().dispatch
        if dispatch is None:
            continue
        outcome = Outcome.FOUND if dispatch.id in found else Outcome.MISSING
        w.record(dispatch.lane, dispatch.id, outcome, (dispatch.lane, dispatch.id, []) if dispatch.id in found else None)
    raise AssertionError("the walk did not end")
