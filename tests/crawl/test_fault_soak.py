"""Fault soak: one job through ten faults of mixed kinds, the same command each time, one feed.

The faults (a seeded order of a fixed mix): SIGKILL, SIGTERM, a full disk then freed, a second
process on the same JOBDIR, and a foreign job appending to the job's feed. Every run is the same
command with the default ``resume`` (auto: continue), appending to one feed on a small tmpfs the
test mounts (root only; CI runs as root). After the last run ends by itself:

- the job's lines in the feed are the site's ground truth, each id once (nothing lost, nothing
  twice), whatever the foreign job appended beside them;
- each run exited with the documented status (docs/reference/finish-reasons.md: 143 for SIGTERM,
  74 for a storage error, 1 for a refused second process, 0 for the end).

Every fault is placed by what the site has seen (the k-th request of the run, k seeded), never by
a sleep; what the checks rely on holds for any k.
"""

from __future__ import annotations

import errno
import json
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from idcrawl.core.exits import DID_NOT_START, exit_status
from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import crawl_command
from tests.support.killsoak import SlowDemo
from tests.support.reference import target_truth
from tests.support.tmpfs import mounted_tmpfs

FAULTS = ["kill", "kill", "kill", "term", "term", "full", "full", "second", "second", "foreign"]
ARGS = {"start": 12_000, "direction": "both", "margin": 10, "name": "soak"}
SETTINGS = {"IDCRAWL_STATE_COMMIT_ITEMS": 40, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.5}
RUN_TIMEOUT = 240.0


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs at tmp_path/disk, unmounted at teardown."""
    with mounted_tmpfs(tmp_path / "disk", "48m") as path:
        yield path


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` (a filler file written until ENOSPC)."""
    filler = disk / "filler"
    chunk = b"\0" * (1 << 16)
    with filler.open("wb", buffering=0) as file:
        try:
            while True:
                file.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:  # the last bytes, smaller than a chunk
            while True:
                file.write(b"\0" * 512)
        except OSError:
            pass
    return filler


class HeldDemo(SlowDemo):
    """The slow demo register whose answers wait while :attr:`open` is clear (a crawl held mid-way)."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__(low, high, delay=0.004)
        self.open = threading.Event()
        self.open.set()

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        self.open.wait(RUN_TIMEOUT)
        return super().reply_to(id_, host, nth, headers)


class Job:
    """The soak's job: one command, its site, its JOBDIR and feed on the disk."""

    def __init__(self, workdir: Path, disk: Path, site_url: str, log: list[object]) -> None:
        self.workdir, self.log = workdir, log
        settings = {**SETTINGS, "JOBDIR": str(disk / "job")}
        self.command, self.env = crawl_command(workdir, {**ARGS, "url": site_url}, settings,
                                               output="disk/items.jsonl", overwrite=False)
        self.runs = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.runs += 1
        log = (self.workdir / f"run{self.runs}.log").open("wb")
        return subprocess.Popen(self.command, cwd=self.workdir, env=self.env, stdout=subprocess.DEVNULL, stderr=log)

    def stderr(self) -> str:
        return (self.workdir / f"run{self.runs}.log").read_text(errors="replace")

    def wait_requests(self, proc: subprocess.Popen[bytes], seen: int, k: int) -> bool:
        """Wait until the site saw ``k`` requests since ``seen`` (True), or the run ended (False)."""
        deadline = time.monotonic() + RUN_TIMEOUT
        while len(self.log) - seen < k and proc.poll() is None:
            assert time.monotonic() < deadline, f"run {self.runs} made {len(self.log) - seen} requests, no more"
            time.sleep(0.005)
        return proc.poll() is None


def test_one_job_through_ten_mixed_faults_keeps_every_id_once_and_says_each_status(
    make_site, tmp_path: Path, disk: Path
) -> None:
    model = HeldDemo(10_000, 13_999)
    site = make_site(model)
    foreign_site = make_site(GapModel(1, 60, set()))
    job = Job(tmp_path, disk, site.url(), site.log)
    rng = random.Random(2027)
    faults = FAULTS[:]
    rng.shuffle(faults)
    statuses: list[tuple[str, int, int]] = []  # (fault, expected, got)
    term = exit_status("shutdown", signal.SIGTERM)
    storage = exit_status("idcrawl_storage_error")
    for fault in faults:
        k = rng.randint(30, 90)
        seen = len(site.log)
        proc = job.start()
        running = job.wait_requests(proc, seen, k)
        assert running, f"run {job.runs} ({fault}) ended by itself: {job.stderr()[-3000:]}"
        if fault in ("kill", "foreign"):
            proc.kill()
            statuses.append((fault, -signal.SIGKILL, proc.wait(timeout=60)))
        elif fault == "term":
            proc.send_signal(signal.SIGTERM)
            statuses.append((fault, term, proc.wait(timeout=RUN_TIMEOUT)))
        elif fault == "full":
            filler = fill(disk)
            statuses.append((fault, storage, proc.wait(timeout=RUN_TIMEOUT)))
            assert "Traceback" not in job.stderr(), job.stderr()[-3000:]
            filler.unlink()
        elif fault == "second":  # the first run held (its lock taken) while the second starts
            model.open.clear()
            second = subprocess.run(job.command, cwd=tmp_path, env=job.env, capture_output=True, text=True,
                                    timeout=RUN_TIMEOUT, check=False)
            statuses.append(("second (refused)", DID_NOT_START, second.returncode))
            assert "in use by another crawl" in second.stderr, second.stderr[-3000:]
            assert "Traceback" not in second.stderr, second.stderr[-3000:]
            model.open.set()
            proc.send_signal(signal.SIGTERM)
            statuses.append((fault, term, proc.wait(timeout=RUN_TIMEOUT)))
        if fault == "foreign":  # another job (its own JOBDIR, site and template, the same target name)
            command, env = crawl_command(tmp_path, {"url": foreign_site.url(), "start": 1, "margin": 5,
                                                    "name": "soak"},
                                         {"JOBDIR": str(tmp_path / "foreign-job")},
                                         output="disk/items.jsonl", overwrite=False)
            other = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                                   timeout=RUN_TIMEOUT, check=False)
            statuses.append(("foreign job", 0, other.returncode))
    final = job.start()
    statuses.append(("last run", 0, final.wait(timeout=RUN_TIMEOUT * 2)))
    assert "Traceback" not in job.stderr(), job.stderr()[-3000:]
    wrong = [(fault, expected, got) for fault, expected, got in statuses if expected != got]
    assert not wrong, f"exit statuses (fault, documented, got): {wrong}; all: {statuses}"
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"

    ours: Counter[int] = Counter()
    theirs = 0
    for line in (disk / "items.jsonl").read_bytes().splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line a kill or the full disk cut short
        if item["url"].startswith(site.url().split("{id}")[0]):
            ours[item["id"]] += 1
        else:
            theirs += 1
    assert theirs > 0, "the foreign job wrote nothing to the feed"
    truth = target_truth(model.exists, ARGS["start"], "both", ARGS["margin"])
    assert sorted(ours) == truth, f"lost: {sorted(set(truth) - set(ours))[:20]}"
    twice = sorted(id_ for id_, n in ours.items() if n > 1)
    assert not twice, f"in the feed more than once: {twice[:20]}"
