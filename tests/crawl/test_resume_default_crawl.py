"""The default ``resume=auto``: the same command run again continues from the stored state (Scrapy's
JOBDIR habit); only ``resume=reset`` starts over, and says at WARNING what it forgets."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import crawl_command, read_items, run_crawl
from tests.support.reference import target_truth
from tests.support.states import snapshot

GAPS = {1010, 1011, 1040, 1041, 1042, 1100, 1101, 1102, 1230, 1231}
ARGS = {"start": 1000, "direction": "both", "margin": 5, "min": 900, "name": "reg"}


class SlowModel(GapModel):
    """A few ms per page, so a crawl lasts long enough to be stopped mid-way."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, 0.004)


def same_command(tmp_path: Path, site) -> tuple[list[str], dict[str, str]]:
    """``scrapy crawl idseq -a url=... -s JOBDIR=job -o items.jsonl``: no resume word, appending to one feed."""
    return crawl_command(tmp_path, {**ARGS, "url": site.url()}, {"JOBDIR": str(tmp_path / "job")},
                         output="items.jsonl", overwrite=False)


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_the_same_command_after_a_stop_continues_and_then_looks_past_the_last_found_id(
    make_site, tmp_path: Path
) -> None:
    model = SlowModel(900, 1299, GAPS)
    site = make_site(model)
    command, env = same_command(tmp_path, site)
    # run 1: stopped (SIGINT, Ctrl-C) mid-way
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(site.ids()) < 80 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    first = read_items(tmp_path / "items.jsonl")
    fetched_first = list(site.ids())
    assert len(first) > 0 and len(fetched_first) < 300, "run 1 was stopped mid-way"
    # run 2: the same command continues; no id found in run 1 is fetched again
    site.log.clear()
    second = run(command, env, tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed (resume=auto)" in second.stderr
    assert " WARNING: " not in second.stderr.split("Spider opened")[0], "continuing is the default: no warning"
    fetched_second = list(site.ids())
    assert not {item["id"] for item in first} & set(fetched_second)
    items = read_items(tmp_path / "items.jsonl")
    truth = target_truth(model.exists, 1000, "both", 5, lo=900)
    assert sorted(item["id"] for item in items) == truth, "the feed holds each id of the site once"
    # run 3, after the site grew past its last found id: the same command walks only the new tail
    model.high = 1320
    site.log.clear()
    third = run(command, env, tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    assert min(site.ids()) == 1300, "nothing before the last found id is fetched again"
    assert set(site.ids()) >= set(range(1300, 1321 + 5))  # the new ids, then the margin
    items = read_items(tmp_path / "items.jsonl")
    assert sorted(item["id"] for item in items) == [*truth, *range(1300, 1321)]
    assert max(Counter(item["id"] for item in items).values()) == 1


def test_resume_reset_starts_over_and_warns_what_it_forgets(make_site, tmp_path: Path) -> None:
    model = GapModel(900, 1299, GAPS)
    site = make_site(model)
    args = {**ARGS, "url": site.url(), "min": 980, "max": 1030}
    first = run_crawl(tmp_path, args, output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    found = len(first.items)
    site.log.clear()
    again = run_crawl(tmp_path, args, output="run2.jsonl")  # the default: nothing left to fetch
    assert again.returncode == 0 and site.ids() == [] and again.items == []
    reset = run_crawl(tmp_path, {**args, "resume": "reset"}, output="run3.jsonl")
    assert reset.returncode == 0, reset.stderr[-3000:]
    assert sorted(site.ids()) == list(range(980, 1031)), "reset fetches every id again"
    assert sorted(item["id"] for item in reset.items) == sorted(item["id"] for item in first.items)
    warnings = [line for line in reset.stderr.splitlines() if " WARNING: " in line]
    assert any(line.endswith(
        f"idcrawl: resume=reset: forgets the stored state of 1 target ({found} found ids, 2 lanes): they start "
        "over (their run history stays)") for line in warnings), warnings
    assert "resume=reset: its stored state was reset, starts over" in reset.stderr
    # the old default's word still starts over, with a deprecation warning
    site.log.clear()
    old = run_crawl(tmp_path, {**args, "resume": "none"}, output="run4.jsonl")
    assert old.returncode == 0, old.stderr[-3000:]
    assert len(site.ids()) == 51
    assert "WARNING: idcrawl: resume=none is deprecated: it starts over like resume=reset" in old.stderr


def test_a_rerun_with_other_identity_says_how_to_start_over(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(900, 1299, GAPS))
    args = {**ARGS, "url": site.url(), "min": 980, "max": 1030}
    assert run_crawl(tmp_path, args).returncode == 0
    site.log.clear()
    result = run_crawl(tmp_path, {**args, "start": 1010})
    assert result.returncode != 0
    assert result.error_lines()[0].endswith(
        "target 'reg': start=1010 differs from the stored state (start=1000): -a resume=reset starts the target "
        "over (forgetting its stored outcomes), or give another JOBDIR / IDCRAWL_STATE_PATH")
    assert site.log == []
    assert run_crawl(tmp_path, {**args, "start": 1010, "resume": "reset"}).returncode == 0


def test_a_refused_rerun_resets_nothing_even_a_target_that_said_reset(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(900, 1299, GAPS))

    def job(second_start: int, first_resume: str = "auto") -> Path:
        path = tmp_path / "job.toml"
        path.write_text(f"[[targets]]\nname = 'a'\nurl = '{site.url()}'\nstart = 1000\nmax = 1020\nmargin = 2\n"
                        f"resume = '{first_resume}'\n"
                        f"[[targets]]\nname = 'b'\nurl = '{site.url()}'\nstart = {second_start}\nmax = 1060\n"
                        "margin = 2\n")
        return path

    assert run_crawl(tmp_path, {"job": job(1040)}, {"JOBDIR": str(tmp_path / "state")}).returncode == 0
    before = snapshot(tmp_path / "state")
    site.log.clear()
    refused = run_crawl(tmp_path, {"job": job(1041, first_resume="reset")}, {"JOBDIR": str(tmp_path / "state")})
    assert refused.returncode != 0
    assert "target 'b': start=1041 differs from the stored state (start=1040)" in refused.error_lines()[0]
    assert "forgets the stored state" not in refused.stderr
    assert site.log == [] and snapshot(tmp_path / "state") == before
