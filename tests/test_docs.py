"""The README's setting reference must cover every IDCRAWL_* setting the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from idcrawl import default_settings

REPO = Path(__file__).resolve().parents[1]


def settings_read_by_code() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "idcrawl").rglob("*.py"):
        names |= set(re.findall(r"\bIDCRAWL_[A-Z0-9_]+\b", path.read_text()))
    return names


def test_every_setting_the_code_reads_is_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    undocumented = sorted(n for n in settings_read_by_code() if f"`{n}`" not in readme)
    assert undocumented == []


def test_every_setting_the_code_reads_has_a_default() -> None:
    defaults = {n for n in dir(default_settings) if n.startswith("IDCRAWL_")}
    assert settings_read_by_code() <= defaults | {"IDCRAWL_PROFILE"}
    assert defaults <= settings_read_by_code()


def test_readme_names_the_two_commands_first_the_demo() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
