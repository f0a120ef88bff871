"""Adaptive recrawl of target tails in real crawls (issue 17): schedule records, ``resume=due``, a fixed clock.

The site's ids grow between runs (``model.high``); the clock is fixed with ``IDCRAWL_NOW`` and moved by
the test between runs, so no test sleeps through simulated days.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from idcrawl.core.clock import format_time, parse_time
from idcrawl.core.recrawl import DAY, Kind, Schedule
from idcrawl.state import SqliteStateStore
from tests.conftest import GapModel
from tests.crawl.test_resume_crawl import SlowModel
from tests.support.crawl import CrawlResult, crawl_command, read_items, run_crawl
from tests.support.states import scrapy

T0 = parse_time("2026-01-12T07:00:00Z")
MARGIN = 3


def state_of(workdir: Path) -> SqliteStateStore:
    return SqliteStateStore(workdir / ".scrapy" / "idcrawl" / "idseq.sqlite", read_only=True)


def tails_of(workdir: Path) -> dict[str, Schedule]:
    store = state_of(workdir)
    try:
        return store.tail_schedules()
    finally:
        store.close()


def crawl(workdir: Path, site, at: float, **args: object) -> CrawlResult:
    result = run_crawl(
        workdir,
        {"url": site.url(), "start": 1000, "margin": MARGIN, "name": "reg", **args},
        {"IDCRAWL_NOW": format_time(at), "CONCURRENT_REQUESTS_PER_DOMAIN": 1},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_a_run_that_walks_the_tail_to_its_margin_records_its_schedule_on_the_one_clock(
    make_site, tmp_path: Path
) -> None:
    model = GapModel(1000, 1019, set())
    site = make_site(model)
    first = crawl(tmp_path, site, T0)
    assert first.ids == list(range(1000, 1020))
    assert {item["fetched_at"] for item in first.items} == {"2026-01-12T07:00:00.000Z"}
    assert tails_of(tmp_path) == {"reg": Schedule(Kind.TAIL, "reg", T0, DAY, last_found=1019)}
    store = state_of(tmp_path)
    assert [(r.started_at, r.ended_at) for r in store.runs()] == [("2026-01-12T07:00:00.000Z",) * 2]
    store.close()
    # a day and a half later, no new ids: penalised (x 1.8); then three new ids: motivated (x 0.8)
    crawl(tmp_path, site, T0 + 1.5 * DAY, resume="bound")
    assert tails_of(tmp_path)["reg"] == Schedule(Kind.TAIL, "reg", T0 + 1.5 * DAY, DAY * 1.8, last_found=1019)
    model.high = 1022
    again = crawl(tmp_path, site, T0 + 3.5 * DAY, resume="bound")
    assert again.ids == [1020, 1021, 1022]
    assert tails_of(tmp_path)["reg"] == Schedule(Kind.TAIL, "reg", T0 + 3.5 * DAY, DAY * 1.8 * 0.8,
                                                 last_found=1022, revision=1)


def two_tails(workdir: Path, site, **keys: object) -> Path:
    """A job file with two targets on the site, one per host name (each its own download slot).

    The default window unless a ``window`` key is given: at per-host concurrency 1 Scrapy frees a
    download slot when the response has arrived, before the spider has parsed it, so a lane that
    speculated past its earliest possible cut would send one request past the cut (``idcrawl/past_cut``);
    a lane of a sequential slot does not (``Frontier(sequential=...)``), so the requests are exactly the
    walk's with any window."""
    extra = "".join(f"{key} = {value!r}\n" for key, value in keys.items()).replace("'", '"')
    path = workdir / "job.toml"
    path.write_text(f"[defaults]\nstart = 1000\nmargin = {MARGIN}\n{extra}"
                    f'[[targets]]\nname = "a"\nurl = "{site.url()}"\n'
                    f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\n')
    return path


def due_run(workdir: Path, site, at: float, job: Path) -> CrawlResult:
    site.log.clear()
    result = run_crawl(workdir, {"job": job, "resume": "due"},
                       {"IDCRAWL_NOW": format_time(at), "CONCURRENT_REQUESTS_PER_DOMAIN": 1})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def page_requests(site, host: str | None = None) -> list[int]:
    return [e.id for e in site.log if e.id is not None and (host is None or e.host == host)]


def test_resume_due_sends_no_request_before_a_tail_is_due_and_margin_requests_when_due(
    make_site, tmp_path: Path
) -> None:
    model = GapModel(1000, 1019, set())
    site = make_site(model)
    job = two_tails(tmp_path, site)
    first = due_run(tmp_path, site, T0, job)  # no state yet: a fresh crawl, the tails' schedules start
    assert first.ids == sorted([*range(1000, 1020)] * 2)
    assert set(tails_of(tmp_path)) == {"a", "b"}
    # not due (now - last_crawled <= 1 day, the initial duration): nothing at all reaches the site
    for at in (T0 + 3600, T0 + DAY):
        quiet = due_run(tmp_path, site, at, job)
        assert site.log == [] and quiet.items == [], at
        assert quiet.stats.get("downloader/request_count", 0) == 0
    assert {s.last_crawled for s in tails_of(tmp_path).values()} == {T0}
    # due, no new ids: exactly the margin's ids after last_found, per tail, at per-host concurrency 1
    due = due_run(tmp_path, site, T0 + DAY + 1, job)
    assert due.items == []
    assert due.stats.get("idcrawl/past_cut", 0) == 0, "nothing sent past a cut"
    for host in ("127.0.0.1", "localhost"):
        # the found pages fell due at the same time (the same initial duration): revisited once each
        requests = page_requests(site, host)
        assert [id_ for id_ in requests if id_ > 1019] == [1020, 1021, 1022], host
        assert sorted(id_ for id_ in requests if id_ <= 1019) == list(range(1000, 1020)), host
    assert {e.path for e in site.log if e.id is None} <= {"/robots.txt"}
    assert {name: (s.last_crawled, s.update_duration, s.last_found) for name, s in tails_of(tmp_path).items()} == {
        name: (T0 + DAY + 1, DAY * 1.8, 1019) for name in ("a", "b")
    }


@pytest.mark.parametrize("window", [None, 1], ids=["default-window", "window-1"])
def test_a_due_tail_alone_sends_exactly_margin_requests_at_per_host_concurrency_one(
    make_site, tmp_path: Path, window: int | None
) -> None:
    """No found page due with it (their revisits would take the slot while the tail's last miss is parsed,
    and hide a request past the cut): a due run with no new ids sends exactly the margin's ids per tail,
    with the default window too (the next id past the earliest possible cut waits for that parse)."""
    model = GapModel(1000, 1009, set())
    site = make_site(model)
    job = two_tails(tmp_path, site, **({} if window is None else {"window": window}))
    due_run(tmp_path, site, T0, job)  # tails and pages 1000..1009: last crawled T0, 1 day
    model.high = 1019
    grown = due_run(tmp_path, site, T0 + DAY + 1, job)  # news: the tails 0.8 day; pages 1000..1009 1.8 days
    assert sorted(i["id"] for i in grown.items) == sorted([*range(1010, 1020)] * 2)
    at = T0 + 1.9 * DAY  # the tails are due, no page is
    alone = due_run(tmp_path, site, at, job)
    assert alone.items == []
    for host in ("127.0.0.1", "localhost"):
        assert page_requests(site, host) == [1020, 1021, 1022], host
    assert alone.stats.get("idcrawl/past_cut", 0) == 0, "nothing sent past a cut"
    assert {name: (s.last_crawled, s.last_found) for name, s in tails_of(tmp_path).items()} == {
        name: (at, 1019) for name in ("a", "b")}


def test_a_site_whose_ids_grow_between_runs_gives_exactly_the_new_ids_each_run(make_site, tmp_path: Path) -> None:
    model = GapModel(1000, 1009, {1004})
    site = make_site(model)
    job = two_tails(tmp_path, site)
    at = T0
    due_run(tmp_path, site, at, job)
    seen = {i for i in range(1000, 1010) if i != 1004}
    for grown, gaps in ((1012, {1011}), (1012, set()), (1020, {1014, 1015}), (1021, set())):
        model.high = grown
        model.gaps |= gaps
        new = [i for i in range(max(seen) + 1, grown + 1) if model.exists(i)]
        at = max(s.due_at() for s in tails_of(tmp_path).values()) + 1
        result = due_run(tmp_path, site, at, job)
        assert sorted(i["id"] for i in result.items if i["target"] == "a") == new
        assert sorted(i["id"] for i in result.items if i["target"] == "b") == new
        # each tail: from last_found + 1 to the margin past the new last found id, each id once
        last = max(seen | set(new))
        # (found pages that fell due too are revisited: unchanged, no item)
        tail_requests = [id_ for id_ in page_requests(site, "127.0.0.1") if id_ > max(seen)]
        assert tail_requests == list(range(max(seen) + 1, last + MARGIN + 1))
        seen |= set(new)
        assert {s.last_found for s in tails_of(tmp_path).values()} == {last}


def test_durations_move_by_the_documented_factors_and_reach_max_and_min_exactly(make_site, tmp_path: Path) -> None:
    model = GapModel(1000, 1004, set())
    site = make_site(model)
    keys = {"recrawl_initial": "1h", "recrawl_max": "2h", "recrawl_min": "40m", "recrawl_inc_rate": "0.5",
            "recrawl_dec_rate": "0.5", "window": 1}
    crawl(tmp_path, site, T0, **keys)
    durations = [tails_of(tmp_path)["reg"].update_duration]
    # three quiet runs (penalised x 1.5, up to the max), three with news (motivated x 0.5, down to the min)
    for news in (False, False, False, True, True, True):
        if news:
            model.high += 1
        tail = tails_of(tmp_path)["reg"]
        result = crawl(tmp_path, site, tail.due_at() + 1, resume="due", **keys)
        assert result.ids == ([model.high] if news else [])
        durations.append(tails_of(tmp_path)["reg"].update_duration)
    assert durations == [3600.0, 5400.0, 7200.0, 7200.0, 3600.0, 2400.0, 2400.0]
    assert tails_of(tmp_path)["reg"].revision == 3


def test_iddue_at_a_time_lists_exactly_what_a_due_run_at_that_time_fetches(make_site, tmp_path: Path) -> None:
    model = GapModel(1000, 1019, set())
    site = make_site(model)
    base = tmp_path / "base"
    base.mkdir()
    job = two_tails(base, site)
    due_run(base, site, T0, job)  # both tails: last crawled T0, 1 day
    only_a = base / "a.toml"
    only_a.write_text(job.read_text().split('[[targets]]\nname = "b"')[0])
    due_run(base, site, T0 + 1.5 * DAY, only_a)  # a: last crawled T0 + 1.5 d, 1.8 d; b as it was
    hosts = {"127.0.0.1": "a", "localhost": "b"}
    for k, at in enumerate((T0 + 0.5 * DAY, T0 + 1.2 * DAY, T0 + 3.35 * DAY, T0 + 3.25 * DAY)):
        listed = scrapy(base, "iddue", "--at", format_time(at), "--json")
        assert listed.returncode == 0, listed.stderr
        document = json.loads(listed.stdout)
        run_dir = tmp_path / f"at{k}"
        shutil.copytree(base, run_dir)
        due_run(run_dir, site, at, job)
        fetched = sorted({hosts[e.host] for e in site.log if e.id is not None})
        assert sorted(document["due"]) == fetched, (format_time(at), document)
        # most overdue first
        assert document["due"] == sorted(document["due"], key=lambda n: -next(
            t["tail"]["overdue"] for t in document["targets"] if t["name"] == n))
    text = scrapy(base, "iddue", "--at", format_time(T0 + 1.2 * DAY))
    assert "1 of 2 targets due" in text.stdout and "1d 19h 12m" in text.stdout, text.stdout
    bad = scrapy(base, "iddue", "--at", "soon")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "iddue: error: --at='soon': must be an ISO 8601 time such as 2026-01-12T07:00:00Z"]
    unknown = scrapy(base, "iddue", "c")
    assert unknown.returncode == 1 and "unknown target 'c'" in unknown.stderr and "Traceback" not in unknown.stderr


