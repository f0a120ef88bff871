"""Recrawl of found pages in real crawls: conditional revisits, 304 as an outcome, checksums, items of changes.

A local site whose pages change on a known schedule, the clock fixed with ``IDCRAWL_NOW`` (no test
sleeps through simulated days): 100 found pages, 10 changed between two runs.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping
from email.utils import formatdate
from pathlib import Path

import pytest

from idcrawl.core.recrawl import DEFAULT_POLICY
from idcrawl.demo.site import DemoModel, Reply
from idcrawl.state import SqliteStateStore
from tests.support.crawl import run_crawl
from tests.support.states import scrapy

T0 = 1_768_201_200.0  # 2026-01-12T07:00:00Z
DAY = 86_400.0


def at(seconds: float) -> str:
    from idcrawl.core.clock import format_time

    return format_time(seconds)


class ChangingModel(DemoModel):
    """Pages 1..100, all present; ``version[id]`` moves when a page changes. Each version has its own
    ETag and Last-Modified; ``validators`` False: a site that ignores them (always 200 with the body)."""

    def __init__(self, *, validators: bool = True) -> None:
        super().__init__(1, 100, gap_percent=0)
        self.validators = validators
        self.version: dict[int, int] = dict.fromkeys(range(1, 101), 1)
        self.gone: set[int] = set()
        self.conditional: list[int] = []  # ids asked with If-None-Match or If-Modified-Since
        self._lock = threading.Lock()

    def exists(self, id_: int) -> bool:
        return 1 <= id_ <= 100 and id_ not in self.gone

    def page(self, id_: int) -> bytes:
        return super().page(id_).replace(b"</body>", f"<p class='v'>version {self.version[id_]}</p></body>".encode())

    def etag(self, id_: int) -> str:
        return f'"{id_}-v{self.version[id_]}"'

    def last_modified(self, id_: int) -> str:
        return formatdate(T0 - 30 * DAY + self.version[id_] * DAY, usegmt=True)

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        lowered = {k.lower(): v for k, v in headers.items()}
        if "if-none-match" in lowered or "if-modified-since" in lowered:
            with self._lock:
                self.conditional.append(id_)
        if not self.exists(id_):
            return self.reply(id_, host, nth)
        if self.validators and (
            lowered.get("if-none-match") == self.etag(id_) or lowered.get("if-modified-since") == self.last_modified(id_)
        ):
            return Reply(304, b"", (("ETag", self.etag(id_)),))
        return Reply(200, self.page(id_), (
            ("Content-Type", "text/html; charset=utf-8"), ("ETag", self.etag(id_)),
            ("Last-Modified", self.last_modified(id_)),
        ))


ARGS = {"start": 1, "margin": 5, "name": "reg"}


def crawl(site, workdir: Path, now: float, output: str, **extra: object):
    result = run_crawl(workdir, {**ARGS, "url": site.url(), **extra}, {"IDCRAWL_NOW": at(now)}, output=output)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.parametrize("validators", [True, False], ids=["validators", "checksums"])
def test_a_due_run_revisits_100_pages_conditionally_and_emits_the_10_changed(
    make_site, tmp_path: Path, validators: bool
) -> None:
    model = ChangingModel(validators=validators)
    site = make_site(model)
    first = crawl(site, tmp_path, T0, "run1.jsonl")
    assert first.ids == list(range(1, 101))
    assert {item["revision"] for item in first.items} == {1}
    assert all(item["previous_checksum"] is None for item in first.items)
    checksums = {item["id"]: item["checksum"] for item in first.items}
    pages = SqliteStateStore(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite").load_pages("reg")
    assert sorted(pages) == list(range(1, 101))
    assert {p.last_crawled for p in pages.values()} == {T0} and pages[7].etag == model.etag(7)

    changed = sorted(random.Random(17).sample(range(1, 101), 10))  # seeded
    for id_ in changed:
        model.version[id_] += 1
    # scrapy iddue lists the pages the due run revisits (in its order: PageBook.due_ids, as the run's lane)
    listed = json.loads(scrapy(tmp_path, "iddue", "--at", at(T0 + 2 * DAY), "--json").stdout)
    [reg] = listed["targets"]
    assert listed["due"] == ["reg"] and reg["pages"]["records"] == 100
    due_order = reg["pages"]["due"]
    assert sorted(due_order) == list(range(1, 101))
    site.log.clear()
    model.conditional.clear()
    second = crawl(site, tmp_path, T0 + 2 * DAY, "run2.jsonl", resume="due")
    page_requests = [entry for entry in site.log if entry.id is not None and entry.id <= 100]
    assert len(page_requests) == 100 and sorted(model.conditional) == list(range(1, 101))
    assert second.stats["idcrawl/pages/conditional"] == 100
    assert second.stats["idcrawl/pages/due"] == 100
    statuses = sorted(entry.status for entry in page_requests)
    if validators:
        assert statuses == [200] * 10 + [304] * 90
        assert second.stats["idcrawl/pages/not_modified"] == 90
        assert "idcrawl/pages/unchanged" not in second.stats
    else:
        assert statuses == [200] * 100
        assert second.stats["idcrawl/pages/unchanged"] == 90
        assert "idcrawl/pages/not_modified" not in second.stats
    assert second.stats["idcrawl/pages/changed"] == 10
    assert second.ids == changed
    for item in second.items:
        assert item["revision"] == 2
        assert item["previous_checksum"] == checksums[item["id"]] != item["checksum"]
    # a 304 and an unchanged page are found: not failed, not missing
    assert second.stats["idcrawl/lanes/reg:due/found"] == 100
    assert "idcrawl/lanes/reg:due/failed" not in second.stats
    assert "idcrawl/lanes/reg:due/missing" not in second.stats

    # the same moment again: nothing is due, no page is fetched
    site.log.clear()
    third = crawl(site, tmp_path, T0 + 2 * DAY, "run3.jsonl", resume="due")
    assert [entry.id for entry in site.log if entry.id is not None and entry.id <= 100] == []
    assert third.items == []
    listed = json.loads(scrapy(tmp_path, "iddue", "--at", at(T0 + 2 * DAY), "--json").stdout)
    assert listed["targets"][0]["pages"] == {"records": 100, "due": []}


def test_gone_pages_are_counted_leave_the_schedule_after_recrawl_gone_visits_and_stay_found(
    make_site, tmp_path: Path
) -> None:
    model = ChangingModel()
    site = make_site(model)
    crawl(site, tmp_path, T0, "run1.jsonl")
    model.gone |= {3, 4}
    site.log.clear()
    now = T0
    for visit in range(1, 4):  # recrawl_gone: 3 by default
        now += 400 * DAY  # past the longest duration: every page is due
        run = crawl(site, tmp_path, now, f"run{visit + 1}.jsonl", resume="due")
        if visit < 3:
            assert run.stats["idcrawl/pages/gone"] == 2
        else:
            assert run.stats["idcrawl/pages/left_schedule"] == 2
        # 400 days apart, past IDCRAWL_RECRAWL_REFETCH_AFTER (90 days): each revisit is a forced refetch,
        # a 200 with the same body
        assert run.stats["idcrawl/pages/refetched"] == 100 and "idcrawl/pages/conditional" not in run.stats
        assert run.stats["idcrawl/pages/unchanged"] == 98 and run.items == [], visit
        # each page once, by the pages lane only (a tail walking over found ids skips them)
        assert sorted(e.id for e in site.log if e.id is not None and e.id <= 100) == list(range(1, 101))
        site.log.clear()
    store = SqliteStateStore(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite")
    records = store.load_pages("reg")
    assert sorted(records) == list(range(1, 101))  # those that left are kept, off the schedule
    assert {i for i, record in records.items() if record.gone} == {3, 4} and records[3].gone == 3
    state = store.load("reg")
    assert state is not None and {3, 4} <= set(state.outcomes["found"])
    site.log.clear()
    crawl(site, tmp_path, now + 400 * DAY, "run5.jsonl", resume="due")
    assert not {3, 4} & {entry.id for entry in site.log}


class SlowChangingModel(ChangingModel):
    """10 ms per answer, so a due run lasts long enough to be killed mid-way."""

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        reply = super().reply_to(id_, host, nth, headers)
        return Reply(reply.status, reply.body, reply.headers, 0.01)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_due_run_killed_at_any_moment_loses_no_change_and_applies_no_fetch_twice(
    make_site, tmp_path: Path, seed: int
) -> None:
    import signal
    import subprocess
    import time

    from tests.support.crawl import crawl_command, read_items

    model = SlowChangingModel()
    site = make_site(model)
    crawl(site, tmp_path, T0, "run1.jsonl")
    changed = set(random.Random(seed).sample(range(1, 101), 10))  # seeded
    for id_ in changed:
        model.version[id_] += 1
    site.log.clear()
    kill_after = random.Random(seed).randint(10, 90)  # page requests seen before the kill
    now = T0 + 2 * DAY
    command, env = crawl_command(
        tmp_path, {**ARGS, "url": site.url(), "resume": "due"},
        {"IDCRAWL_NOW": at(now), "IDCRAWL_STATE_COMMIT_ITEMS": 5, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.2,
         "CONCURRENT_REQUESTS": 4},
        output="run2.jsonl",
    )
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(site.ids()) < kill_after and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # waits for the crawl process, not for simulated time
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the due run ended before the kill"
    killed_items = read_items(tmp_path / "run2.jsonl")
    rerun = crawl(site, tmp_path, now, "run3.jsonl", resume="due")
    emitted = [item["id"] for item in killed_items + rerun.items]
    assert set(emitted) == changed, f"killed after {kill_after} requests"
    assert all(item["revision"] == 2 for item in killed_items + rerun.items)
    pages = SqliteStateStore(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite").load_pages("reg")
    assert sorted(pages) == list(range(1, 101))
    for id_, page in pages.items():  # each fetch applied once: one motivation or one penalty
        assert page.last_crawled == now
        assert page.revision == (1 if id_ in changed else 0)
        factor = (1 - DEFAULT_POLICY.dec_rate) if id_ in changed else (1 + DEFAULT_POLICY.inc_rate)
        assert page.update_duration == pytest.approx(DEFAULT_POLICY.initial_duration * factor, rel=1e-12)


def test_pages_found_before_page_records_existed_are_due_at_once_and_get_records(make_site, tmp_path: Path) -> None:
    import sqlite3

    model = ChangingModel()
    site = make_site(model)
    crawl(site, tmp_path, T0, "run1.jsonl")
    path = tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite"
    db = sqlite3.connect(path)
    db.execute("DROP TABLE pages")  # a state written before page records
    db.commit()
    db.close()
    site.log.clear()
    model.conditional.clear()
    first_due = crawl(site, tmp_path, T0 + 3600, "run2.jsonl", resume="due")  # records: none, all due at once
    assert sorted(e.id for e in site.log if e.id is not None and e.id <= 100) == list(range(1, 101))
    assert model.conditional == [] and first_due.stats["idcrawl/pages/new"] == 100
    assert first_due.ids == list(range(1, 101))  # no baseline to tell a change by: each once more, revision 1
    assert sorted(SqliteStateStore(path).load_pages("reg")) == list(range(1, 101))
    site.log.clear()
    second_due = crawl(site, tmp_path, T0 + 3600 + 2 * DAY, "run3.jsonl", resume="due")
    assert sorted(model.conditional) == list(range(1, 101)) and second_due.items == []


def test_iddue_at_a_time_lists_exactly_the_tail_and_pages_a_due_run_at_that_time_fetches(
    make_site, tmp_path: Path
) -> None:
    """Pages with three due times and a tail: at each of four times, ``iddue --at T`` names the
    ids a ``resume=due`` run with the clock at T requests, no more, no fewer, the pages in its order."""
    import shutil

    model = ChangingModel()
    site = make_site(model)
    base = tmp_path / "base"
    base.mkdir()
    # window 1, per-host concurrency 1: the tail's requests are exactly its walk (no request past the cut)
    settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}

    def due_run(workdir: Path, now: float, output: str, **extra: object):
        site.log.clear()
        result = run_crawl(workdir, {**ARGS, "url": site.url(), "window": 1, **extra},
                           {"IDCRAWL_NOW": at(now), **settings}, output=output)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    due_run(base, T0, "run1.jsonl")  # every page and the tail: 1 day
    rng = random.Random(1717)  # seeded
    changed = rng.sample(range(1, 101), 10)
    for id_ in changed:
        model.version[id_] += 1
    due_run(base, T0 + 2 * DAY, "run2.jsonl", resume="due")  # 10 pages 0.8 d, 90 pages and the tail 1.8 d
    for id_ in changed[:5]:
        model.version[id_] += 1
    due_run(base, T0 + 3 * DAY, "run3.jsonl", resume="due")  # the 10: 5 changed again 0.64 d, 5 quiet 1.44 d
    # due after: 5 pages T0 + 3.64 d, 90 pages and the tail T0 + 3.8 d, 5 pages T0 + 4.44 d
    fetched_sets = []
    for k, days in enumerate((3.5, 3.7, 3.9, 4.5)):
        now = T0 + days * DAY
        listed = scrapy(base, "iddue", "--at", at(now), "--json")
        assert listed.returncode == 0, listed.stderr
        [reg] = json.loads(listed.stdout)["targets"]
        expected_pages = reg["pages"]["due"]
        tail = reg["tail"]
        expected_tail = list(range(tail["walk_from"], tail["walk_from"] + ARGS["margin"])) if tail["due"] else []
        run_dir = tmp_path / f"at{k}"
        shutil.copytree(base, run_dir)
        run = due_run(run_dir, now, "due.jsonl", resume="due")
        requested = [e.id for e in site.log if e.id is not None]
        assert [i for i in requested if i <= 100] == expected_pages, days  # the pages, in iddue's order
        assert [i for i in requested if i > 100] == expected_tail, days
        assert run.items == []
        fetched_sets.append((len(expected_pages), bool(expected_tail)))
    # the four times see each due group fall due in turn (the test is not vacuous)
    assert fetched_sets == [(0, False), (5, False), (95, True), (100, True)]
