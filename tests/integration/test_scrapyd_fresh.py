"""scrapyd from a fresh environment: what docs/deployment.md says to install, then deploys that work first time.

One fresh venv per run (``python -m venv``: on Python 3.11 it brings setuptools 65.5, the one that
refused PEP 639's license string) gets what the page's "scrapyd's environment" block installs
(``scrapyd scrapyd-client 'setuptools<81'`` and idcrawl, here from a copy of this checkout), with uv
(its cache keeps a rerun to seconds; pip when uv is missing). A scrapyd of that venv on a free
127.0.0.1 port takes two deploys with that venv's ``scrapyd-deploy``: idcrawl's own project (its egg
holds idcrawl) and a ``scrapy startproject`` project that adopted the add-on (its egg holds only its
own package; idcrawl comes from scrapyd's environment). Each runs a job to its items.

No network to PyPI or no venv module: skipped with the reason, except under CI=true (.ci/run), where
it fails (the pattern of tests/support/redis_server.py's require_redis_server).
"""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GapModel
from tests.integration.test_scrapyd import COPY_IGNORE, clean_env, free_port
from tests.support.redis_server import in_ci
from tests.support.reference import target_truth
from tests.support.scrapyd import call as scrapyd_call
from tests.support.scrapyd import running, write_conf

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT_PAGE = REPO / "docs" / "deployment.md"
#: The page's install line for scrapyd's environment, less idcrawl (which the test takes from this checkout).
SCRAPYD_ENV = ("scrapyd", "scrapyd-client", "setuptools<81")
ADDON_SPIDER = '''
from idcrawl.spiders.idseq import IdSeqSpider


class NoticesSpider(IdSeqSpider):
    name = "notices"

    def parse_found(self, response, item):
        item["title"] = response.css("h1::text").get()
        yield item
'''


def unavailable(what: str) -> None:
    """Skip (loudly: -ra prints the reason) or, under CI=true, fail."""
    if in_ci():
        pytest.fail(f"CI=true but {what}")
    pytest.skip(what)


def run(args: list[str], cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class FreshEnv:
    venv: Path
    setuptools: str  # the version the egg builds use

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> FreshEnv:
    """A new venv with scrapyd, scrapyd-client, setuptools<81 and idcrawl (a copy of this checkout)."""
    root = tmp_path_factory.mktemp("fresh")
    venv = root / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], timeout=120)
    if made.returncode != 0:
        unavailable(f"python -m venv failed: {made.stderr.strip()[-300:]}")
    source = root / "idcrawl-src"  # the copy keeps build/ and *.egg-info out of the checkout
    shutil.copytree(REPO, source, ignore=COPY_IGNORE)
    packages = [*SCRAPYD_ENV, str(source)]
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        install = run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *packages])
    else:
        install = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *packages])
    if install.returncode != 0:
        unavailable(f"scrapyd could not be installed into a fresh venv ({'uv' if uv else 'pip'}): "
                    f"{' '.join(install.stderr.split())[-400:]}")
    version = run([str(venv / "bin" / "python"), "-c", "import setuptools; print(setuptools.__version__)"])
    assert version.returncode == 0, version.stderr
    return FreshEnv(venv, version.stdout.strip())


@dataclass
class Daemon:
    root: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def call(self, endpoint: str, data: list[tuple[str, str]] | None = None, **query: str) -> dict[str, Any]:
        return scrapyd_call(self.port, endpoint, data, **query)

    def log(self, project: str, spider: str, job: str) -> str:
        path = self.root / "logs" / project / spider / f"{job}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def items(self, project: str, spider: str, job: str) -> list[dict[str, Any]]:
        path = self.root / "items" / project / spider / f"{job}.jl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def run_job(self, project: str, spider: str, job: str, args: dict[str, object], settings: dict[str, object],
                timeout: float = 90) -> str:
        """Schedule one job (``-d setting=NAME=VALUE`` for each setting) and wait until it finished; its log."""
        data = [("project", project), ("spider", spider), ("jobid", job)]
        data += [(key, str(value)) for key, value in args.items()]
        data += [("setting", f"{key}={value}") for key, value in settings.items()]
        assert self.call("schedule.json", data)["jobid"] == job
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(j["id"] == job for j in self.call("listjobs.json", project=project)["finished"]):
                return self.log(project, spider, job)
            time.sleep(0.2)
        pytest.fail(f"job {job} did not finish in {timeout} s; its log:\n{self.log(project, spider, job)[-4000:]}")


