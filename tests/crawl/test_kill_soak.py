"""SIGKILL soak: a crawl killed 6 times at seeded moments and resumed each time with resume=bound.

What every run checks holds for any kill moment, so the seeds pick which
moments are exercised, never whether the test passes:

- nothing lost: the union of the runs' feeds holds every existing id;
- IDCRAWL_STATE_EMIT_ONCE off: a kill leaves the found ids written to the feed
  since the last commit to be emitted again by later runs: at most
  IDCRAWL_STATE_COMMIT_ITEMS, since the recorder commits once that many
  outcomes (found ids included) have gathered; a kill between the flush of the
  feeds and the commit of a full batch leaves exactly that many;
- on (the default): each id once over all the feeds. The ids written after the
  last commit are past the run's feed marks and read back; the kill can also
  cut the last line, whose id is then not in that feed (not readable) and is
  fetched again.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from idcrawl.core.lanes import Outcome
from idcrawl.state import SqliteStateStore
from tests.support.crawl import crawl_command, read_items, run_crawl
from tests.support.killsoak import SlowDemo, kill_soak
from tests.support.reference import target_truth

BATCH = 40
KILLS = 6
ARGS = {"start": 10_250, "direction": "both", "margin": 10, "name": "soak"}


def soak_site(make_site):  # type: ignore[no-untyped-def]
    model = SlowDemo(10_000, 10_499, delay=0.004)
    return model, make_site(model)


def truth(model: SlowDemo) -> list[int]:
    return target_truth(model.exists, 10_250, "both", 10)


@pytest.mark.parametrize("seed", [12])
def test_without_emit_once_a_kill_repeats_at_most_one_commit_batch(make_site, tmp_path: Path, seed: int) -> None:
    model, site = soak_site(make_site)
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, "IDCRAWL_STATE_COMMIT_INTERVAL": 0,
                "IDCRAWL_STATE_EMIT_ONCE": False}
    soak = kill_soak(tmp_path, site, {**ARGS, "url": site.url()}, settings, seed=seed, kills=KILLS,
                     between=(25, 70))
    assert soak.final_returncode == 0, soak.final_stderr[-3000:]
    assert soak.killed >= 5, f"kill points {soak.kill_points}; runs that ended by themselves: {soak.ended} {soak.logs}"
    assert sorted({id_ for _, id_ in soak.copies()}) == truth(model), "an id was lost"
    for k, run in enumerate(soak.runs[:-1]):
        again = {i["id"] for i in run} & {i["id"] for later in soak.runs[k + 1:] for i in later}
        assert len(again) <= BATCH, f"kill {k} (after {soak.kill_points[k]} requests) repeated {len(again)} ids"
    assert soak.duplicates <= KILLS * BATCH


@pytest.mark.parametrize("seed", [7])
def test_with_emit_once_each_id_is_in_the_feeds_once(make_site, tmp_path: Path, seed: int) -> None:
    model, site = soak_site(make_site)
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.5}
    soak = kill_soak(tmp_path, site, {**ARGS, "url": site.url()}, settings, seed=seed, kills=KILLS,
                     between=(25, 70))
    assert soak.final_returncode == 0, soak.final_stderr[-3000:]
    assert soak.killed >= 5, f"kill points {soak.kill_points}; runs that ended by themselves: {soak.ended} {soak.logs}"
    assert sorted({id_ for _, id_ in soak.copies()}) == truth(model), "an id was lost"
    twice = {key: n for key, n in soak.copies().items() if n > 1}
    assert not twice, f"emitted more than once: {sorted(twice)[:20]} (kill points {soak.kill_points})"


def test_with_emit_once_and_one_feed_appended_to_by_every_run_each_id_is_in_it_once(
    make_site, tmp_path: Path
) -> None:
    model, site = soak_site(make_site)
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH}
    soak = kill_soak(tmp_path, site, {**ARGS, "url": site.url()}, settings, seed=11, kills=3, between=(40, 120),
                     append=True)
    assert soak.final_returncode == 0, soak.final_stderr[-3000:]
    items = read_items(tmp_path / "items.jsonl")
    assert sorted(i["id"] for i in items) == truth(model), f"kill points {soak.kill_points}"


def test_a_run_appending_to_a_feed_a_kill_cut_short_keeps_its_first_item_readable(
    make_site, tmp_path: Path
) -> None:
    model, site = soak_site(make_site)
    feed = tmp_path / "items.jsonl"
    feed.write_bytes(b'{"target": "soak", "id": 10250, "url": "http://127.0.0.1/no')  # cut by a kill
    args = {**ARGS, "url": site.url(), "min": 10_230, "max": 10_270}
    command, env = crawl_command(tmp_path, args, output="items.jsonl", overwrite=False)
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ended with a line cut short" in proc.stderr
    lines = feed.read_bytes().split(b"\n")
    assert lines[0].startswith(b'{"target": "soak", "id": 10250, "url": "http://127.0.0.1/no')
    expected = target_truth(model.exists, 10_250, "both", 10, lo=10_230, hi=10_270)
    assert sorted(item["id"] for item in read_items(feed)) == expected
    assert all(json.loads(line) for line in lines[1:] if line)


def test_with_several_items_per_id_no_feed_is_read_back_and_no_item_is_lost(make_site, tmp_path: Path) -> None:
    """Reading back a feed would take an id whose first item was written for done: its second is lost."""
    model, site = soak_site(make_site)
    spider = Path(__file__).parents[1] / "support" / "two_items_spider.py"
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, "IDCRAWL_STATE_PATH": str(tmp_path / "state.sqlite")}
    args = {**ARGS, "url": site.url()}
    soak = kill_soak(tmp_path, site, args, settings, seed=5, kills=2, between=(60, 150), runspider=spider)
    assert soak.final_returncode == 0, soak.final_stderr[-3000:]
    parts = {(i["id"], i["part"]) for i in soak.items}
    assert parts == {(id_, part) for id_ in truth(model) for part in (1, 2)}, "an item was lost"
    store = SqliteStateStore(tmp_path / "state.sqlite", read_only=True)
    marks = store.feed_marks()
    store.close()
    assert marks is not None and set(marks.offsets.values()) == {-1}


def test_a_resumed_run_that_overwrites_the_killed_runs_feed_fetches_its_tail_again(
    make_site, tmp_path: Path
) -> None:
    """-O onto the killed run's file destroys it: its tail must not count as found."""
    _model, site = soak_site(make_site)
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, "IDCRAWL_STATE_PATH": str(tmp_path / "state.sqlite")}
    args = {**ARGS, "url": site.url()}
    command, env = crawl_command(tmp_path, args, settings, output="items.jsonl")
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while len(site.log) < 150 and proc.poll() is None:
        time.sleep(0.002)
    proc.kill()
    proc.wait(timeout=30)
    store = SqliteStateStore(tmp_path / "state.sqlite", read_only=True)
    marks = store.feed_marks()
    store.close()
    assert marks is not None
    feed = tmp_path / "items.jsonl"
    with feed.open("rb") as file:
        file.seek(marks.offsets[str(feed)])
        tail = {item["id"] for item in (json.loads(line) for line in file if line.endswith(b"\n"))}
    second = run_crawl(tmp_path, {**args, "resume": "bound"}, settings, output="items.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "this run overwrites feed" in second.stderr
    assert tail <= set(second.ids), "ids of the overwritten tail were taken for found"
    assert "idcrawl/resume/recovered_from_feed" not in second.stats


def test_a_run_with_two_feeds_does_not_read_them_back(make_site, tmp_path: Path) -> None:
    """An id read back from one feed could be missing from the other: both stay at least once."""
    _model, site = soak_site(make_site)
    settings = {"IDCRAWL_STATE_PATH": str(tmp_path / "state.sqlite")}
    args = {**ARGS, "url": site.url(), "min": 10_230, "max": 10_270}
    command, env = crawl_command(tmp_path, args, settings, output="a.jsonl", overwrite=False)
    command += ["-o", f"{tmp_path / 'b.jsonl'}:jsonlines"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = SqliteStateStore(tmp_path / "state.sqlite", read_only=True)
    marks = store.feed_marks()
    store.close()
    assert marks is not None
    assert marks.offsets == {str(tmp_path / "a.jsonl"): -1, str(tmp_path / "b.jsonl"): -1}


def killed_after(tmp_path: Path, site, args: dict, settings: dict, requests: int) -> int:  # type: ignore[no-untyped-def,type-arg]
    """A run appending to ``items.jsonl``, SIGKILLed once the site saw ``requests`` requests; its exit status
    (0: it ended by itself first)."""
    command, env = crawl_command(tmp_path, args, settings, output="items.jsonl", overwrite=False)
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while len(site.log) < requests and proc.poll() is None:
        time.sleep(0.002)
    proc.kill()
    return proc.wait(timeout=30)


def test_a_foreign_job_appending_to_the_feed_is_skipped_and_no_id_is_lost(make_site, tmp_path: Path) -> None:
    foreign_job_appends(make_site, tmp_path, {"IDCRAWL_STATE_PATH": str(tmp_path / "a.sqlite")},
                        {"IDCRAWL_STATE_PATH": str(tmp_path / "b.sqlite")})


def foreign_job_appends(make_site, tmp_path: Path, state_a: dict[str, str], state_b: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """Job B (its own state, another site, the same target name) appends to killed job A's feed: A resumed
    reads back only its own lines, says how many it skipped, and every id of A ends in the feed once."""
    model, site = soak_site(make_site)
    other = make_site(SlowDemo(10_000, 10_499, delay=0))
    feed = tmp_path / "items.jsonl"
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, **state_a}
    args = {**ARGS, "url": site.url()}
    assert killed_after(tmp_path, site, args, settings, 150) != 0, "job A ended before its kill"
    foreign = run_crawl(tmp_path, {**ARGS, "url": other.url()}, state_b, output="items.jsonl", overwrite=False)
    assert foreign.returncode == 0, foreign.stderr[-3000:]
    appended = [item for item in foreign.items if item["url"].startswith(f"http://127.0.0.1:{other.port}/")]
    assert appended, "job B appended nothing"
    resumed = run_crawl(tmp_path, {**args, "resume": "bound"}, settings, output="items.jsonl", overwrite=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    mine = [item["id"] for item in read_items(feed) if item["url"].startswith(f"http://127.0.0.1:{site.port}/")]
    assert sorted(mine) == truth(model), "an id of job A was lost or emitted twice"
    assert resumed.stats.get("idcrawl/resume/foreign_feed_lines") == len(appended)
    warnings = [line for line in resumed.stderr.splitlines() if "not this job's" in line]
    assert len(warnings) == 1 and " WARNING: " in warnings[0] and f" {len(appended)} " in warnings[0]


def test_a_second_job_of_the_same_site_appending_is_taken_only_for_ids_not_found_before(
    make_site, tmp_path: Path
) -> None:
    """Job B crawls the same site as killed job A (same target, same template, its own state) into A's feed:
    its lines of ids A had found before its kill are not A's (skipped); the others are items of A's own
    pages and stand for them. Every id of the site is in the feed, and A emits none that B wrote."""
    model, site = soak_site(make_site)
    feed = tmp_path / "items.jsonl"
    settings = {"IDCRAWL_STATE_COMMIT_ITEMS": BATCH, "IDCRAWL_STATE_PATH": str(tmp_path / "a.sqlite")}
    args = {**ARGS, "url": site.url()}
    assert killed_after(tmp_path, site, args, settings, 150) != 0, "job A ended before its kill"
    store = SqliteStateStore(tmp_path / "a.sqlite", read_only=True)
    state = store.load("soak")
    store.close()
    found_before = set(state.outcomes.get(Outcome.FOUND, ())) if state is not None else set()
    before = len(read_items(feed))
    second = run_crawl(tmp_path, args, {"IDCRAWL_STATE_PATH": str(tmp_path / "b.sqlite")}, output="items.jsonl",
                       overwrite=False)
    assert second.returncode == 0, second.stderr[-3000:]
    written_by_b = {item["id"] for item in read_items(feed)[before:]}
    resumed = run_crawl(tmp_path, {**args, "resume": "bound"}, settings, output="items.jsonl", overwrite=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted({item["id"] for item in read_items(feed)}) == truth(model), "an id was lost"
    emitted_by_a = [item["id"] for item in read_items(feed)[before + len(written_by_b):]]
    assert not set(emitted_by_a) & written_by_b, "job A emitted again what job B wrote for its pages"
    assert resumed.stats.get("idcrawl/resume/foreign_feed_lines") == len(written_by_b & found_before)
