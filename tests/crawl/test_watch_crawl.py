"""Watch mode in real crawls (``-a watch=true``): ``resume=due`` waves in one process, a clean stop on SIGINT.

The clock is fixed (``IDCRAWL_NOW``) and sped up while the crawl sleeps between waves
(``IDCRAWL_WATCH_SPEED``), so no test sleeps through simulated days: the waves' times are exact, and
which wave sends which request is decided by the schedules, not by how fast the machine is.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from idcrawl.core.clock import format_time, parse_time, stamp
from idcrawl.core.recrawl import DAY
from idcrawl.core.watch import TICK
from tests.conftest import GapModel
from tests.crawl.test_input_errors import _assert_refused
from tests.crawl.test_recrawl_crawl import MARGIN, state_of, tails_of
from tests.support.crawl import crawl_command, read_items, run_crawl

T0 = parse_time("2026-01-12T07:00:00Z")
#: clock seconds per real second while asleep: the one-minute sleep before the second wave takes a
#: second, the 0.8-day sleep after it (a's tail motivated) 1,152 s, far longer than the test needs
SPEED = 60
HOSTS = {"127.0.0.1": "a", "localhost": "b"}


def job_file(workdir: Path, site, names: tuple[str, ...] = ("a", "b")) -> Path:
    """Target a on one host name, b on the other (each its own download slot); b's tail first
    falls due after 30 days, so only a's schedule decides when the watch wakes."""
    tables = {
        "a": f'[[targets]]\nname = "a"\nurl = "{site.url()}"\n',
        "b": f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\nrecrawl_initial = "30d"\n',
    }
    path = workdir / f"job-{'-'.join(names)}.toml"
    path.write_text(f"[defaults]\nstart = 1000\nmargin = {MARGIN}\nwindow = 1\n" + "".join(tables[n] for n in names))
    return path


def settings_at(at: float, **more: object) -> dict[str, object]:
    return {"IDCRAWL_NOW": format_time(at), "CONCURRENT_REQUESTS_PER_DOMAIN": 1, **more}


def requests_by_target(site) -> dict[str, list[int]]:
    by: dict[str, list[int]] = {"a": [], "b": []}
    for entry in site.log:
        if entry.id is not None:
            by[HOSTS[entry.host]].append(entry.id)
    return by


def watch_until(workdir: Path, args: dict[str, object], settings: dict[str, object], marker: str,
                timeout: float = 180) -> tuple[int, str]:
    """Start a watching crawl, send one SIGINT (a user's Ctrl-C) once ``marker`` is in its log,
    and return its exit status and log."""
    command, env = crawl_command(workdir, args, settings)
    proc = subprocess.Popen(command, cwd=workdir, env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if marker in line:
                seen.set()
        seen.set()  # the crawl ended on its own: the assertion below shows its log

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen.wait(timeout)
        assert any(marker in line for line in lines), "".join(lines)[-3000:]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=timeout)
        reader.join(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines)


#: settings of a watch without a coalescing window (a wave takes only what is due at its start)
NO_WINDOW = {"IDCRAWL_WATCH_COALESCE": 0, "IDCRAWL_WATCH_COALESCE_SHARE": 0}


