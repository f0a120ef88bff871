"""The Lua lane (``CLAIM``/``RECORD`` on a real redis-server) against the core ``Lane`` and the sequential rule.

Twice: lanes with adaptive speculation (``IDCRAWL_SPECULATION=adaptive``, ``Lane(adaptive=True)``:
the claims must hand out exactly the ids the core lane dispenses, at most margin past the earliest
possible cut, the window counted from the window base) and with the fixed window (``window``).

1,000 seeded sequences, each one lane: ascending or descending, bounded or not (an
unbounded descending lane ends at id 0), varied margins (0: no cut, bounded lanes only) and
windows, failed ids counted as misses or neutral (``IDCRAWL_MARGIN_COUNTS_FAILED``),
outcomes found / missing / failed / disallowed, claims of 1 to 3 ids, outcomes recorded in a
random order within the window, some of them twice, some for ids never handed out. The same
operations go to a :class:`idcrawl.core.lanes.Lane` and to the job's scripts (through
:class:`idcrawl.distributed.frontier.RedisJob`); after every step both must show the same
first undecided id, next id, last found id, cut, reason, settledness and count changes, and at
the end the same released ids, which are those of :func:`tests.support.reference.lane_truth`
(its cut too), and Redis's 2-bit field must hold every outcome the prefix passed.

Then 300 more each with a reach (a tail told of newer ids by a sitemap: misses at or before it do not
count toward the margin), set as ``RESUME`` sets it when it reopens a cut lane.

``emitted`` is compared at the end only: the core lane releases a found id as soon as no cut
can come before it, the scripts once the decided prefix passed it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from idcrawl.core.lanes import Lane, Outcome
from idcrawl.distributed.job import CODES, RedisJob
from idcrawl.distributed.replies import LaneState
from idcrawl.distributed.state import decode_bits
from tests.support.reference import lane_truth

redis = pytest.importorskip("redis")

SEQUENCES = 1000
REACH_SEQUENCES = 300
SEED = 13
LANE = "t:asc"
_COUNTS = ("found", "missing", "failed", "disallowed", "emitted", "overshoot", "past_cut")


@dataclass
class Case:
    """One lane's parameters and the outcome of each of its ids."""

    start: int
    step: int
    stop: int | None
    margin: int
    window: int
    counts_failed: bool
    outcomes: dict[int, Outcome]  # ids not listed are missing
    reach: int | None = None

    def outcome(self, id_: int) -> Outcome:
        return self.outcomes.get(id_, Outcome.MISSING)

    def describe(self) -> str:
        listed = {i: o.value for i, o in sorted(self.outcomes.items(), key=lambda kv: kv[0] * self.step)}
        return (f"start={self.start} step={self.step} stop={self.stop} margin={self.margin} window={self.window} "
                f"counts_failed={self.counts_failed} reach={self.reach} outcomes={listed}")


def make_case(rng: random.Random) -> Case:
    step = rng.choice((1, -1))
    bounded = rng.random() < 0.5
    margin = rng.randint(0 if bounded else 1, 6)
    start = rng.randint(0, 25) if step < 0 else rng.randint(0, 1000)
    length = rng.randint(0, 40)  # ids with an outcome drawn at random; past them every id is missing
    stop = start + step * (rng.randint(-1, 40)) if bounded else None  # -1: a lane that ends before its start
    if stop is not None and stop < 0:
        stop = 0
    weights = rng.choice(((6, 3, 1, 0), (2, 5, 2, 1), (1, 1, 1, 1), (8, 1, 1, 0)))
    outcomes: dict[int, Outcome] = {}
    for k in range(length):
        id_ = start + step * k
        if id_ < 0:
            break
        outcomes[id_] = rng.choices(list(Outcome), weights=weights)[0]
    return Case(start, step, stop, margin, rng.randint(1, 8), rng.random() < 0.5, outcomes)


