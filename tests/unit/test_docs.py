"""The manual's reference pages against the code, and the README's promises.

``docs/reference/settings.md`` must cover every ``IDCRAWL_*`` setting the code reads (and list no other),
``docs/reference/stats.md`` every ``idcrawl/...`` stat key the code writes; the README stays short and
names the two commands first. (``make docs`` builds the manual with ``sphinx-build -W``; the last tests
here check that such a build fails on a broken cross-reference.)
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

from idcrawl import default_settings

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SETTINGS_PAGE = DOCS / "reference" / "settings.md"
STATS_PAGE = DOCS / "reference" / "stats.md"


def settings_read_by_code() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "idcrawl").rglob("*.py"):
        names |= set(re.findall(r"\bIDCRAWL_[A-Z0-9_]+\b", path.read_text()))
    return {n for n in names if not n.endswith("_")}  # a trailing "_" marks a prefix (IDCRAWL_REDIS_), not a setting


def test_every_setting_the_code_reads_is_on_the_settings_page() -> None:
    page = SETTINGS_PAGE.read_text()
    undocumented = sorted(n for n in settings_read_by_code() if f"`{n}`" not in page)
    assert undocumented == []


def test_every_setting_the_code_reads_has_a_default() -> None:
    defaults = {n for n in dir(default_settings) if n.startswith("IDCRAWL_")}
    assert sorted(settings_read_by_code() - defaults) == []
    assert defaults <= settings_read_by_code()


def settings_table_names() -> set[str]:
    """``IDCRAWL_*`` names in the first column of the settings page's tables."""
    names: set[str] = set()
    for line in SETTINGS_PAGE.read_text().splitlines():
        if line.startswith("| `IDCRAWL_"):
            names |= set(re.findall(r"`(IDCRAWL_[A-Z0-9_]+)`", line.split(" | ", 1)[0]))
    return names


def test_every_default_setting_has_a_row_in_the_settings_table() -> None:
    defaults = {n for n in dir(default_settings) if n.startswith("IDCRAWL_")}
    assert sorted(defaults - settings_table_names()) == []


def test_the_settings_table_lists_no_setting_that_does_not_exist() -> None:
    assert sorted(settings_table_names() - {n for n in dir(default_settings) if n.startswith("IDCRAWL_")}) == []


def test_readme_names_the_two_commands_first_the_demo() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


# -- stats: every idcrawl/... key the code writes is in the stats page's table


def stat_keys_written_by_code() -> set[str]:
    """Stat key templates under ``idcrawl/`` from the code's f-strings, ``{...}`` left in place.

    A key is an f-string that starts with ``{STATS_PREFIX}/`` or with a name bound
    to such an f-string in the same file (``PREFIX = f"{STATS_PREFIX}/limits"``,
    ``prefix = f"{STATS_PREFIX}/lanes/{lane_key}"``) or to an ``"idcrawl/..."``
    string (``STATS_PREFIX = "idcrawl/dupefilter"``); those bindings are prefixes,
    not keys.
    """
    keys: set[str] = set()
    for path in (REPO / "idcrawl").rglob("*.py"):
        text = path.read_text()
        aliases = {"STATS_PREFIX": "idcrawl"}
        # a module's own prefix constant: STATS_PREFIX = "idcrawl/dupefilter"
        aliases.update(re.findall(r'^(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*"(idcrawl(?:/[^"]*)?)"', text, re.M))
        bound: set[str] = set()
        for _ in range(3):  # a prefix built on another prefix
            for name, body in re.findall(r'^[ \t]*(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*f"([^"]*)"', text, re.M):
                head = re.match(r"\{(\w+)\}(/.*)?$", body)
                if head and head.group(1) in aliases and name != head.group(1):
                    aliases[name] = aliases[head.group(1)] + (head.group(2) or "")
                    bound.add(body)
        for body in re.findall(r'f"([^"]*)"', text):
            head = re.match(r"\{(\w+)\}(/.*)$", body)
            if head and head.group(1) in aliases and body not in bound and not body.endswith("/"):
                keys.add(aliases[head.group(1)] + head.group(2))
    return keys


def stat_keys_documented() -> list[str]:
    """Backticked keys in the first column of the stats page's table; ``.../x`` = the previous key's parent + x."""
    keys: list[str] = []
    for line in STATS_PAGE.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = re.split(r"(?<!\\)\|", line)[1]
        previous = ""
        for key in re.findall(r"`([^`]+)`", first_cell):
            key = key.replace("\\|", "|")
            if key.startswith(".../"):
                key = previous.rsplit("/", 1)[0] + key[3:]
            if key.startswith("idcrawl/"):
                keys.append(key)
                previous = key
    return keys


def _segment_pattern(segment: str) -> str:
    return re.sub(r"\{[^}]*\}|<[^>]*>", "*", segment)


