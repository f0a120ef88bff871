"""Durable state and resume in real crawls: stop, SIGKILL, resume; nothing lost."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from idcrawl.demo.site import Reply
from idcrawl.state import SqliteStateStore
from tests.conftest import FlakyOnce, GapModel
from tests.support.crawl import crawl_command, read_items, run_crawl
from tests.support.reference import target_truth

GAPS = {1010, 1011, 1040, 1041, 1042, 1100, 1101, 1102, 1230, 1231}
ARGS = {"url": None, "start": 1000, "direction": "both", "margin": 5, "min": 900, "name": "reg"}


def args_for(site, **extra: object) -> dict[str, object]:
    return {**ARGS, "url": site.url(), **extra}


class SlowModel(GapModel):
    """A few ms per page, so a crawl lasts long enough to be killed mid-way."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, 0.004)


def state_of(workdir: Path) -> SqliteStateStore:
    return SqliteStateStore(workdir / ".scrapy" / "idcrawl" / "idseq.sqlite")


def test_a_stopped_crawl_resumes_with_the_rest_of_the_bound(make_site, tmp_path: Path) -> None:
    model = GapModel(900, 1299, GAPS)
    site = make_site(model)
    first = run_crawl(tmp_path, args_for(site), {"CLOSESPIDER_PAGECOUNT": 60}, output="run1.jsonl")
    assert first.returncode == 0 and first.stats["finish_reason"] == "closespider_pagecount"
    fetched_first = set(site.ids())
    site.log.clear()
    second = run_crawl(tmp_path, args_for(site, resume="bound"), output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    truth = target_truth(model.exists, 1000, "both", 5, lo=900)
    assert sorted({i["id"] for i in first.items + second.items}) == truth
    # found ids are never fetched again; refetched ids are those in flight at the stop
    again = fetched_first & set(site.ids())
    assert not again & {i["id"] for i in first.items}
    assert len(again) <= 16 + 8  # CONCURRENT_REQUESTS + per-lane slack
    plan = state_of(tmp_path).load("reg")
    assert plan is not None and set(plan.outcomes) >= {"found", "missing"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_with_sigkill_at_any_moment_a_resumed_run_loses_nothing(make_site, tmp_path: Path, seed: int) -> None:
    model = SlowModel(900, 1299, GAPS)
    site = make_site(model)
    kill_after = random.Random(seed).randint(20, 300)  # requests seen by the server before the kill
    command, env = crawl_command(
        tmp_path, args_for(site), {"IDCRAWL_STATE_COMMIT_ITEMS": 20, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.5},
        output="run1.jsonl",
    )
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(site.ids()) < kill_after and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    first = read_items(tmp_path / "run1.jsonl")
    fetched_first = len(site.ids())
    second = run_crawl(tmp_path, args_for(site, resume="bound"), output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    truth = target_truth(model.exists, 1000, "both", 5, lo=900)
    assert sorted({i["id"] for i in first + second.items}) == truth, f"killed after {fetched_first} requests"
    twice = len(site.ids()) - len(set(site.ids()))
    assert twice <= 20 + 16 + 8, "refetched more than a batch plus the requests in flight"
    # the summary's counts are the stats' (found 162 against idcrawl/found 161 before), its emitted the items
    header = next(line for line in second.stderr.splitlines() if "INFO: summary: " in line)
    found, emitted = re.search(r"\(found ([\d,]+), .*; ([\d,]+) emitted\)", header).groups()  # type: ignore[union-attr]
    assert int(found.replace(",", "")) == second.stats.get("idcrawl/found", 0), (header, {k: v for k, v in second.stats.items() if k.startswith("idcrawl/") and "/lanes/" not in k})
    assert int(emitted.replace(",", "")) == second.stats.get("idcrawl/emitted", 0) == len(second.items), header




def test_resume_holes_fetches_exactly_the_failed_holes(make_site, tmp_path: Path) -> None:
    flaky = {1003, 1005, 1020, 995}
    model = FlakyOnce(900, 1299, GAPS, flaky=flaky)
    site = make_site(model)
    first = run_crawl(tmp_path, args_for(site, attempts=1, margin=0, min=980, max=1030), output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["idcrawl/failed"] == len(flaky)
    model.healed = True
    site.log.clear()
    second = run_crawl(tmp_path, args_for(site, attempts=1, margin=0, min=980, max=1030, resume="holes"),
                       output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(site.ids()) == sorted(flaky)
    assert sorted(i["id"] for i in second.items) == sorted(flaky)


def test_resume_with_other_parameters_is_refused(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(900, 1299, GAPS))
    assert run_crawl(tmp_path, args_for(site), {"CLOSESPIDER_PAGECOUNT": 20}).returncode == 0
    site.log.clear()
    result = run_crawl(tmp_path, args_for(site, start=1100, resume="bound"))
    assert result.returncode != 0
    assert "start=1100 differs from the stored state (start=1000)" in result.error_lines()[0]
    assert site.log == []


def test_a_corrupt_state_file_stops_the_crawl_and_is_left_intact(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(900, 1299, GAPS))
    path = tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage" * 1000)
    result = run_crawl(tmp_path, args_for(site, resume="bound"))
    assert result.returncode != 0
    assert "is not an idcrawl state file" in result.error_lines()[0]
    assert path.read_bytes() == b"garbage" * 1000
    assert site.log == []