def truth(case: Case) -> tuple[list[int], int | None]:
    """The found ids and the cut of the sequential rule (tests/support/reference.py).

    With failed ids neutral, the rule runs over the lane without them (they neither extend
    nor reset a run of misses); disallowed ids always count as misses.
    """
    reach = case.reach
    if case.counts_failed:
        return lane_truth(lambda i: case.outcome(i) is Outcome.FOUND, case.start, case.step, case.stop, case.margin,
                          reach=reach)
    ids: list[int] = []
    id_, horizon = case.start, case.margin + 1  # past the listed ids every id is missing: enough to cut
    while id_ >= 0 and (case.stop is None or (id_ - case.stop) * case.step <= 0) and horizon > 0:
        if id_ not in case.outcomes and (reach is None or (id_ - reach) * case.step > 0):
            horizon -= 1
        if case.outcome(id_) is not Outcome.FAILED:
            ids.append(id_)
        id_ += case.step
    at = None if reach is None else sum(1 for i in ids if (reach - i) * case.step >= 0) - 1  # reach's position
    found, cut = lane_truth(lambda k: case.outcome(ids[k]) is Outcome.FOUND, 0, 1, len(ids) - 1, case.margin,
                            reach=at)
    return [ids[k] for k in found], None if cut is None else ids[cut]


@dataclass
class Run:
    """The two lanes being driven, and what they released."""

    case: Case
    lane: Lane[int]
    job: RedisJob
    log: list[str] = field(default_factory=list)
    core_released: list[int] = field(default_factory=list)
    lua_released: list[int] = field(default_factory=list)
    lua_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))

    def fail(self, what: str) -> None:
        steps = "\n  ".join(self.log)
        pytest.fail(f"{what}\ncase: {self.case.describe()}\nsteps:\n  {steps}", pytrace=False)

    def check_state(self, state: LaneState) -> None:
        lane = self.lane
        core = (lane.first_undecided, lane.next_id, lane.reason or "", lane.cut_at, lane.last_found)
        lua = (state.first_undecided, state.next_id, state.reason or "", state.cut_at, state.last_found)
        if core != lua:
            self.fail(f"(first undecided, next, reason, cut, last found): core {core} != Lua {lua}")


def claim(run: Run, n: int) -> list[int]:
    core: list[int] = []
    while len(core) < n and run.lane.ready:
        core.append(run.lane.dispense())
    reply = run.job.claim("w", LANE, n, 3_600_000)
    assert reply is not None
    lua = list(reply.ids)
    run.log.append(f"claim {n}: {core}")
    if core != lua:
        run.fail(f"claim {n}: core {core} != Lua {lua}")
    run.check_state(reply.state)
    return core


def record(run: Run, id_: int, outcome: Outcome) -> None:
    lane = run.lane
    before = [getattr(lane.counts, name) for name in _COUNTS]
    payload = id_ if outcome is Outcome.FOUND else None
    result = lane.record(id_, outcome, payload)
    run.core_released += result.released_ids
    reply = run.job.record("w", LANE, id_, CODES[outcome], f"p{id_}".encode() if payload is not None else b"")
    run.log.append(f"record {id_} {outcome.value}")
    assert reply is not None
    run.check_state(reply.state)
    core_delta = [getattr(lane.counts, name) - b for name, b in zip(_COUNTS, before, strict=True)]
    lua_delta = [getattr(reply.deltas, name) for name in _COUNTS]
    for name, delta in zip(_COUNTS, lua_delta, strict=True):
        run.lua_counts[name] += delta
    # emitted: the core releases earlier than the prefix does (compared at the end)
    if core_delta[:4] + core_delta[5:] != lua_delta[:4] + lua_delta[5:]:
        run.fail(f"record {id_} {outcome.value}: count changes {dict(zip(_COUNTS, core_delta, strict=True))} "
                 f"!= Lua {dict(zip(_COUNTS, lua_delta, strict=True))}")
    if reply.settled != lane.settled:
        run.fail(f"record {id_} {outcome.value}: settled core {lane.settled} != Lua {reply.settled}")
    for item in reply.released:
        assert item.lane == LANE and item.blob == f"p{item.id}".encode()
        run.lua_released.append(item.id)


