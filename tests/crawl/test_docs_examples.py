"""The manual's offline examples, run: every fenced block marked ``% example`` in ``docs/`` and the README.

A small collector rather than Sybil: the examples are shell commands and TOML job files (Sybil's MyST
parsers evaluate Python and doctest blocks; shell would need a parser and an evaluator of our own
anyway), and the examples of one page form one session: the job file one block writes is the one the
next block crawls, in one folder, against one demo site. The marker is a MyST comment line right above
the fence, so the rendered page shows nothing of it:

- ``% example: FILE``: the block's text is written to ``FILE`` (a TOML job file, say);
- ``% example``: the block runs with ``bash -e`` in the page's folder, ``scrapy`` being this
  Python's Scrapy with ``SCRAPY_SETTINGS_MODULE=idcrawl.settings``, and ``http://127.0.0.1:8000`` (the
  address ``python -m idcrawl.demo serve`` uses) replaced by a demo site of this test on a free port (and
  the port of a ``NAME.example:8000`` address, which ``IDCRAWL_RESOLVE`` sends to the demo site, with it).
  A ``scrapy crawl`` that sets no ``CLOSESPIDER_*`` bound of its own gets
  ``-s CLOSESPIDER_PAGECOUNT=400``, so a whole-site example stays a few seconds long: the example's
  arguments, settings and files are what is checked (a bad one exits non-zero), not its full output.
  Crawls are polite by default (a second or more between two requests to a host): a ``scrapy crawl``
  example of the demo site (the reader's own) must say so and turn politeness off (``IDCRAWL_PROFILE=fast``
  or ``IDCRAWL_POLITENESS_FACTOR=0``, on its command line or as its job file's ``profile = "fast"``).
- An example that runs pywb's ``wayback`` finds pywb's tools at the end of ``PATH`` (tests/support/wayback.py:
  skipped without them, except under CI=true), its port 8080 replaced by a free one; one that sets
  ``IDCRAWL_WARC_DIR`` is skipped, with that reason, while that setting does not exist (issue 33's writer).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from idcrawl import default_settings
from idcrawl.demo.site import DemoModel, IdSite
from tests.support.wayback import pywb_venv, require_pywb

REPO = Path(__file__).resolve().parents[2]
DEMO_ADDRESS = "http://127.0.0.1:8000"
MARK = re.compile(r"^% example(?:: (?P<file>\S+))?[ \t]*\n```[\w-]*\n(?P<body>.*?)^```", re.M | re.S)
PAGE_CAP = "-s CLOSESPIDER_PAGECOUNT=400"
WAYBACK_PORT = re.compile(r"(?<=127\.0\.0\.1:)8080\b|(?<=-p )8080\b")


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    file: str | None  # write the body to this file; None: run it
    body: str


def examples_of(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    return [
        Example(path.relative_to(REPO).as_posix(), text.count("\n", 0, m.start()) + 1, m.group("file"), m.group("body"))
        for m in MARK.finditer(text)
    ]


def pages() -> list[Path]:
    found = [p for p in sorted((REPO / "docs").rglob("*.md")) if "_build" not in p.parts]
    return [REPO / "README.md", *found]


PAGES = {p.relative_to(REPO).as_posix(): examples_of(p) for p in pages()}
PAGES = {name: found for name, found in PAGES.items() if found}


def test_the_collector_finds_the_examples() -> None:
    """If the marker or its pattern changed, this fails instead of every page passing with nothing run."""
    every = [e for found in PAGES.values() for e in found]
    assert len(every) >= 6
    assert any(e.file and e.file.endswith(".toml") for e in every)
    assert any("scrapy idcoverage" in e.body for e in every)


POLITENESS_OFF = ("IDCRAWL_PROFILE=fast", "IDCRAWL_POLITENESS_FACTOR=0")
JOB_ARG = re.compile(r"-a job=(\S+)")


def polite_crawls(body: str, files: dict[str, str]) -> list[str]:
    """The ``scrapy crawl`` commands of ``body`` that would crawl the demo site politely (a page a second)."""
    found = []
    for command in re.split(r"(?<!\\)\n", body):
        if not re.match(r"\s*scrapy crawl ", command) or any(off in command for off in POLITENESS_OFF):
            continue
        job = JOB_ARG.search(command)
        if job and re.search(r'^profile = "fast"', files.get(job.group(1), ""), re.M):
            continue
        found.append(command)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LOCAL_NAME = re.compile(r"(\.example):8000\b")


def local(text: str, site_address: str) -> str:
    """``text`` with the demo site's address (and a ``NAME.example:8000`` name's port) of this test."""
    return LOCAL_NAME.sub(rf"\g<1>:{site_address.rsplit(':', 1)[1]}", text.replace(DEMO_ADDRESS, site_address))


def shell(body: str, site_address: str) -> str:
    body = local(body, site_address)
    lines = []
    for command in re.split(r"(?<!\\)\n", body):  # a command with its continuation lines
        if re.match(r"\s*scrapy crawl ", command) and "CLOSESPIDER_" not in command:
            command = command.replace("scrapy crawl ", f"scrapy crawl {PAGE_CAP} ", 1)
        lines.append(command)
    return "\n".join(lines)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_offline_examples_of_a_page_run(page: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scrapy = bin_dir / "scrapy"
    scrapy.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m scrapy "$@"\n')
    scrapy.chmod(0o755)
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    if any("IDCRAWL_WARC_DIR" in e.body for e in PAGES[page]) and not hasattr(default_settings, "IDCRAWL_WARC_DIR"):
        pytest.skip("IDCRAWL_WARC_DIR is not a setting yet (issue 33's WARC writer)")
    if any(re.search(r"^\s*wayback ", e.body, re.M) for e in PAGES[page]):
        require_pywb()
        env["PATH"] += f"{os.pathsep}{pywb_venv() / 'bin'}"
    work = tmp_path / "work"
    work.mkdir()
    files: dict[str, str] = {}
    with IdSite(DemoModel()) as site:
        address = site.url().removesuffix("/notice/{id}")
        for example in PAGES[page]:
            where = f"{example.page}:{example.line}"
            if example.file:
                files[example.file] = example.body
                (work / example.file).parent.mkdir(parents=True, exist_ok=True)
                (work / example.file).write_text(local(example.body, address), encoding="utf-8")
                continue
            assert polite_crawls(example.body, files) == [], f"{where}: a crawl of the demo site, politeness on"
            proc = subprocess.run(
                ["bash", "-e", "-c", WAYBACK_PORT.sub(str(free_port()), shell(example.body, address))],
                cwd=work, env=env, capture_output=True, text=True, timeout=240, check=False,
            )
            assert proc.returncode == 0, f"{where}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
