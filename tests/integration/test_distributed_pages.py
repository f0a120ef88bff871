"""Found pages revisited by a distributed job (issue 17): fleets of 2-3 ``scrapy crawl`` workers on one Redis,
the clock fixed with ``IDCRAWL_NOW`` (no test sleeps through simulated days). The workers keep the page
records in the job's keys; a ``resume=due`` fleet run revisits each due page once across the fleet, with
conditional requests; ``scrapy iddue --at T`` on the job lists what the fleet fetches at T; a SIGKILLed
worker neither updates a page's duration twice nor loses one."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.clock import format_time
from idcrawl.core.lanes import Outcome
from idcrawl.demo.site import Reply
from idcrawl.distributed.state import JobStateStore
from tests.crawl.test_recrawl_pages_crawl import DAY, T0, ChangingModel
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.integration.test_distributed_due import client_of, fleet, iddue
from tests.support.crawl import CrawlResult, read_items
from tests.support.fleet_runs import wait_out_the_runs_grace

redis = pytest.importorskip("redis")

PREFIX = "idcrawl:{due}:"
MARGIN = 5
DUE_AT = T0 + 2 * DAY  # every page (initial duration 1 day) and the tail are due


def job_file(tmp_path: Path, site) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f'[[targets]]\nname = "reg"\nurl = "{site.url()}"\nstart = 1\nmargin = {MARGIN}\n')
    return path


def run_fleet(tmp_path: Path, run: str, redis_server, job: Path, at: float, workers: int,
              resume: str | None = "due") -> list[CrawlResult]:
    """``fleet`` of test_distributed_due, after the grace of the fleet's last run (run.lua)."""
    wait_out_the_runs_grace(redis_server, "due", 1)
    return fleet(tmp_path, run, redis_server, job, at, workers=workers, resume=resume)


def records(redis_server):
    return JobStateStore(client_of(redis_server), PREFIX, read_only=True).load_pages("reg")


def page_requests(site) -> list[int]:
    return [entry.id for entry in site.log if entry.id is not None and entry.id <= 100]


def stat(results: list[CrawlResult], key: str) -> int:
    return sum(r.stats.get(key, 0) for r in results)


def first_run_and_changes(tmp_path: Path, site, model: ChangingModel, redis_server, seed: int) -> tuple[Path, list[int],
                                                                                                        dict[int, str]]:
    job = job_file(tmp_path, site)
    first = run_fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None)
    items = [item for r in first for item in r.items]
    assert sorted(item["id"] for item in items) == list(range(1, 101)), "each found page once across the fleet"
    assert {item["revision"] for item in items} == {1}
    stored = records(redis_server)
    assert sorted(stored) == list(range(1, 101)), "the workers keep the page records in the job's keys"
    assert {(s.last_crawled, s.update_duration) for s in stored.values()} == {(T0, DAY)}
    assert stored[7].etag == model.etag(7)
    changed = sorted(random.Random(seed).sample(range(1, 101), 10))  # seeded
    for id_ in changed:
        model.version[id_] += 1
    return job, changed, {item["id"]: item["checksum"] for item in items}