def drive(job: RedisJob, case: Case, rng: random.Random, adaptive: bool) -> None:
    neutral = frozenset() if case.counts_failed else frozenset({Outcome.FAILED})
    lane: Lane[int] = Lane(LANE, start=case.start, step=case.step, stop=case.stop, margin=case.margin,
                           window=case.window, neutral=neutral, adaptive=adaptive, reach=case.reach)
    stop = "" if case.stop is None else str(case.stop)
    assert job.register("t", "{}", [(LANE, case.start, case.step, stop, case.margin, case.window,
                                      "0" if case.counts_failed else "1", 1)], adaptive=adaptive).stored is None
    if case.reach is not None:  # as a due resume reopens a tail's cut lane with a reach (resume.lua)
        job.client.hset(job.keys.lane(LANE), mapping={"cut": str(case.start), "reason": "margin"})
        reply = job.resume("w", "t", "resume=due", "t:holes", (case.window, "0", 1, "1"),
                           [(LANE, case.start, case.reach)], ())
        assert reply.verdict == "created" and reply.lanes == (LANE,), reply
    run = Run(case, lane, job)
    pending: list[int] = []  # handed out, no outcome yet
    decided: list[int] = []
    steps = 0
    while pending or lane.ready:
        steps += 1
        assert steps < 10_000, case.describe()
        if lane.ready and (not pending or rng.random() < 0.4):
            pending += claim(run, rng.randint(1, 3))
            continue
        roll = rng.random()
        if decided and roll < 0.05:  # an outcome again (a retry that was already decided): ignored by both
            record(run, rng.choice(decided), rng.choice(list(Outcome)))
        elif roll < 0.07:  # an id never handed out: ignored by both
            record(run, lane.next_id + lane.step * rng.randint(0, 3), Outcome.FOUND)
        else:
            id_ = pending.pop(rng.randrange(len(pending)))
            record(run, id_, case.outcome(id_))
            decided.append(id_)
    claim(run, 1)  # nothing more to hand out, in both

    found, cut = truth(case)
    if not lane.settled:
        run.fail("the core lane did not settle")
    if sorted(run.core_released, key=lambda i: i * case.step) != found or lane.cut_at != cut:
        run.fail(f"core released {sorted(run.core_released)} cut {lane.cut_at}; the rule: {found} cut {cut}")
    if sorted(run.lua_released, key=lambda i: i * case.step) != found:
        run.fail(f"Lua released {sorted(run.lua_released)}; the rule: {found}")
    if lane.reason != ("bound" if cut is None else "margin"):
        run.fail(f"reason {lane.reason!r} with cut {cut}")
    core_counts = {name: getattr(lane.counts, name) for name in _COUNTS}
    if core_counts != run.lua_counts:
        run.fail(f"counts: core {core_counts} != Lua {run.lua_counts}")
    hashed = {k.decode(): int(v) for k, v in job.client.hgetall(job.keys.lane(LANE)).items() if k.startswith(b"c_")}
    totals = {name: v for name, v in run.lua_counts.items() if v}
    if {k[2:]: v for k, v in hashed.items() if k != "c_dispensed" and v} != totals:
        run.fail(f"the lane's job totals {hashed} != the replies' {totals}")
    if job.client.sismember(job.keys.unsettled, LANE):
        run.fail("the lane is still in the job's unsettled set")
    length = (lane.first_undecided - case.start) * case.step
    bits = decode_bits(job.client.get(job.keys.lane(LANE, "bits")) or b"", case.start, case.step, length)
    stored = {i: outcome for outcome, ids in bits.items() for i in ids}
    expected = {case.start + k * case.step: case.outcome(case.start + k * case.step) for k in range(length)}
    if stored != expected:
        run.fail(f"the 2-bit field holds {stored}, the outcomes were {expected}")


@pytest.mark.parametrize(("adaptive", "reach"), [(True, False), (False, False), (True, True), (False, True)],
                         ids=["adaptive", "window", "adaptive-reach", "window-reach"])
def test_the_lua_lane_decides_as_the_core_lane_and_the_sequential_rule(
    redis_server, adaptive: bool, reach: bool,
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    rng = random.Random(SEED + reach)
    kinds: set[tuple[int, bool, bool, bool]] = set()
    for n in range(REACH_SEQUENCES if reach else SEQUENCES):
        case = make_case(rng)
        if reach and (case.stop is None or (case.stop - case.start) * case.step >= 0):
            # at or around the listed ids, or far past them; before the start now and then
            case.reach = max(0, case.start + case.step * rng.randint(-2, 60))
        kinds.add((case.step, case.stop is None, case.counts_failed, case.margin == 0))
        job = RedisJob(client, f"t:{{seq{n}:{int(adaptive)}{'r' if reach else ''}}}:")
        drive(job, case, random.Random(rng.getrandbits(32)), adaptive)
    # every kind of lane was among them: both directions, bounded or not, failed counted or neutral
    assert len(kinds) == 12
