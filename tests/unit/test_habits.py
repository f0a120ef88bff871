"""Habits the project keeps, checked: one version, release notes that name it, short module docstrings.

See docs/development.md ("Habits", "Cutting a release").
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.version import Version

import idcrawl

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "idcrawl"

#: Most lines a module docstring may have: what the module is for, and where the manual explains it.
MAX_DOCSTRING_LINES = 8

#: Modules let off the limit for a while (while another branch restructures them); empty when none is.
NOT_YET_SHORTENED: set[str] = set()
NOT_YET_SHORTENED_DIRS: tuple[str, ...] = ()


def pyproject_version() -> Version:
    with (REPO / "pyproject.toml").open("rb") as file:
        return Version(tomllib.load(file)["project"]["version"])


def newest_news_heading() -> str:
    page = (REPO / "docs" / "news.md").read_text(encoding="utf-8")
    match = re.search(r"^## (.+)$", page, re.MULTILINE)
    assert match is not None, "docs/news.md has no release section"
    return match.group(1).strip()


def test_the_package_version_is_pyprojects() -> None:
    assert Version(idcrawl.__version__) == pyproject_version() == Version(importlib.metadata.version("idcrawl"))


def test_the_newest_release_notes_are_the_package_versions() -> None:
    version = pyproject_version()
    heading = newest_news_heading()
    number, _, rest = heading.partition(" ")
    assert Version(number).release == version.release, f"docs/news.md's newest section is {heading!r}, the version {version}"
    # between releases the version is a .devN and the newest section says it is unreleased; a release says neither
    assert (rest == "(unreleased)") == version.is_devrelease, heading


def docstring_lines(path: Path) -> int:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    return len(doc.strip("\n").splitlines()) if doc else 0


def test_module_docstrings_are_a_few_lines() -> None:
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if name in NOT_YET_SHORTENED or name.startswith(NOT_YET_SHORTENED_DIRS):
            continue
        lines = docstring_lines(path)
        if lines > MAX_DOCSTRING_LINES:
            long[name] = lines
    assert long == {}, f"module docstrings over {MAX_DOCSTRING_LINES} lines (the long why goes to docs/architecture.md)"