@pytest.mark.parametrize("validators", [True, False], ids=["validators", "checksums"])
def test_a_due_fleet_revisits_100_pages_once_each_conditionally_and_emits_the_10_changed(
    make_site, redis_server, tmp_path: Path, validators: bool
) -> None:
    model = ChangingModel(validators=validators)
    site = make_site(model)
    job, changed, checksums = first_run_and_changes(tmp_path, site, model, redis_server, 17)

    listed = iddue(tmp_path, redis_server, DUE_AT)  # scrapy iddue on the Redis job lists pages too
    [reg] = listed["targets"]
    assert listed["due"] == ["reg"] and reg["pages"]["records"] == 100
    assert sorted(reg["pages"]["due"]) == list(range(1, 101))
    assert reg["tail"]["walk_from"] == 101
    site.log.clear()
    model.conditional.clear()
    due = run_fleet(tmp_path, "due", redis_server, job, DUE_AT, workers=3)
    fetched = page_requests(site)
    assert Counter(fetched) == Counter(range(1, 101)), "each due page once across the fleet"
    assert sorted(model.conditional) == list(range(1, 101)), "conditional requests from the stored validators"
    # and the due tail from where iddue said, to its margin (past it by what the default window lets the
    # fleet send before the cut is known: exactly the margin needs window 1, test_distributed_due.py)
    tail = [entry.id for entry in site.log if entry.id is not None and entry.id > 100]
    assert min(tail) == 101 and set(range(101, 101 + MARGIN)) <= set(tail) and Counter(tail).most_common(1)[0][1] == 1
    assert stat(due, "idcrawl/pages/conditional") == 100
    assert stat(due, "idcrawl/pages/due") == 100, "the fleet's plan, counted by the worker that registered it"
    assert stat(due, "idcrawl/redis/page_records_written") == 100, "each revisited page's record once, with its outcome"
    statuses = sorted(entry.status for entry in site.log if entry.id is not None and entry.id <= 100)
    if validators:
        assert statuses == [200] * 10 + [304] * 90
        assert stat(due, "idcrawl/pages/not_modified") == 90 and stat(due, "idcrawl/pages/unchanged") == 0
    else:
        assert statuses == [200] * 100
        assert stat(due, "idcrawl/pages/unchanged") == 90 and stat(due, "idcrawl/pages/not_modified") == 0
    assert stat(due, "idcrawl/pages/changed") == 10
    items = [item for r in due for item in r.items]
    assert sorted(item["id"] for item in items) == changed
    for item in items:
        assert item["revision"] == 2
        assert item["previous_checksum"] == checksums[item["id"]] != item["checksum"]
    # each page's rule applied once: motivated (x 0.8) if it changed, penalised (x 1.8) if not
    stored = records(redis_server)
    assert {s.last_crawled for s in stored.values()} == {DUE_AT}
    assert {id_: s.update_duration for id_, s in stored.items()} == {
        id_: pytest.approx(DAY * (0.8 if id_ in changed else 1.8)) for id_ in range(1, 101)}
    state = JobStateStore(client_of(redis_server), PREFIX, read_only=True).load("reg")
    assert state is not None and set(range(1, 101)) <= set(state.outcomes[Outcome.FOUND]), "found stays found"

    # the same moment again: nothing is due, no page is fetched by any worker
    listed = iddue(tmp_path, redis_server, DUE_AT)
    assert listed["targets"][0]["pages"] == {"records": 100, "due": []}
    site.log.clear()
    again = run_fleet(tmp_path, "again", redis_server, job, DUE_AT, workers=2)
    assert page_requests(site) == [] and [item for r in again for item in r.items] == []


class SlowChangingModel(ChangingModel):
    """:class:`ChangingModel` at 30 ms a page: a fleet's due run lasts long enough to kill a worker mid-way."""

    def reply_to(self, id_: int, host: str, nth: int, headers: Any) -> Reply:
        reply = super().reply_to(id_, host, nth, headers)
        return Reply(reply.status, reply.body, reply.headers, 0.03)


def test_a_sigkilled_worker_of_a_due_fleet_updates_no_page_twice_and_loses_none(
    make_site, redis_server, tmp_path: Path
) -> None:
    """One of two workers is SIGKILLed once 30 page records of the run are in Redis (a condition, not a time):
    a page's record is written with its outcome, so every page whose outcome the killed worker had recorded
    has its record, and the survivor takes the pages it had in flight: after the run nothing is due, and a
    rerun at the same clock sends nothing."""
    model = SlowChangingModel()
    site = make_site(model)
    job, changed, _ = first_run_and_changes(tmp_path, site, model, redis_server, 29)
    settings = worker_settings(redis_server, job="due", IDCRAWL_NOW=format_time(DUE_AT), IDCRAWL_REDIS_LEASE_TIMEOUT=1,
                               CONCURRENT_REQUESTS_PER_DOMAIN=1)
    wait_out_the_runs_grace(redis_server, "due", 1)
    site.log.clear()
    procs: list[subprocess.Popen[str]] = [
        start_worker(tmp_path / f"k{n}", {"job": job, "resume": "due"}, settings) for n in range(2)]
    deadline = time.monotonic() + 120
    while (sum(s.last_crawled == DUE_AT for s in records(redis_server).values()) < 30
           and all(p.poll() is None for p in procs) and time.monotonic() < deadline):
        time.sleep(0.01)  # waiting for records to reach Redis, not for simulated time
    procs[0].send_signal(signal.SIGKILL)
    procs[0].communicate(timeout=30)
    survivor = finish(procs[1], tmp_path / "k1")
    assert survivor.returncode == 0, survivor.stderr[-3000:]
    killed_at = len(page_requests(site))
    assert killed_at >= 30, killed_at
    assert set(page_requests(site)) == set(range(1, 101)), "the survivor walks the due pages to the end"
    written = [*read_items(tmp_path / "k0" / "items.jsonl"), *survivor.items]
    stored = records(redis_server)
    assert {s.last_crawled for s in stored.values()} == {DUE_AT}, "every page's record written with its outcome"
    assert {id_: s.update_duration for id_, s in stored.items()} == {
        id_: pytest.approx(DAY * (0.8 if id_ in changed else 1.8)) for id_ in range(1, 101)}, "none updated twice"
    assert {item["id"] for item in written} == set(changed), "every changed page's item written (at least once)"
    assert {item["revision"] for item in written} == {2}

    # the rerun (the same clock): nothing is due, nothing is fetched
    assert iddue(tmp_path, redis_server, DUE_AT)["targets"][0]["pages"]["due"] == []
    site.log.clear()
    rerun = run_fleet(tmp_path, "rerun", redis_server, job, DUE_AT, workers=2)
    assert page_requests(site) == [] and [item for r in rerun for item in r.items] == []
    assert records(redis_server) == stored