def test_a_watching_crawl_runs_two_waves_then_stops_cleanly_on_sigint_and_a_later_run_resumes(
    make_site, tmp_path: Path
) -> None:
    model = GapModel(1000, 1019, set())
    site = make_site(model)
    # a day before, less a minute: a's tail walked (last found 1019), its schedule 1 day from then
    before = run_crawl(tmp_path, {"job": job_file(tmp_path, site, ("a",)), "resume": "due"},
                       settings_at(T0 - DAY + 60))
    assert before.returncode == 0 and before.ids == list(range(1000, 1020)), before.stderr[-3000:]
    model.high = 1024  # the site grew
    site.log.clear()
    job = job_file(tmp_path, site)
    # no coalescing window: a's tail, due a minute into the watch, wakes a wave of its own
    # (tests/unit/test_watch_waves.py and test_watch_waves_crawl.py: the window)
    code, log = watch_until(tmp_path, {"job": job, "watch": "true"},
                            settings_at(T0, IDCRAWL_WATCH_SPEED=SPEED, **NO_WINDOW), "idcrawl: watch: wave 2 done")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    # -O overwrites the earlier run's feed: said once, by the first wave (the second's feed is its own)
    assert log.count("overwrites feed") == 1
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "shutdown"
    assert stats["idcrawl/watch/waves"] == 2
    # a's tail falls due a minute into the watch (its due_at()): the second wave starts a tick later
    second = (T0 - DAY + 60) + DAY + TICK
    assert stats["idcrawl/watch/slept"] == second - T0
    assert stats["idcrawl/watch/next_wave"] == stamp(second + 0.8 * DAY + TICK)
    # wave 1 at T0: b (no state yet) from its start to the margin; a is not due, nothing is sent to its host.
    # wave 2 a minute later: a's tail from its last found id, exactly the new ids and the margin after them
    requests = requests_by_target(site)
    assert requests["b"] == list(range(1000, 1025 + MARGIN))
    # a's found pages fell due with its tail (the same initial duration): the second wave revisits each
    # once (unchanged: no item) beside the tail's walk
    assert [i for i in requests["a"] if i >= 1020] == list(range(1020, 1025 + MARGIN))
    assert sorted(i for i in requests["a"] if i < 1020) == list(range(1000, 1020))
    hosts = [HOSTS[e.host] for e in site.log if e.id is not None]
    assert hosts == ["b"] * len(requests["b"]) + ["a"] * len(requests["a"])  # two waves, one after the other
    items = read_items(tmp_path / "items.jsonl")
    assert sorted((i["target"], i["id"]) for i in items) == [
        *(("a", i) for i in range(1020, 1025)), *(("b", i) for i in range(1000, 1025))]
    assert {i["fetched_at"] for i in items if i["target"] == "b"} == {stamp(T0)}
    assert {i["fetched_at"] for i in items if i["target"] == "a"} == {stamp(second)}
    # the watch session is one run of the state (its row updated at each wave's end, with the wave
    # counters); the schedules are those of the second wave's end
    store = state_of(tmp_path)
    try:
        runs = store.runs()
    finally:
        store.close()
    assert [(r.started_at, r.ended_at, r.finish_reason) for r in runs] == [
        (stamp(T0 - DAY + 60), stamp(T0 - DAY + 60), "finished"), (stamp(T0), stamp(second), "finished")]
    assert runs[0].watch is None
    # b's 25 ids and its margin in wave 1; a's tail (5 new ids, the margin) and its 20 found pages
    # revisited (found again, unchanged) in wave 2: news are the 30 items; fetches, every response
    # (robots.txt too)
    assert stats["downloader/response_count"] >= len(requests["a"]) + len(requests["b"])
    assert runs[1].watch == {"waves": 2, "fetches": stats["downloader/response_count"], "news": 30}
    # the session's totals: wave 1's 25 found ids, wave 2's 25
    assert runs[1].counts["found"] == 50
    tails = tails_of(tmp_path)
    assert (tails["a"].last_crawled, tails["a"].update_duration, tails["a"].last_found, tails["a"].revision) == (
        second, 0.8 * DAY, 1024, 1)
    assert (tails["b"].last_crawled, tails["b"].update_duration, tails["b"].last_found) == (T0, 30 * DAY, 1024)
    # a later resume=due run (no watch) goes on from that state: a is due again, b is not
    model.high = 1026
    site.log.clear()
    later = run_crawl(tmp_path, {"job": job, "resume": "due"}, settings_at(T0 + 2 * DAY))
    assert later.returncode == 0, later.stderr[-3000:]
    assert sorted((i["target"], i["id"]) for i in later.items) == [("a", 1025), ("a", 1026)]
    requests = requests_by_target(site)
    assert requests["b"] == []
    # a's tail from 1025, and its found pages, all due again (revisited a minute into the watch, or found then)
    assert [i for i in requests["a"] if i >= 1025] == list(range(1025, 1027 + MARGIN))
    assert sorted(i for i in requests["a"] if i < 1025) == list(range(1000, 1025))


def test_a_watch_with_nothing_left_to_fall_due_ends_after_its_wave(make_site, tmp_path: Path) -> None:
    """A bounded lane that reached its max has no tail, and one that found nothing no found page to
    revisit: nothing will ever fall due, the crawl ends. (A found page would fall due: its revisit.)"""
    site = make_site(GapModel(1000, 1019, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 2000, "max": 2005, "name": "a", "watch": "true"},
                       settings_at(T0, IDCRAWL_WATCH_SPEED=SPEED))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == [] and [e.id for e in site.log if e.id is not None] == list(range(2000, 2006))
    assert result.stats["finish_reason"] == "finished" and result.stats["idcrawl/watch/waves"] == 1
    assert "idcrawl: watch: wave 1 done; nothing will fall due again, the crawl ends" in result.stderr