@pytest.fixture(scope="module")
def daemon(fresh_env: FreshEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The fresh venv's scrapyd on a free 127.0.0.1 port, every directory in a temp folder."""
    root = tmp_path_factory.mktemp("scrapyd")
    port = free_port()
    write_conf(root, port)
    daemon = Daemon(root, port)
    with running([fresh_env.bin("scrapyd")], root, clean_env(), lambda: daemon.call("daemonstatus.json"),
                 lambda: (root / "scrapyd.out").read_text(errors="replace")[-3000:]):
        yield daemon


def point_at(project: Path, daemon: Daemon, name: str) -> None:
    cfg = configparser.ConfigParser()
    cfg.read(project / "scrapy.cfg")
    if not cfg.has_section("deploy"):
        cfg.add_section("deploy")
    cfg["deploy"]["url"] = daemon.url
    cfg["deploy"]["project"] = name
    with (project / "scrapy.cfg").open("w") as fh:
        cfg.write(fh)


def deploy(fresh_env: FreshEnv, project: Path) -> dict[str, Any]:
    """``scrapyd-deploy`` of the fresh venv, as a user runs it: it must work the first time."""
    proc = run([fresh_env.bin("scrapyd-deploy"), "--version", "r1"], cwd=project, timeout=300)
    assert proc.returncode == 0, f"setuptools {fresh_env.setuptools}:\n{proc.stdout}{proc.stderr[-3000:]}"
    answer: dict[str, Any] = json.loads(proc.stdout)
    assert answer["status"] == "ok", answer
    return answer


#: One target: both directions from 1010, margin 3; politeness off for the test's own site.
ARGS: dict[str, object] = {"start": 1010, "direction": "both", "margin": 3, "target_name": "register"}
SETTINGS: dict[str, object] = {"IDCRAWL_POLITENESS_FACTOR": 0}


def test_the_page_installs_what_this_test_installs() -> None:
    """The fresh venv gets the page's install line: the test follows the manual, not its own recipe."""
    page = DEPLOYMENT_PAGE.read_text()
    line = next((line for line in page.splitlines() if line.startswith("pip install scrapyd ")), "")
    assert all(package in line.replace("'", "").replace('"', "") for package in SCRAPYD_ENV), line
    assert "idcrawl" in line, line  # scrapyd's environment needs idcrawl and so its dependencies


def test_idcrawls_own_project_deploys_from_a_fresh_venv_and_runs(fresh_env: FreshEnv, daemon: Daemon, make_site,
                                                                  tmp_path: Path) -> None:
    if sys.version_info[:2] == (3, 11):  # the setuptools that refused PEP 639's license string
        assert int(fresh_env.setuptools.split(".")[0]) < 77, fresh_env.setuptools
    project = tmp_path / "idcrawl-project"
    shutil.copytree(REPO, project, ignore=COPY_IGNORE)
    point_at(project, daemon, "idcrawl")
    answer = deploy(fresh_env, project)
    assert answer["project"] == "idcrawl" and answer["spiders"] >= 1, answer

    model = GapModel(1000, 1029, {1004, 1017})
    site = make_site(model)
    log = daemon.run_job("idcrawl", "idseq", "own", {"url": site.url(), **ARGS}, SETTINGS)
    assert "Spider closed (finished)" in log, log[-4000:]
    ids = sorted(item["id"] for item in daemon.items("idcrawl", "idseq", "own"))
    assert ids == target_truth(model.exists, 1010, "both", 3)


def test_a_startproject_project_with_the_addon_deploys_from_a_fresh_venv_and_runs(
    fresh_env: FreshEnv, daemon: Daemon, make_site, tmp_path: Path
) -> None:
    made = run([fresh_env.bin("scrapy"), "startproject", "mysite", str(tmp_path / "mysite")], timeout=120)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "mysite"
    settings = project / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + '\nADDONS = {"idcrawl.addon.IdCrawl": 0}\n')  # docs/addon.md
    (project / "mysite" / "spiders" / "notices.py").write_text(ADDON_SPIDER)
    point_at(project, daemon, "mysite")
    answer = deploy(fresh_env, project)
    assert answer["project"] == "mysite" and answer["spiders"] == 1, answer

    model = GapModel(1000, 1029, {1004, 1017})
    site = make_site(model)
    # the template's DOWNLOAD_DELAY = 1 and one request per host would make this test slow, not different
    settings = {**SETTINGS, "DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8}
    daemon.run_job("mysite", "notices", "adopted", {"url": site.url(), **ARGS}, settings)
    log = daemon.log("mysite", "notices", "adopted")
    assert "Spider closed (finished)" in log, log[-4000:]
    items = daemon.items("mysite", "notices", "adopted")
    assert sorted(item["id"] for item in items) == target_truth(model.exists, 1010, "both", 3)
    assert all(item["title"] for item in items), items[:3]  # the project's own parse_found ran


def test_setup_py_stops_with_one_line_naming_the_fix_below_setuptools_61(tmp_path: Path) -> None:
    """scrapyd-deploy and shub build with the environment's setuptools: too old a one is one line (with --debug)."""
    fake = tmp_path / "old" / "setuptools"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '60.10.0'\ndef setup():\n    raise SystemExit('built')\n")
    proc = subprocess.run([sys.executable, str(REPO / "setup.py"), "clean", "-a"], cwd=tmp_path,
                          env={**clean_env(), "PYTHONPATH": str(tmp_path / "old")}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "idcrawl's build needs setuptools>=61 (pyproject.toml's [project]), this Python has 60.10.0: "
        "pip install 'setuptools>=61,<81'"
    ]