def test_a_workers_page_record_is_written_in_the_call_that_records_its_outcome(redis_server) -> None:
    """A page book with :class:`FleetPageRecords` + ``RECORD``: a visit's record goes with its id's outcome, written (with its
    due time in the index) in that one Lua call; a fetch whose outcome was never recorded (a kill) wrote no
    record; a duplicate outcome writes none; a new page fetched past its lane's cut (no item) gets none."""
    from idcrawl.core.clock import Clock
    from idcrawl.core.pagebook import PageBook
    from idcrawl.core.recrawl import Fetch, Kind, Schedule
    from idcrawl.core.recrawl import Outcome as PageOutcome
    from idcrawl.distributed.job import CODES, RedisJob
    from idcrawl.distributed.pagerecords import FleetPageRecords, is_due_lane
    from idcrawl.state.redis import RedisStateStore

    client = client_of(redis_server)
    prefix = "idcrawl:{book}:"
    base = Schedule(Kind.PAGE, "reg/1", T0, DAY, checksum="c1", etag='"1"', last_status=200)
    two = replace(base, key="reg/2")
    store = RedisStateStore(client, prefix)
    store.commit({}, {}, {}, pages={"reg": {1: base, 2: two}})
    records = FleetPageRecords(client, prefix)
    book = PageBook(Clock(DUE_AT), retain=False, sink=records)
    assert records.load_ids(book, "reg", [1, 2, 3]) == 2 and records.load_ids(book, "reg", [1, 2, 3]) == 0, \
        "looked up once"
    assert book.validators("reg", 1) == {"If-None-Match": '"1"'}
    job = RedisJob(client, prefix)
    created = job.register("reg", "{}", [("reg:asc", 1, 1, "", 2, 8, "1", 1)], adaptive=False)
    assert created.stored is None and not created.lost
    assert list(job.claim("w", "reg:asc", 8, 3_600_000).ids) == list(range(1, 9))

    def record(id_: int, outcome: Outcome) -> Any:
        payload = b"item" if outcome is Outcome.FOUND else b""
        return job.record("w", "reg:asc", id_, CODES[outcome], payload, None, records.outgoing("reg", id_))

    assert book.visit("reg", 1, Fetch(PageOutcome.NOT_MODIFIED)).event == "not_modified"
    assert book.visit("reg", 2, Fetch(PageOutcome.OK, "c2")).emits
    assert book.visit("reg", 3, Fetch(PageOutcome.OK, "c3")).emits  # a new page: revision 1
    assert store.load_pages("reg") == {1: base, 2: two}, "nothing written before its outcome"
    record(1, Outcome.FOUND)
    record(3, Outcome.FOUND)
    stored = store.load_pages("reg")
    assert stored[1].last_crawled == DUE_AT and stored[1].update_duration == pytest.approx(DAY * 1.8)
    assert stored[2] == two, "its outcome was never recorded: the record stays as it was (the page stays due)"
    assert stored[3].revision == 0 and stored[3].checksum == "c3"
    due = {int(i): at for i, at in client.zrange(prefix + "pagedue:reg", 0, -1, withscores=True)}
    assert due == {i: s.due_at() for i, s in stored.items()}, "the index moves with the records"
    assert not book.awaiting

    # a duplicate outcome (the id fetched again after a lease ran out) writes no record: the first stands
    again_records = FleetPageRecords(client, prefix)
    again = PageBook(Clock(DUE_AT + DAY), retain=False, sink=again_records)
    again_records.load_ids(again, "reg", [1])
    again.visit("reg", 1, Fetch(PageOutcome.NOT_MODIFIED))
    assert job.record("w", "reg:asc", 1, CODES[Outcome.FOUND], b"", None, again_records.outgoing("reg", 1)).duplicate
    assert store.load_pages("reg")[1] == stored[1]

    # ids 4, 5 missing: the lane is cut at 5 (margin 2); a new page at 7, past the cut, gets no record
    record(2, Outcome.FOUND)
    record(4, Outcome.MISSING)
    record(5, Outcome.MISSING)
    book.visit("reg", 7, Fetch(PageOutcome.OK, "c7"))
    assert record(7, Outcome.FOUND).deltas.overshoot == 1, "overshoot"
    assert sorted(store.load_pages("reg")) == [1, 2, 3]
    assert client.zcard(prefix + "pagedue:reg") == 3
    assert [is_due_lane(k, "reg") for k in ("reg:due", "reg:due2", "reg:holes", "reg:asc", "reg:dueX")] == [
        True, True, False, False, False]
