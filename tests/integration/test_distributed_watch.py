"""Watch mode in a distributed job (issue 17): ``-a watch=true`` on every worker of a Redis job.

Two workers share one Redis job; the clock is fixed (``IDCRAWL_NOW``, the same for both) and sped up
while they sleep between waves (``IDCRAWL_WATCH_SPEED``), so no test sleeps through simulated time.
Each wave is one plan of the fleet: the first worker awake for it plans, the other joins (or finds the
wave walked: its plan names nothing), so which worker walks what depends on timing but what the fleet
requests does not. A worker is killed or interrupted only while it sleeps for far longer than the test
runs (its sleep in real time is given by its own watch speed), never at a moment a race could move.
"""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.clock import format_time, stamp
from idcrawl.core.recrawl import DAY
from idcrawl.core.watch import TICK
from idcrawl.demo.site import Reply
from idcrawl.distributed.runs import watch_session
from idcrawl.distributed.state import JobStateStore
from idcrawl.distributed.status import job_status, render_status
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import start_worker, worker_settings
from tests.integration.test_distributed_due import HOSTS, MARGIN, T0, client_of, fleet, requests, tails
from tests.support.crawl import read_items

pytest.importorskip("redis")

#: the pre-run: both tails walked 1000..1019 a day before the watch, less a minute
BEFORE = T0 - DAY + 60
#: simulated seconds per real second while asleep: the minute before the second wave takes a second;
#: the sleep after it (b's tail, motivated in the first wave, falls due 18.4 h after T0) about 1,100 s
SPEED = 60
#: the wave in which a's tail falls due (a day after the pre-run: a minute into the watch), a tick late
SECOND = BEFORE + DAY + TICK
#: b's duration after the first wave: its initial 23 h, motivated (x 0.8)
B_DURATION = 23 * 3600 * (1 - 0.2)