def documented(key: str, patterns: list[str]) -> bool:
    """A ``{placeholder}`` of the code and a ``<placeholder>`` of the stats page each match any text."""
    parts = [_segment_pattern(s) for s in key.split("/")]
    for pattern in patterns:
        other = [_segment_pattern(s) for s in pattern.split("/")]
        if len(other) == len(parts) and all(
            fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a) for a, b in zip(parts, other, strict=True)
        ):
            return True
    return False


def test_the_stat_key_scan_finds_the_known_keys() -> None:
    """The scan itself: if the code's way of writing keys changes, this fails instead of passing vacuously."""
    keys = stat_keys_written_by_code()
    assert {"idcrawl/targets", "idcrawl/dispensed", "idcrawl/lanes/{lane_key}/cut_reason"} <= keys
    assert any(key.startswith("idcrawl/limits/") for key in keys)
    assert any(key.startswith("idcrawl/politeness/") for key in keys)
    assert "idcrawl/lanes/{lane_key}" not in keys  # a prefix, not a key
    assert "idcrawl/politeness/slots/<slot>/max_delay" in stat_keys_documented()


def test_every_stat_the_code_writes_is_on_the_stats_page() -> None:
    patterns = stat_keys_documented()
    undocumented = sorted(key for key in stat_keys_written_by_code() if not documented(key, patterns))
    assert undocumented == []


def test_a_made_up_stat_would_be_reported() -> None:
    patterns = stat_keys_documented()
    assert not documented("idcrawl/nonsense", patterns)
    assert not documented("idcrawl/lanes/{key}/nonsense/deeper", patterns)


# -- the README stays a front page, the manual holds the rest

def test_the_readme_is_short_and_reaches_the_concepts_on_its_first_screen() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert any("**Lane**" in line for line in lines[:60])


def test_every_page_of_the_manual_is_in_a_toctree() -> None:
    """Sphinx warns about an orphan page too; this says which one without a build."""
    index = (DOCS / "index.md").read_text()
    entries = set(re.findall(r"^([\w/-]+)$", index, re.M))
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md") if "_build" not in p.parts}
    assert sorted(pages - entries - {"index"}) == []


def _build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(source), str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )


def test_a_broken_cross_reference_fails_the_docs_build(tmp_path: Path) -> None:
    """``make docs`` (part of ``make test``) runs ``sphinx-build -W``: a link to a missing section is an error."""
    source = tmp_path / "docs"
    shutil.copytree(DOCS, source, ignore=shutil.ignore_patterns("_build"))
    (tmp_path / "idcrawl" / "schemas").mkdir(parents=True)  # what the pages include from the package
    shutil.copy(REPO / "idcrawl" / "schemas" / "incidents.xsd", tmp_path / "idcrawl" / "schemas")
    page = source / "politeness.md"
    page.write_text(page.read_text() + "\nSee [nowhere](limits.md#no-such-section).\n")
    proc = _build(source, tmp_path / "html")
    assert proc.returncode != 0
    assert "no-such-section" in proc.stderr


def test_every_setting_has_an_anchor_the_search_and_links_land_on(tmp_path: Path) -> None:
    """docs/conf.py makes each `IDCRAWL_*` of the settings tables a `setting` object: an anchor on its row,
    an entry of the search index's objects and of the general index, a target of {setting}`IDCRAWL_X`."""
    import json

    source = tmp_path / "docs"
    (source / "reference").mkdir(parents=True)
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    shutil.copytree(DOCS / "_static", source / "_static")
    shutil.copy(SETTINGS_PAGE, source / "reference" / "settings.md")
    (source / "index.md").write_text(
        "# idcrawl\n\nSee {setting}`IDCRAWL_MARGIN`.\n\n```{toctree}\nreference/settings\n```\n"
    )
    # not -W: the page's links to the rest of the manual are missing here (make docs checks them)
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(source), str(tmp_path / "html")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (tmp_path / "html" / "reference" / "settings.html").read_text()
    defaults = {n for n in dir(default_settings) if n.startswith("IDCRAWL_")}
    assert sorted(n for n in defaults if f'id="setting-{n}"' not in html) == []
    index = (tmp_path / "html" / "searchindex.js").read_text()
    search = json.loads(index[index.index("(") + 1:index.rindex(")")])
    objects = {entry[4] for entries in search["objects"].values() for entry in entries}
    assert defaults <= objects, sorted(defaults - objects)
    assert search["objnames"] == {"0": ["std", "setting", "setting"]}
    assert 'href="reference/settings.html#setting-IDCRAWL_MARGIN"' in (tmp_path / "html" / "index.html").read_text()
    assert "IDCRAWL_MARGIN (setting)" in (tmp_path / "html" / "genindex.html").read_text()
