"""scrapyd end to end: deploy this project as an egg to a real scrapyd, schedule idseq twice, resume.

A real ``scrapyd`` (the test extra installs scrapyd 1.6, scrapyd-client 2.0 and
setuptools) listens on a free 127.0.0.1 port with every directory in a temp
folder. ``scrapyd-deploy`` builds the egg from a temp copy of the project (so
the repo gets no ``build/`` or ``*.egg-info``), and the copy gets one extra
profile beside the packaged ones: a job can only load it from inside the egg,
which proves that profiles travel in eggs and that the job's idcrawl is the
egg's, not the editable install's.

scrapyd's ``jobs_dir`` gives each job id a directory and passes it as
``JOBDIR``; idcrawl keeps the job's state there (``idcrawl-state.sqlite``), so
runs scheduled with the same ``jobid`` share it and ``resume=bound`` continues.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from idcrawl.state import SqliteStateStore
from idcrawl.state.location import STATE_FILENAME
from tests.conftest import GapModel
from tests.support.reference import target_truth
from tests.support.scrapyd import call as scrapyd_call
from tests.support.scrapyd import running, write_conf

REPO = Path(__file__).resolve().parents[2]
PROJECT = "idcrawl"
JOB = "reg-e2e"  # one job id for both runs: one JOBDIR, one state
EGG_ONLY_PROFILE = "e2e_egg_only"
#: What the copy for the egg leaves out: VCS, virtualenvs, build junk, and folders no egg needs.
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".scrapy", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", ".hypothesis", "demo-output", "tests", "bench", "docs",
)
#: Variables that would let the job import idcrawl from somewhere else than the egg.
LEAKY_ENV = ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE", "SCRAPY_PROJECT", "SCRAPYD_EGG_VERSION")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}


@dataclass
class Scrapyd:
    root: Path
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def call(self, endpoint: str, data: list[tuple[str, str]] | None = None, **query: str) -> dict[str, Any]:
        return scrapyd_call(self.port, endpoint, data, **query)

    def daemon_log(self) -> str:
        path = self.root / "scrapyd.out"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def job_log(self, job: str) -> str:
        path = self.root / "logs" / PROJECT / "idseq" / f"{job}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def items(self, job: str) -> list[dict[str, Any]]:
        path = self.root / "items" / PROJECT / "idseq" / f"{job}.jl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def wait_finished(self, job: str, count: int, timeout: float = 60) -> None:
        """Until ``count`` runs of ``job`` are finished (runs of one job id share it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            jobs = self.call("listjobs.json", project=PROJECT)
            if sum(1 for j in jobs["finished"] if j["id"] == job) >= count:
                return
            time.sleep(0.2)
        pytest.fail(f"job {job} run {count} did not finish in {timeout} s; its log:\n{self.job_log(job)[-4000:]}")


@pytest.fixture
def scrapyd(tmp_path: Path) -> Iterator[Scrapyd]:
    """A real scrapyd on a free 127.0.0.1 port, every directory under a temp folder."""
    root = tmp_path / "scrapyd"
    root.mkdir()
    port = free_port()
    write_conf(root, port, "jobs_to_keep = 5")

    def log() -> str:
        return (root / "scrapyd.out").read_text(errors="replace")[-4000:]

    with running([sys.executable, "-m", "scrapyd"], root, clean_env(), lambda: scrapyd_call(port, "daemonstatus.json"),
                 log) as proc:
        yield Scrapyd(root, port, proc)


def packaged_profiles(project: Path) -> Path:
    """The folder inside the package that holds the profiles (it travels in eggs and wheels)."""
    found = sorted(project.glob(f"{PROJECT}/**/survey.toml"))
    if not found:
        pytest.fail(
            "no survey.toml inside the idcrawl package: profiles outside the package are not in a "
            "scrapyd egg or a Zyte deploy (issue 7, part 2: profiles as package data)"
        )
    return found[0].parent


def deploy(scrapyd: Scrapyd, tmp_path: Path) -> dict[str, Any]:
    """Copy the project, add an egg-only profile, point its scrapy.cfg at this scrapyd, scrapyd-deploy it."""
    project = tmp_path / "project"
    shutil.copytree(REPO, project, ignore=COPY_IGNORE)
    folder = packaged_profiles(project)
    (folder / f"{EGG_ONLY_PROFILE}.toml").write_text((folder / "survey.toml").read_text())
    cfg = configparser.ConfigParser()
    cfg.read(project / "scrapy.cfg")
    cfg["deploy"]["url"] = scrapyd.url
    with (project / "scrapy.cfg").open("w") as fh:
        cfg.write(fh)
    proc = subprocess.run(
        [sys.executable, "-m", "scrapyd_client.deploy", "--version", "e2e"],
        cwd=project, env=clean_env(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def schedule(scrapyd: Scrapyd, args: dict[str, object], settings: dict[str, object]) -> None:
    data = [("project", PROJECT), ("spider", "idseq"), ("jobid", JOB)]
    data += [(key, str(value)) for key, value in args.items()]
    data += [("setting", f"{key}={value}") for key, value in settings.items()]
    assert scrapyd.call("schedule.json", data)["jobid"] == JOB


def stat(log: str, key: str) -> int | None:
    """A stat from the 'Dumping Scrapy stats' block of the log (the last run's)."""
    values = re.findall(rf"'{re.escape(key)}': (\d+)", log)
    return int(values[-1]) if values else None


def profile_value(folder: Path, name: str) -> Any:
    """A setting's value in the packaged survey profile (top level, or one table down)."""
    data = tomllib.loads((folder / "survey.toml").read_text())
    tables = [data, *(v for v in data.values() if isinstance(v, dict))]
    return next((t[name] for t in tables if name in t), None)


@pytest.mark.timeout(180)
def test_scrapyd_deploys_the_egg_runs_idseq_with_a_packaged_profile_and_resumes_the_job(
    scrapyd: Scrapyd, make_site, tmp_path: Path
) -> None:
    answer = deploy(scrapyd, tmp_path)
    assert answer["project"] == PROJECT and answer["spiders"] >= 1, answer
    assert "idseq" in scrapyd.call("listspiders.json", project=PROJECT)["spiders"]

    model = GapModel(1000, 1049, {1007, 1020, 1021})
    site = make_site(model)
    # target_name=, not name=: scrapyd's queue takes `name` for the spider (SqliteSpiderQueue.add(name, ...))
    args: dict[str, object] = {"url": site.url(), "start": 1025, "direction": "both", "margin": 3,
                               "target_name": "register"}
    # the profile is survey's Table 3; an explicit setting still wins over it (Imax 100 and TST 3
    # would stop this small domain early and make the items depend on timing); politeness (on by
    # default, and by survey: a second or more between requests) off for the test's own site
    settings: dict[str, object] = {
        "IDCRAWL_PROFILE": EGG_ONLY_PROFILE, "IDCRAWL_LIMIT_IMAX": 0, "IDCRAWL_LIMIT_TST": 0,
        "IDCRAWL_POLITENESS_FACTOR": 0,
    }

    # run 1: the whole target, cut by its margins
    schedule(scrapyd, args, settings)
    scrapyd.wait_finished(JOB, 1)
    log = scrapyd.job_log(JOB)
    assert "Spider closed (finished)" in log, log[-4000:]
    limits_line = next((line for line in log.splitlines() if "idcrawl limits: per domain" in line), "")
    plmax = profile_value(packaged_profiles(tmp_path / "project"), "IDCRAWL_LIMIT_PLMAX")
    assert plmax and f"PLmax={plmax:g}" in limits_line, limits_line  # the egg's profile is in force
    assert "Imax=" not in limits_line and "TST=" not in limits_line, limits_line  # ... below explicit settings
    truth = target_truth(model.exists, 1025, "both", 3)
    first = scrapyd.items(JOB)
    assert sorted(item["id"] for item in first) == truth  # one JSON line per found id, nothing else
    assert {item["target"] for item in first} == {"register"}
    assert stat(log, "idcrawl/found") == len(truth)

    # the state is in the job's directory (scrapyd's JOBDIR), not in scrapyd's working directory
    jobdir = scrapyd.root / "jobs" / PROJECT / "idseq" / JOB
    state_file = jobdir / STATE_FILENAME
    assert state_file.is_file(), sorted(p.name for p in jobdir.iterdir()) if jobdir.exists() else "no JOBDIR"
    assert not (scrapyd.root / ".scrapy").exists()
    store = SqliteStateStore(state_file, read_only=True)
    try:
        assert [run.finish_reason for run in store.runs()] == ["finished"]
    finally:
        store.close()

    # new ids appear past the end; run 2 of the same job resumes from the stored state
    found_first = {item["id"] for item in first}
    site.log.clear()
    model.high = 1059
    schedule(scrapyd, {**args, "resume": "bound"}, settings)
    scrapyd.wait_finished(JOB, 2)
    log = scrapyd.job_log(JOB)
    assert log.count("Spider closed (finished)") == 2, log[-4000:]
    second = scrapyd.items(JOB)[len(first):]  # the job's feed file is appended to
    assert sorted(item["id"] for item in second) == list(range(1050, 1060))
    fetched = set(site.ids())
    assert not fetched & found_first, sorted(fetched & found_first)  # no found id fetched again
    store = SqliteStateStore(state_file, read_only=True)
    try:
        assert [run.finish_reason for run in store.runs()] == ["finished", "finished"]
    finally:
        store.close()


def test_scrapy_cfg_has_a_deploy_target_for_this_project() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "scrapy.cfg")
    assert cfg["settings"]["default"] == "idcrawl.settings"
    assert cfg["deploy"]["project"] == PROJECT
    assert urllib.parse.urlsplit(cfg["deploy"]["url"]).scheme in ("http", "https")


def test_deploy_junk_is_ignored_by_git() -> None:
    """scrapyd-deploy and shub leave build/ and *.egg-info/ beside setup.py: never committed."""
    ignored = set((REPO / ".gitignore").read_text().split())
    assert {"build/", "*.egg-info/", "dist/"} <= ignored
    assert (REPO / "setup.py").is_file()  # else both tools write a setup.py of their own into the repo
