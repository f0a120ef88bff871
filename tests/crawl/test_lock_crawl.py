"""Issue 27, item 2: one process per state. A second crawl of a state (or of a JOBDIR) is refused
in one line naming the holder, sends no request and changes nothing; a killed holder's lock is
taken at once by the next run; ``scrapy idplan`` still reads the state while a crawl runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.crawl import REPO, read_items, run_crawl
from tests.support.gated import SECOND_AGENT, START, GatedModel, gate_args, held_crawl, refused_run
from tests.support.reference import target_truth


def _idplan(tmp_path: Path, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "scrapy", "idplan", "--state", str(state)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


# (settings of both crawls, the state file idplan reads (None: state off), what the refusal names)
CASES = {
    "jobdir": ({"JOBDIR": "job"}, "job/idcrawl-state.sqlite", "JOBDIR 'job' is in use by another crawl"),
    "default state file": ({}, ".scrapy/idcrawl/idseq.sqlite",
                           "state file '.scrapy/idcrawl/idseq.sqlite' is in use by another crawl"),
    "jobdir, state off": ({"JOBDIR": "job", "IDCRAWL_STATE": False}, None, "JOBDIR 'job' is in use by another crawl"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_second_crawl_of_a_state_is_refused_in_one_line_and_sends_no_request(
    make_site, tmp_path: Path, case: str
) -> None:
    settings, state, message = CASES[case]
    model = GatedModel()
    site = make_site(model)
    first = held_crawl(tmp_path, site, model, settings)
    try:
        # the same command, the same -O feed: refused before the feed is opened (not truncated)
        second = refused_run(tmp_path, site, settings)
        plan = _idplan(tmp_path, tmp_path / state) if state else None
    finally:
        model.opened.set()
    first.wait(180)
    first_log = (tmp_path / "first.log").read_text()
    assert first.returncode == 0, first_log[-3000:]

    assert second.returncode != 0
    errors = second.error_lines()
    assert len(errors) == 1, second.stderr[-3000:]
    assert message in errors[0] and f"held by pid {first.pid} on host " in errors[0], errors[0]
    assert "Traceback" not in second.stderr
    assert SECOND_AGENT not in model.agents, "the refused crawl sent a request"
    assert sum(1 for e in site.log if e.path == "/robots.txt") == 1

    ids = [item["id"] for item in read_items(tmp_path / "items.jsonl")]
    assert sorted(ids) == target_truth(model.exists, START, "both", 10), "the first crawl's feed was damaged"
    assert not [id_ for id_, n in Counter(ids).items() if n > 1]
    if plan is not None:  # reading the state while the crawl writes it takes no lock
        assert plan.returncode == 0, plan.stderr[-3000:]
        assert "reg" in plan.stdout


def test_after_a_sigkill_the_next_run_takes_the_lock_at_once(make_site, tmp_path: Path) -> None:
    model = GatedModel()
    site = make_site(model)
    settings = {"JOBDIR": "job"}
    first = held_crawl(tmp_path, site, model, settings)
    first.kill()  # SIGKILL: no clean-up ran, the kernel released the lock
    first.wait(60)
    model.opened.set()
    again = run_crawl(tmp_path, {**gate_args(site), "resume": "bound"}, settings, output="again.jsonl")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"its last holder (pid {first.pid} on host " in again.stderr
    assert "ended without releasing it (killed?); taken over" in again.stderr
    found = {item["id"] for item in read_items(tmp_path / "items.jsonl")} | set(again.ids)
    assert sorted(found) == target_truth(model.exists, START, "both", 10)
    # released at the end: a third run takes it without a word about a killed holder
    third = run_crawl(tmp_path, {**gate_args(site), "resume": "bound"}, settings, output="third.jsonl")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "ended without releasing it" not in third.stderr


def test_a_refused_crawl_leaves_the_holders_jobdir_files_untouched(make_site, tmp_path: Path) -> None:
    """JOBDIR files the holder left unreadable are not the refused process's to rebuild: byte-identical."""
    model = GatedModel()
    site = make_site(model)
    settings = {"JOBDIR": "job"}
    first = held_crawl(tmp_path, site, model, settings)
    try:
        damaged = [tmp_path / "job" / "spider.state", tmp_path / "job" / "requests.queue" / "active.json"]
        for path in damaged:  # as a full disk would leave them: empty (the holder read them at its start)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        second = refused_run(tmp_path, site, settings, output="second.jsonl")
        assert [path.read_bytes() if path.exists() else None for path in damaged] == [b"", b""], \
            "the refused crawl changed the holder's JOBDIR files"
    finally:
        model.opened.set()
    first.wait(180)
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert second.returncode != 0
    (error,) = second.error_lines()
    assert "JOBDIR 'job' is in use by another crawl" in error, error
    assert "rebuilt" not in second.stderr
    assert SECOND_AGENT not in model.agents
