"""Zyte Scrapy Cloud, offline: scrapinghub.yml, its requirements file, the package build, resume state.

Nothing here talks to Zyte: the config must parse the way shub reads it and
name files that exist, the requirements must not pin Scrapy (the stack brings
it) yet list every runtime dependency, and the package must build (sdist and
wheel, with the profiles inside). The DotScrapy test plays the persistence
add-on with a local folder for its bucket.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import GapModel
from tests.support.crawl import run_crawl

REPO = Path(__file__).resolve().parents[2]
STACK = re.compile(r"scrapy:(?P<version>\d+\.\d+)(?:-py3)?(?:-(?P<date>\d{8}))?$")


def shub_config() -> dict[str, object]:
    config = yaml.safe_load((REPO / "scrapinghub.yml").read_text())
    assert isinstance(config, dict)
    return config


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def requirements_file() -> Path:
    requirements = shub_config()["requirements"]
    assert isinstance(requirements, dict)
    return REPO / str(requirements["file"])


def listed_requirements(path: Path) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def test_scrapinghub_yml_names_a_stack_that_has_the_scrapy_idcrawl_needs() -> None:
    config = shub_config()
    stack = config.get("stack") or config.get("stacks", {}).get("default")  # type: ignore[union-attr]
    match = STACK.match(str(stack))
    assert match, f"stack {stack!r} is not a scrapy:X.Y[-YYYYMMDD] stack"
    (scrapy,) = [r for r in runtime_requirements() if canonicalize_name(r.name) == "scrapy"]
    # the series X.Y holds a Scrapy that pyproject admits (tests/unit/test_scrapy_adapter.py: the floor's series)
    series = Version(match["version"])
    assert any(scrapy.specifier.contains(Version(f"{series}.{patch}")) for patch in range(10)), (stack, str(scrapy))


def test_scrapinghub_yml_names_files_that_exist() -> None:
    config = shub_config()
    assert requirements_file().is_file()
    for egg in config.get("requirements", {}).get("eggs", []):  # type: ignore[union-attr]
        assert (REPO / egg).is_file(), egg
    assert not {"apikey", "apikeys"} & set(config), "API keys belong in ~/.scrapinghub.yml or SHUB_APIKEY"


def test_the_zyte_requirements_do_not_pin_scrapy_and_list_every_runtime_dependency() -> None:
    listed = {canonicalize_name(r.name): r for r in listed_requirements(requirements_file())}
    assert "scrapy" not in listed  # the stack's Scrapy stays
    needed = {canonicalize_name(r.name): r for r in runtime_requirements()} .keys() - {"scrapy"}
    assert needed <= listed.keys(), sorted(needed - listed.keys())
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        if name in listed:
            assert str(listed[name].specifier) == str(requirement.specifier), (name, str(listed[name]))


@pytest.mark.timeout(300)
def test_the_package_builds_an_sdist_and_a_wheel_with_the_profiles_inside(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".scrapy", ".*_cache",
        ".hypothesis", "demo-output",
    ))
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=280, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("idcrawl-*.whl")
    (sdist,) = (tmp_path / "dist").glob("idcrawl-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    profiles = sorted(p.name for p in (REPO / "idcrawl" / "settings_profiles").glob("*.toml"))
    assert profiles and {f"idcrawl/settings_profiles/{name}" for name in profiles} <= names
    assert {"idcrawl/schemas/incidents.xsd", "idcrawl/py.typed", "idcrawl/spidermon/monitors.py"} <= names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "settings = idcrawl.settings" in zipfile.ZipFile(wheel).read(entry_points).decode()
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"setup.py", "pyproject.toml", "idcrawl/settings_profiles/survey.toml"} <= members


def test_dotscrapy_persistence_carries_the_resume_state_to_the_next_job(make_site, tmp_path: Path) -> None:
    """Each Scrapy Cloud job starts in a fresh container: only the synced .scrapy folder carries over."""
    model = GapModel(1000, 1049, {1007, 1020, 1021})
    site = make_site(model)
    args = {"url": site.url(), "start": 1025, "direction": "both", "margin": 3, "name": "reg"}
    settings = {
        "DOTSCRAPY_ENABLED": True,
        "DOTSCRAPY_STANDIN_BUCKET": str(tmp_path / "bucket"),
        "EXTENSIONS": {"tests.support.dotscrapy_standin.DotScrapyStandIn": 0},
    }
    first_job, second_job = tmp_path / "job1", tmp_path / "job2"
    first_job.mkdir()
    second_job.mkdir()
    first = run_crawl(first_job, args, settings)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "bucket" / "idcrawl" / "idseq.sqlite").is_file()  # the default state path is synced
    found_first = set(first.ids)
    site.log.clear()
    model.high = 1059
    second = run_crawl(second_job, {**args, "resume": "bound"}, settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not set(site.ids()) & found_first
    assert second.ids == list(range(1050, 1060))


def test_the_deploy_files_cite_sections_that_exist() -> None:
    """Comments such as (docs/deployment.md, "Zyte Scrapy Cloud") name a heading of that file (issue 32: they
    cited README sections that were gone)."""
    cited = []
    for name in ("scrapinghub.yml", "requirements-zyte.txt", "scrapy.cfg", "setup.py"):
        text = " ".join(line.lstrip("#").strip() for line in (REPO / name).read_text().splitlines())
        cited += [(name, file, heading) for file, heading in re.findall(r'(docs/[\w/.-]+\.md|README), "([^"]+)"', text)]
    assert any(name == "scrapinghub.yml" for name, _, _ in cited)
    missing = []
    for name, file, heading in cited:
        path = REPO / (file if file != "README" else "README.md")
        headings = {line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")}
        if heading not in headings:
            missing.append((name, file, heading))
    assert missing == []


def test_the_scrapinghub_yml_for_adopting_projects_names_a_stack_idcrawl_admits() -> None:
    """docs/deployment.md's scrapinghub.yml for a project that adopted the add-on: a stack whose Scrapy
    pyproject admits (else pip replaces the stack's Scrapy), a requirements file that lists idcrawl."""
    page = (REPO / "docs" / "deployment.md").read_text()
    section = page.split("## A project that adopted the add-on", 1)[1].split("\n## ", 1)[0]
    config = yaml.safe_load(section.split("```yaml", 1)[1].split("```", 1)[0])
    match = STACK.match(str(config["stack"]))
    assert match, config
    (scrapy,) = [r for r in runtime_requirements() if canonicalize_name(r.name) == "scrapy"]
    assert any(scrapy.specifier.contains(Version(f"{match['version']}.{patch}")) for patch in range(10))
    assert config["requirements"] == {"file": "requirements.txt"}
    requirements = section.split("# requirements.txt", 1)[1].split("```", 1)[0]
    names = [Requirement(line.split("#")[0].strip()).name for line in requirements.splitlines()[1:]
             if line.split("#")[0].strip()]
    assert names == ["idcrawl"]