def test_a_due_run_killed_with_sigkill_updates_no_duration_and_the_rerun_applies_it_once(
    make_site, tmp_path: Path
) -> None:
    model = SlowModel(1000, 1009, set())
    site = make_site(model)
    crawl(tmp_path, site, T0)
    model.high = 2000  # 991 new ids, a few ms each: the due run is killed a sixth of the way
    at = T0 + DAY + 1
    command, env = crawl_command(
        tmp_path, {"url": site.url(), "start": 1000, "margin": MARGIN, "name": "reg", "resume": "due"},
        {"IDCRAWL_NOW": format_time(at), "IDCRAWL_STATE_COMMIT_ITEMS": 20, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.5},
        output="run1.jsonl",
    )
    site.log.clear()
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(site.ids()) < 150 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(site.ids()) >= 150 and max(site.ids()) < 2000  # killed mid-way
    first = read_items(tmp_path / "run1.jsonl")
    assert tails_of(tmp_path)["reg"] == Schedule(Kind.TAIL, "reg", T0, DAY, last_found=1009)  # untouched
    rerun = crawl(tmp_path, site, at, resume="due")  # the same clock: still due, and applied once
    assert {i["id"] for i in first} | set(rerun.ids) == set(range(1010, 2001))
    assert tails_of(tmp_path)["reg"] == Schedule(Kind.TAIL, "reg", at, DAY * 0.8, last_found=2000, revision=1)
    site.log.clear()
    again = crawl(tmp_path, site, at, resume="due")  # a rerun at the same time: not due, nothing moves
    assert site.log == [] and again.items == []
    assert tails_of(tmp_path)["reg"] == Schedule(Kind.TAIL, "reg", at, DAY * 0.8, last_found=2000, revision=1)