@pytest.mark.parametrize(("args", "settings", "message"), [
    ({"watch": "maybe"}, {}, "watch='maybe': must be true or false"),
    ({"watch": "true", "resume": "bound"}, {},
     "resume='bound': watch=true runs resume=due waves (leave resume unset or give due)"),
    ({"watch": "true"}, {"IDCRAWL_NOW": None, "IDCRAWL_WATCH_SPEED": 60},
     "IDCRAWL_WATCH_SPEED=60: needs a fixed clock (IDCRAWL_NOW); the real clock runs at speed 1"),
    ({}, {"IDCRAWL_WATCH": True, "IDCRAWL_STATE": False}, "watch=true needs the state (IDCRAWL_STATE = True)"),
    ({}, {"IDCRAWL_WATCH_SPEED": 0}, "IDCRAWL_WATCH_SPEED"),
])
def test_bad_watch_input_is_refused_in_one_line_before_any_request(
    make_site, tmp_path: Path, args: dict[str, object], settings: dict[str, object], message: str
) -> None:
    site = make_site(GapModel(1000, 1019, set()))
    merged = {key: value for key, value in settings_at(T0, **settings).items() if value is not None}
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1000, **args}, merged)
    _assert_refused(result, message)
    assert site.log == []
    assert not (tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite").exists()


def test_limits_apply_per_process_a_domain_a_limit_stopped_stays_stopped_in_later_waves(
    make_site, tmp_path: Path
) -> None:
    """PLmax 13 per domain: a's domain stops in the first wave (its tail not walked to its margin,
    so it stays due); the second wave, woken by b's schedule, plans a's tail again and closes it at
    once (no request, no hang); b walks its tail within its page loads. b's huge inc_rate makes the
    sleep after its quiet second wave 1,001 minutes (1,001 s of real time): the SIGINT comes first."""
    site = make_site(GapModel(1000, 1019, set()))
    job = tmp_path / "job.toml"
    job.write_text(
        f"[defaults]\nmargin = {MARGIN}\nwindow = 1\n"
        f'[[targets]]\nname = "a"\nurl = "{site.url()}"\nstart = 1000\n'
        f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\nstart = 1017\n'
        'recrawl_initial = "1m"\nrecrawl_inc_rate = 1000\n')
    code, log = watch_until(tmp_path, {"job": job, "watch": "true"},
                            settings_at(T0, IDCRAWL_WATCH_SPEED=SPEED, IDCRAWL_LIMIT_PLMAX=13),
                            "idcrawl: watch: wave 2 done")
    assert code == 0 and "Traceback" not in log, log[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "shutdown" and stats["idcrawl/watch/waves"] == 2
    assert stats["idcrawl/lanes/a:asc/cut_reason"] == "limit:PLmax"
    requests = requests_by_target(site)
    assert requests["a"] == list(range(1000, 1013))  # the first wave's 13 page loads, none after
    wave_1, wave_2 = requests["b"][:3 + MARGIN], requests["b"][3 + MARGIN:]
    assert wave_1 == list(range(1017, 1020 + MARGIN))
    # the second wave: b's tail walked to its margin, and b's found pages (due with it: the same initial
    # duration) revisited once each; b's 12 page loads in all stay under the limit (counted per process),
    # so how far a limit would let the two lanes of b's wave go never comes into it
    assert [i for i in wave_2 if i >= 1020] == list(range(1020, 1020 + MARGIN))
    assert sorted(i for i in wave_2 if i < 1020) == [1017, 1018, 1019]
    tails = tails_of(tmp_path)
    assert set(tails) == {"b"} and tails["b"].update_duration == 60 * 1001


def test_a_due_re_probe_of_late_ids_wakes_a_wave_of_its_own(make_site, tmp_path: Path) -> None:
    """``late_every = 6h``, the tail's interval a day: the watch's first wave (an hour after the pre-run)
    re-probes the late ids, and the next wave comes when the re-probe falls due again (6 h later, a
    tick after), not with the tail a day after the pre-run."""
    model = GapModel(1000, 1019, {1005, 1010})
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "margin": 3, "name": "reg", "resume": "due", "late_every": "6h"}
    before = run_crawl(tmp_path, {**args, "late_every": "0"}, settings_at(T0))
    assert before.returncode == 0, before.stderr[-3000:]
    model.gaps -= {1010}  # published late, below the last found id
    site.log.clear()
    code, log = watch_until(tmp_path, {**args, "watch": "true"},
                            settings_at(T0 + 3600, IDCRAWL_WATCH_SPEED=6 * 3600, **NO_WINDOW),
                            "idcrawl: watch: wave 2 done")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["idcrawl/watch/waves"] == 2
    assert stats["idcrawl/watch/slept"] == pytest.approx(6 * 3600 + TICK, abs=1e-6)  # the re-probe due: wave 2
    assert [e.id for e in site.log if e.id is not None] == [1010, 1005, 1005]  # each wave: the late ids
    assert [i["id"] for i in read_items(tmp_path / "items.jsonl")] == [1010]
