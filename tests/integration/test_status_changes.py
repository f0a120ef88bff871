"""STATUS reads the lanes that changed (the change log P lchg), never every lane: a worker's view kept from the
changes alone against a full read of every lane (the reference), after every step of seeded random fleets;
and a poll's commands do not grow with the job's lanes."""

from __future__ import annotations

import pickle
import random

import pytest

from idcrawl.core.lanes import Outcome
from idcrawl.core.targets import parse_target
from idcrawl.distributed.frontier import CHECKED_PER_POLL, RedisFrontier
from idcrawl.distributed.job import RedisJob
from idcrawl.distributed.replies import LaneStatus

redis = pytest.importorskip("redis")

GAPS = {1003, 1010, 1011, 1012, 1020, 1021, 1022, 1023, 1024, 1025, 995, 990, 989, 988, 987, 986}


def exists(id_: int) -> bool:
    return 900 <= id_ <= 1100 and id_ not in GAPS


def frontier(server, worker: str, prefix: str, max_held: int = 0) -> RedisFrontier:
    client = redis.Redis.from_url(server.url)
    return RedisFrontier(
        RedisJob(client, prefix), worker, block=3, lease_ms=60_000, max_held=max_held,
        encode=lambda payload: pickle.dumps(payload[2]),
        decode=lambda lane, id_, blob: (lane, id_, pickle.loads(blob)),
    )


def targets(rng: random.Random) -> list:
    """Three targets, two of them on one URL template (a shared id space), at seeded starts and margins."""
    out = []
    for name, path in (("a", "n"), ("b", "n"), ("c", "m")):
        out.append(parse_target({"name": name, "url": f"http://127.0.0.1:1/{path}/{{id}}",
                                 "start": rng.randrange(980, 1020), "direction": rng.choice(["asc", "desc", "both"]),
                                 "margin": rng.randrange(2, 7), "window": rng.randrange(3, 9)}))
    return out


def settled(row: LaneStatus) -> bool:
    state = row.state
    assert state is not None
    return state.reason is not None and (state.cut_at is not None or state.first_undecided == state.next_id)


def check(view: dict[str, LaneStatus], full: dict[str, LaneStatus], step: object = None) -> None:
    """What the change log promises: every lane's prefix, cut, last found and settling as a full read has
    them, and a lane with free ids or room now shows them (the view may show room a claim has used since)."""
    for lane, row in full.items():
        seen = view[lane]
        assert row.state is not None and seen.state is not None
        now, then = row.state, seen.state
        assert (then.first_undecided, then.cut_at, then.last_found) == (now.first_undecided, now.cut_at,
                                                                         now.last_found), (lane, step)
        assert settled(seen) == settled(row), lane
        if row.free > 0 or row.room:
            assert seen.free > 0 or seen.room, lane


@pytest.mark.parametrize("seed", range(6))
def test_the_changes_alone_keep_a_view_of_every_lane_equal_to_a_full_read(redis_server, seed: int) -> None:
    rng = random.Random(seed)
    prefix = f"t:{{chg{seed}}}:"
    workers = [frontier(redis_server, f"w{i}", prefix, max_held=rng.choice([0, 2])) for i in range(3)]
    for target in targets(rng):
        for w in workers:
            w.add_target(target)
    job = RedisJob(redis.Redis.from_url(redis_server.url), prefix)
    lanes = sorted(workers[0].lanes)

    def full() -> dict[str, LaneStatus]:  # the reference: every lane read, as STATUS did before the change log
        reply = job.status("observer", 60_000, lanes, workers[0].max_held, since=-1)
        return dict(zip(lanes, reply.lanes, strict=True))

    since = job.status("observer", 60_000, [], since=-1).serial
    view = full()  # from here on the view takes nothing but the changes after since
    held: dict[int, list[tuple[str, int]]] = {i: [] for i in range(len(workers))}
    left: set[int] = set()
    for _ in range(600):
        i = rng.randrange(len(workers))
        step = None
        w = workers[i]
        roll = rng.random()
        if i in left:
            pass
        elif held[i] and roll < 0.5:
            lane, id_ = held[i].pop(rng.randrange(len(held[i])))
            outcome = Outcome.FOUND if exists(id_) else rng.choice([Outcome.MISSING, Outcome.FAILED])
            step = ("record", i, lane, id_, outcome)
            w.record(lane, id_, outcome, (lane, id_, [id_]) if outcome is Outcome.FOUND else None)
        elif roll < 0.97:
            step = ("next", i)
            dispatch = w.next().dispatch
            if dispatch is not None:
                held[i].append((dispatch.lane, dispatch.id))
            else:
                w.poll()
        elif len(left) < len(workers) - 1:  # a worker leaves with ids in hand: they go back to free lists
            job.leave(w.worker)
            left.add(i)
            held[i] = []
        limit = rng.choice([1, 3, 1000])
        while True:  # a poll reads at most limit changes: the next goes on from there
            reply = job.status("observer", 60_000, [], workers[0].max_held, since=since, limit=limit)
            for member, row in reply.changed:
                if row is not None and member in view:
                    view[member] = row
            since = reply.serial
            if len(reply.changed) < limit:
                break
        check(view, full(), step)
    assert any(settled(row) for row in full().values()), "the fleet walked too little to test settling"


def test_a_poll_reads_a_few_lanes_however_many_the_job_has(redis_server) -> None:
    """A worker with 300 unsettled lanes: an idle poll runs a few commands, not one per lane."""
    client = redis.Redis.from_url(redis_server.url)
    w = frontier(redis_server, "w0", "t:{many}:")
    for n in range(150):
        w.add_target(parse_target({"name": f"t{n}", "url": f"http://127.0.0.1:1/p{n}/{{id}}", "start": 1000,
                                   "direction": "both", "margin": 5}))
    assert len(w.unsettled()) == 300
    w.poll()
    client.config_resetstat()
    w.poll()
    stats = client.info("commandstats")
    lane_reads = stats.get("cmdstat_hmget", {}).get("calls", 0) + stats.get("cmdstat_llen", {}).get("calls", 0)
    assert lane_reads <= 4 * CHECKED_PER_POLL, stats
    # and a change made elsewhere comes in the next poll
    other = frontier(redis_server, "w1", "t:{many}:")
    other.add_target(parse_target({"name": "t7", "url": "http://127.0.0.1:1/p7/{id}", "start": 1000,
                                   "direction": "both", "margin": 5}))
    dispatch = other.next().dispatch
    assert dispatch is not None
    other.record(dispatch.lane, dispatch.id, Outcome.FOUND, (dispatch.lane, dispatch.id, []))
    w.poll()
    assert w.lanes[dispatch.lane].first_undecided == other.lanes[dispatch.lane].first_undecided
