"""The settings profiles and the Lua scripts travel inside the builds that deployments upload.

scrapyd-deploy uploads an egg (``setup.py bdist_egg``, with a setup.py of its own making when the
project has none) and Zyte's ``shub deploy`` builds one the same way; pip installs a wheel. A
top-level folder outside the package would be left out of all three, so the profiles are package
data of ``idcrawl.settings_profiles``, and the distributed job's scripts of ``idcrawl.distributed.lua``;
these tests build each in a temporary copy of the project and look inside, then load the profiles and
the scripts from the zipped egg itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from idcrawl.settings_profiles import known_profiles
from tests.support.crawl import REPO

BIN = Path(sys.executable).parent


def project_copy(tmp_path: Path) -> Path:
    """The files a deploy builds from, without build junk, in a fresh folder."""
    copy = tmp_path / "project"
    shutil.copytree(REPO / "idcrawl", copy / "idcrawl", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "scrapy.cfg", "setup.py"):
        if (REPO / name).exists():  # setup.py: the shim scrapyd-deploy uses instead of writing its own
            shutil.copy2(REPO / name, copy / name)
    return copy


def shipped_profile_files() -> set[str]:
    return {f"idcrawl/settings_profiles/{name}.toml" for name in known_profiles()}


def shipped_lua_files() -> set[str]:
    files = {f"idcrawl/distributed/lua/{path.name}" for path in (REPO / "idcrawl/distributed/lua").glob("*.lua")}
    assert "idcrawl/distributed/lua/record.lua" in files and "idcrawl/distributed/lua/common.lua" in files
    return files


def test_the_egg_scrapyd_deploy_builds_holds_the_profiles_and_the_scripts_and_loads_them_zipped(tmp_path: Path) -> None:
    scrapyd_deploy = BIN / "scrapyd-deploy"
    if not scrapyd_deploy.exists():
        pytest.skip("scrapyd-client is not installed (pip install -e '.[test]')")
    copy = project_copy(tmp_path)
    egg = tmp_path / "idcrawl.egg"
    build = subprocess.run([str(scrapyd_deploy), "--build-egg", str(egg)], cwd=copy, capture_output=True, text=True,
                           timeout=180, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    names = set(zipfile.ZipFile(egg).namelist())
    assert shipped_profile_files() <= names
    assert shipped_lua_files() <= names
    assert {"default", "polite", "fast", "survey", "distributed"} <= {
        Path(n).stem for n in names if n.startswith("idcrawl/settings_profiles/") and n.endswith(".toml")}
    # scrapyd imports the project from the egg file itself (zipimport): so do we
    probe = ("import json, idcrawl.settings_profiles as p; "
             "print(json.dumps([p.__file__, p.known_profiles(), p.load_profile('survey')['IDCRAWL_LIMIT_IMAX']]))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(egg)},
                            capture_output=True, text=True, timeout=60, check=False)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    module_file, profiles, imax = json.loads(loaded.stdout)
    assert module_file.startswith(str(egg) + "/")
    assert set(profiles) == set(known_profiles())
    assert imax == 100
    probe = ("import json, idcrawl.distributed.scripts as s; "
             "print(json.dumps([s.__file__, s.RECORD, s.load('record', 'page_record')]))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(egg)},
                            capture_output=True, text=True, timeout=60, check=False)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    module_file, record, again = json.loads(loaded.stdout)
    assert module_file.startswith(str(egg) + "/")
    assert "local function give_back" in record and "-- RECORD:" in record and record == again


def test_the_wheel_holds_the_profiles_and_the_scripts(tmp_path: Path) -> None:
    copy = project_copy(tmp_path)
    out = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir", "-q",
         "-w", str(out), str(copy)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("idcrawl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert shipped_profile_files() <= names
    assert shipped_lua_files() <= names
