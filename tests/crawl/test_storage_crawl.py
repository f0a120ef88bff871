"""A failed write stops the crawl (idcrawl_storage_error) and a later run resumes: real crawls whose feed,
state and JOBDIR are on a small tmpfs the test mounts (root only; CI runs as root)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from idcrawl.core.exits import OTHER, exit_status
from idcrawl.state import SqliteStateStore
from tests.conftest import GapModel
from tests.support.crawl import crawl_command, run_crawl
from tests.support.reference import target_truth
from tests.support.tmpfs import mounted_tmpfs, remount

GAPS = {40, 41, 300, 301, 302, 1500}
ARGS = {"start": 1, "direction": "asc", "margin": 5, "name": "reg", "resume": "bound"}
STORAGE_ERROR = exit_status("idcrawl_storage_error")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 192 KiB tmpfs at tmp_path/disk, unmounted at teardown."""
    with mounted_tmpfs(tmp_path / "disk", "192k") as disk:
        yield disk


def _found(jobdir: Path) -> set[int]:
    plan = SqliteStateStore(jobdir / "idcrawl-state.sqlite", read_only=True).load("reg")
    return set(plan.outcomes.get("found", ())) if plan is not None else set()


def test_a_full_disk_stops_the_crawl_and_the_next_run_resumes(make_site, tmp_path: Path, small_disk: Path) -> None:
    model = GapModel(1, 1200, GAPS)  # its items alone outgrow the disk
    site = make_site(model)
    jobdir = small_disk / "job"
    settings = {"JOBDIR": str(jobdir), "IDCRAWL_STATE_COMMIT_ITEMS": 50}
    first = run_crawl(tmp_path, {**ARGS, "url": site.url()}, settings, output="disk/run1.jsonl")
    assert first.returncode == STORAGE_ERROR, first.stderr[-3000:]
    assert first.stats["finish_reason"] == "idcrawl_storage_error"
    errors = first.error_lines()
    assert len(errors) == 1, errors
    assert str(small_disk) in errors[0], errors[0]
    assert "No space left on device" in errors[0] or "database or disk is full" in errors[0], errors[0]
    assert "Traceback" not in first.stderr
    in_feed = {item["id"] for item in first.items}
    assert in_feed, "the disk filled before any item was written"
    assert _found(jobdir) <= in_feed  # nothing committed found whose item did not reach the feed

    remount(small_disk, "size=64m")  # space freed
    second = run_crawl(tmp_path, {**ARGS, "url": site.url()}, settings, output="disk/run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats["finish_reason"] == "finished"
    assert "Traceback" not in second.stderr and not second.error_lines()
    truth = target_truth(model.exists, 1, "asc", 5)
    assert sorted(in_feed | {item["id"] for item in second.items}) == truth


def test_jobdir_files_left_empty_are_rebuilt_with_one_warning(make_site, tmp_path: Path) -> None:
    """What a full disk left in JOBDIR before: spider.state and requests.queue/active.json empty."""
    model = GapModel(1, 400, GAPS)
    site = make_site(model)
    jobdir = tmp_path / "job"
    settings = {"JOBDIR": str(jobdir)}
    first = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {**settings, "CLOSESPIDER_PAGECOUNT": 50},
                      output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    for name in ("spider.state", "requests.queue/active.json"):
        assert (jobdir / name).exists()
        (jobdir / name).write_bytes(b"")
    (jobdir / "requests.seen").write_bytes(b"0123abc")
    second = run_crawl(tmp_path, {**ARGS, "url": site.url()}, settings, output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Traceback" not in second.stderr and not second.error_lines()
    warnings = [line for line in second.stderr.splitlines() if " WARNING: " in line and "rebuilt" in line]
    assert len(warnings) == 1, second.stderr[-3000:]
    assert "spider.state" in warnings[0] and "requests.queue" in warnings[0] and "requests.seen" in warnings[0]
    truth = target_truth(model.exists, 1, "asc", 5)
    assert sorted({i["id"] for i in first.items} | {i["id"] for i in second.items}) == truth


def test_a_feed_on_a_read_only_file_system_stops_the_crawl(make_site, tmp_path: Path, small_disk: Path) -> None:
    """EROFS (a tmpfs remounted read-only; files open for writing keep a remount from happening mid-crawl)."""
    remount(small_disk, "ro")
    site = make_site(GapModel(1, 400, GAPS))
    jobdir = tmp_path / "job"
    command, env = crawl_command(tmp_path, {**ARGS, "url": site.url()}, {"JOBDIR": str(jobdir)},
                                 output="disk/run1.jsonl")
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == STORAGE_ERROR, result.stderr[-3000:]
    assert json.loads((tmp_path / "stats.json").read_text())["finish_reason"] == "idcrawl_storage_error"
    errors = [line for line in result.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "Read-only file system" in errors[0] and "run1.jsonl" in errors[0], errors
    assert "Traceback" not in result.stderr
    assert not _found(jobdir)  # no item reached a feed: no id is committed found
    runs = SqliteStateStore(jobdir / "idcrawl-state.sqlite", read_only=True).runs()
    assert [run.finish_reason for run in runs] == ["idcrawl_storage_error"]  # the state's disk is sound


# -- the exit status follows the finish reason (idcrawl.core.exits) -------------------------------------


def test_a_finished_crawl_exits_0_and_a_spiders_own_close_reason_exits_non_zero(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1, 200, GAPS))
    args = {**ARGS, "url": site.url()}
    settings = {"SPIDER_MODULES": "idcrawl.spiders,tests.support.closing_spider",
                "IDCRAWL_STATE_PATH": str(tmp_path / "state.sqlite")}
    done = run_crawl(tmp_path, args, settings)
    assert (done.returncode, done.stats["finish_reason"]) == (0, "finished"), done.stderr[-3000:]
    closed = run_crawl(tmp_path, args, {**settings, "IDCRAWL_STATE_PATH": str(tmp_path / "other.sqlite")},
                       spider="closing")
    assert closed.stats.get("finish_reason") == "site_gone", closed.stderr[-3000:]
    assert closed.returncode == OTHER == exit_status("site_gone") != 0


def test_a_bound_the_user_set_exits_0_and_the_deprecated_setting_still_counts(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1, 2000, GAPS))
    args = {**ARGS, "url": site.url()}
    bounded = run_crawl(tmp_path, args, {"CLOSESPIDER_PAGECOUNT": 20, "IDCRAWL_STATE_PATH": str(tmp_path / "a")})
    assert (bounded.returncode, bounded.stats["finish_reason"]) == (0, "closespider_pagecount")
    legacy = run_crawl(tmp_path, args, {"CLOSESPIDER_PAGECOUNT": 20, "IDCRAWL_STATE_PATH": str(tmp_path / "b"),
                                        "IDCRAWL_FAIL_EXIT_CODE": 3, "IDCRAWL_FAIL_REASONS": "closespider_pagecount"})
    assert legacy.returncode == 3, legacy.stderr[-3000:]
    assert "IDCRAWL_FAIL_EXIT_CODE and IDCRAWL_FAIL_REASONS are deprecated" in legacy.stderr