class GatedModel(GapModel):
    """The site's pages wait while its gate is closed: the first wave cannot end before every worker of
    the test has joined it (whatever the order and speed of their start-ups)."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__(low, high, set())
        self.gate = threading.Event()
        self.gate.set()

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        assert self.gate.wait(120), "the gate was never opened"
        return super().reply(id_, host, nth)


def job_file(workdir: Path, site) -> Path:
    """a on one host name, b on the other (each its own download slot); ``window = 1``: one id of a lane
    undecided at a time in the fleet, so a walk's requests are exactly its ids. b's tail starts with a
    23 h duration, a's with the default day: after the pre-run b falls due before the watch starts (its
    first wave walks it), a a minute into the watch (the second wave walks it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "job.toml"
    path.write_text(f"[defaults]\nstart = 1000\nmargin = {MARGIN}\nwindow = 1\n"
                    f'[[targets]]\nname = "a"\nurl = "{site.url()}"\n'
                    f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\nrecrawl_initial = "23h"\n')
    return path


class Watcher:
    """A watching worker whose log is read as it comes (to act once a line is in it)."""

    def __init__(self, workdir: Path, job: Path, settings: dict[str, Any]) -> None:
        self.workdir = workdir
        self.proc = start_worker(workdir, {"job": job, "watch": "true"}, settings)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_for(self, marker: str, timeout: float = 180) -> None:
        """Until ``marker`` is in the log (the worker ending first fails, showing its log)."""
        with self._changed:
            self._changed.wait_for(lambda: self._ended or any(marker in line for line in self.lines), timeout)
            assert any(marker in line for line in self.lines), self.log[-4000:]

    def stop(self, sig: signal.Signals, timeout: float = 120) -> int:
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout)
        return self.proc.returncode

    @property
    def stats(self) -> dict[str, Any]:
        return json.loads((self.workdir / "stats.json").read_text())

    @property
    def items(self) -> list[dict[str, Any]]:
        return read_items(self.workdir / "items.jsonl")


def settings_of(redis_server, speed: float = SPEED) -> dict[str, Any]:
    """No coalescing window: a's tail, due a minute into the watch, wakes a wave of its own (the window:
    tests/integration/test_distributed_watch_waves.py)."""
    return worker_settings(redis_server, job="due", IDCRAWL_NOW=format_time(T0), CONCURRENT_REQUESTS_PER_DOMAIN=1,
                           IDCRAWL_REDIS_LEASE_TIMEOUT=1, IDCRAWL_WATCH_SPEED=speed,
                           IDCRAWL_WATCH_COALESCE=0, IDCRAWL_WATCH_COALESCE_SHARE=0)


def tail_requests(site) -> dict[str, list[int]]:
    """Each target's page requests past the pre-run's last found id (its tail), in the order sent."""
    by: dict[str, list[int]] = {"a": [], "b": []}
    for entry in site.log:
        if entry.id is not None and entry.id >= 1020:
            by[HOSTS[entry.host]].append(entry.id)
    return by


def pre_run(tmp_path: Path, redis_server, site, model: GatedModel) -> Path:
    """A plain fleet crawl a day before the watch (less a minute); then the site grows by 5 ids and its
    gate closes (the watch's first wave waits for its workers)."""
    job = job_file(tmp_path, site)
    fleet(tmp_path, "before", redis_server, job, BEFORE, workers=2, resume=None)
    assert {name: s.last_found for name, s in tails(redis_server).items()} == {"a": 1019, "b": 1019}
    model.high = 1024
    model.gate.clear()
    site.log.clear()
    return job


def open_when_joined(model: GatedModel, *watchers: Watcher) -> None:
    """Open the site once every watcher has planned or joined the first wave (its start-up line)."""
    for watcher in watchers:
        watcher.wait_for("of Redis job")
    model.gate.set()


def two_waves(model: GatedModel, tmp_path: Path, job: Path, settings: dict[str, Any]) -> tuple[list[Watcher], list[int]]:
    """Two watching workers (``tmp_path / "w<n>"``), the site opened once both joined, each stopped by SIGINT
    once it logged its second wave's end: the watchers and their exit statuses."""
    watchers = [Watcher(tmp_path / f"w{n}", job, settings) for n in range(2)]
    try:
        open_when_joined(model, *watchers)
        for watcher in watchers:
            watcher.wait_for("idcrawl: watch: wave 2 done")
        codes = [watcher.stop(signal.SIGINT) for watcher in watchers]
    finally:
        for watcher in watchers:
            if watcher.proc.poll() is None:
                watcher.proc.kill()
                watcher.proc.wait()
    return watchers, codes


def test_a_watching_fleet_runs_two_waves_each_tail_once_and_stops_cleanly_on_sigint(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = GatedModel(1000, 1019)
    site = make_site(model)
    job = pre_run(tmp_path, redis_server, site, model)
    # both take part in the first wave, so both see it end; both sleep ~1,100 s (real) before the third
    watchers, codes = two_waves(model, tmp_path, job, settings_of(redis_server))
    for watcher, code in zip(watchers, codes, strict=True):
        assert code == 0, watcher.log[-4000:]
        assert "Traceback" not in watcher.log, watcher.log[-4000:]
        stats = watcher.stats
        assert stats["finish_reason"] == "shutdown"
        assert stats["idcrawl/watch/waves"] == 2
        # both slept until the wave the job's schedules in Redis give, and agree on the next one
        assert stats["idcrawl/watch/slept"] == SECOND - T0
        assert stats["idcrawl/watch/next_wave"] == stamp(T0 + B_DURATION + TICK)
    # wave 1 (T0): b's tail, due before the watch; wave 2 (a minute later): a's tail. Each exactly the
    # new ids and the margin after them, each id once across the fleet
    walked = list(range(1020, 1025 + MARGIN))
    requests = tail_requests(site)
    assert sorted(requests["a"]) == walked and sorted(requests["b"]) == walked, requests
    # found pages a fleet revisits (once it keeps page records) come each once, with their tail's wave
    revisits = Counter((HOSTS[e.host], e.id) for e in site.log if e.id is not None and e.id < 1020)
    assert all(count == 1 for count in revisits.values()), revisits
    hosts = [HOSTS[e.host] for e in site.log if e.id is not None and e.id >= 1020]
    assert hosts == ["b"] * len(walked) + ["a"] * len(walked), "b in the first wave, a in the second"
    items = sorted((item["target"], item["id"]) for watcher in watchers for item in watcher.items)
    assert items == [*(("a", i) for i in range(1020, 1025)), *(("b", i) for i in range(1020, 1025))]
    assert {i["fetched_at"] for w in watchers for i in w.items if i["target"] == "a"} == {stamp(SECOND)}
    # each tail's rule applied once per walk, at its wave's time
    schedules = tails(redis_server)
    assert (schedules["a"].last_crawled, schedules["a"].update_duration, schedules["a"].last_found) == (
        SECOND, 0.8 * DAY, 1024)
    assert (schedules["b"].last_crawled, schedules["b"].update_duration, schedules["b"].last_found) == (
        T0, B_DURATION, 1024)

    # one run row for the watch session (not one per wave), with the fleet's counters: both waves, every
    # response of both workers, the 10 new items; idjob status shows the same counters
    client = client_of(redis_server)
    runs = JobStateStore(client, "idcrawl:{due}:", read_only=True).runs()
    session = runs[-1]
    assert [r.watch for r in runs[:-1]] == [None] * (len(runs) - 1)
    assert session.started_at == stamp(T0) and session.finish_reason == "finished"  # its last wave's end
    # a worker may have fetched nothing (the other took every id of both waves): no such stat then
    fetches = sum(watcher.stats.get("downloader/response_count", 0) for watcher in watchers)
    assert session.watch == {"waves": 2, "fetches": fetches, "news": 10}
    assert watch_session(client, "idcrawl:{due}:") == {"session": session.id, **session.watch}
    assert f"watch session: run #{session.id}, 2 waves, {fetches} fetches, 10 with news" in render_status(
        job_status(client, "idcrawl:{due}:", 5.0))

    # a later run (not watching) resumes: at b's due time only b's tail is walked, once across the fleet
    model.high = 1026
    site.log.clear()
    later = fleet(tmp_path, "later", redis_server, job, T0 + B_DURATION + 1, workers=2)
    assert sorted((i["target"], i["id"]) for r in later for i in r.items) == [("b", 1025), ("b", 1026)]
    assert tail_requests(site) == {"a": [], "b": list(range(1025, 1027 + MARGIN))}


def test_a_worker_killed_between_waves_leaves_the_next_wave_to_the_other(
    make_site, redis_server, tmp_path: Path
) -> None:
    """The victim's watch speed makes its sleep after the first wave last 60,000 s of real time: it is
    asleep when killed, whatever the machine's load. The survivor walks the second wave alone."""
    model = GatedModel(1000, 1019)
    site = make_site(model)
    job = pre_run(tmp_path, redis_server, site, model)
    survivor = Watcher(tmp_path / "survivor", job, settings_of(redis_server))
    victim = Watcher(tmp_path / "victim", job, settings_of(redis_server, speed=0.001))
    try:
        open_when_joined(model, survivor, victim)
        victim.wait_for("idcrawl: watch: wave 1 done")
        assert victim.stop(signal.SIGKILL) == -signal.SIGKILL
        survivor.wait_for("idcrawl: watch: wave 2 done")
        code = survivor.stop(signal.SIGINT)
    finally:
        for watcher in (survivor, victim):
            if watcher.proc.poll() is None:
                watcher.proc.kill()
                watcher.proc.wait()
    assert code == 0 and "Traceback" not in survivor.log, survivor.log[-4000:]
    assert survivor.stats["idcrawl/watch/waves"] == 2
    walked = list(range(1020, 1025 + MARGIN))
    requests = tail_requests(site)
    assert sorted(requests["a"]) == walked and sorted(requests["b"]) == walked, requests
    # the second wave's items are the survivor's: a's new ids, once
    assert sorted(i["id"] for i in survivor.items if i["target"] == "a") == list(range(1020, 1025))
    assert tails(redis_server)["a"].last_crawled == SECOND


def test_a_worker_that_starts_while_the_fleet_sleeps_agrees_on_the_next_wave(
    make_site, redis_server, tmp_path: Path
) -> None:
    """A worker started late, once the first worker has walked the first wave and sleeps (its own speed
    keeps it asleep for 60,000 s of real time), plans at the same fixed clock: nothing is due any more,
    it walks nothing and sleeps until the same next wave, read from Redis."""
    model = GatedModel(1000, 1019)
    site = make_site(model)
    job = pre_run(tmp_path, redis_server, site, model)
    model.gate.set()
    first = Watcher(tmp_path / "first", job, settings_of(redis_server, speed=0.001))
    late: Watcher | None = None
    try:
        first.wait_for("idcrawl: watch: wave 1 done")
        late = Watcher(tmp_path / "late", job, settings_of(redis_server, speed=0.001))
        late.wait_for("idcrawl: watch: wave 1 done")
        codes = [first.stop(signal.SIGINT), late.stop(signal.SIGINT)]
    finally:
        for watcher in (first, late):
            if watcher is not None and watcher.proc.poll() is None:
                watcher.proc.kill()
                watcher.proc.wait()
    assert late is not None
    assert codes == [0, 0], late.log[-4000:]
    assert first.stats["idcrawl/watch/next_wave"] == late.stats["idcrawl/watch/next_wave"] == stamp(SECOND)
    assert late.items == [] and late.stats.get("downloader/request_count", 0) == 0
    assert tail_requests(site) == {"a": [], "b": list(range(1020, 1025 + MARGIN))}


def test_waves_of_a_fleet_are_plans_of_their_own(redis_server) -> None:
    """resume.lua without Scrapy, each worker in the fleet's run it joins (run.lua, a wave names its run): a
    later wave replaces a walked plan within its grace; a worker late for a wave joins it; a due run started
    during a wave joins it; other arguments are still refused."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    from idcrawl.distributed.job import RedisJob
    from idcrawl.distributed.runs import join_run

    job = RedisJob(client, "idcrawl:{waves}:")

    def resume(worker: str, args: str) -> str:
        wave = args.partition(", wave=")[2]
        run = join_run(client, job.prefix, worker, lease_ms=60_000,  # a minute's grace: every plan below is within it
                       wave=int(wave) if wave else None)
        reply = job.resume(worker, "a", args, "a:holes", (1, "1", 1.0, run.number), (), ())
        return reply.verdict

    assert resume("w1", "resume=due") == "created"
    assert resume("w2", "resume=due") == "joined", "the run's grace"
    assert resume("w1", "resume=due, wave=1000") == "created", "a later wave: a plan of its own"
    assert resume("w2", "resume=due, wave=1000") == "joined"
    assert resume("w3", "resume=due") == "joined", "a due run started during a wave"
    assert resume("w3", "resume=due, wave=900") == "joined", "late for its wave: joins the later one"
    assert resume("w4", "resume=bound") == "conflict"
    assert resume("w1", "resume=due, wave=2000") == "created"


def test_a_due_re_probe_of_late_ids_wakes_a_wave_of_the_fleet(make_site, redis_server, tmp_path: Path) -> None:
    """As one process does (tests/crawl/test_watch_crawl.py): two pre-runs walk a's tail and re-probe its late
    ids (T0 + 1 h), both still missing; they are published. The fleet watches from a minute before the next
    re-probe falls due (T0 + 7 h): its first wave walks b's tail and pages (due at T0 + 6 h; held until both
    workers joined), and the fleet sleeps until a's re-probe, a tick after, not until a's tail a day after the
    pre-run (at this speed, 17 minutes of real time)."""
    model = GatedModel(1000, 1019)
    model.gaps = {1005, 1010}
    site = make_site(model)
    job = tmp_path / "job.toml"
    job.write_text(f'[defaults]\nstart = 1000\nmargin = {MARGIN}\nwindow = 1\n'
                   f'[[targets]]\nname = "a"\nurl = "{site.url()}"\nlate_every = "6h"\n'
                   f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\nrecrawl_initial = "6h"\n')
    fleet(tmp_path, "walk", redis_server, job, T0, workers=2, resume=None)
    site.log.clear()
    fleet(tmp_path, "late", redis_server, job, T0 + 3600, workers=2)
    assert requests(site) == {"a": [1005, 1010], "b": []}
    model.gaps = set()
    model.gate.clear()
    site.log.clear()
    start, due = T0 + 7 * 3600 - 60, T0 + 7 * 3600 + TICK
    settings = {**settings_of(redis_server), "IDCRAWL_NOW": format_time(start)}
    watchers, codes = two_waves(model, tmp_path, job, settings)  # b's tail, then a's late ids; the next: hours
    for watcher, code in zip(watchers, codes, strict=True):
        assert code == 0 and "Traceback" not in watcher.log, watcher.log[-4000:]
        assert watcher.stats["idcrawl/watch/waves"] == 2
        assert watcher.stats["idcrawl/watch/slept"] == pytest.approx(due - start, abs=1e-6)
    revisits = sorted(set(range(1000, 1020)) - {1005, 1010})  # b's found pages fall due with its tail
    assert requests(site) == {"a": [1005, 1010], "b": [*revisits, *range(1020, 1020 + MARGIN)]}, "each id once"
    assert sorted((i["target"], i["id"]) for w in watchers for i in w.items) == [("a", 1005), ("a", 1010)]
    assert tails(redis_server)["a"].late_at == due
