"""WACZ packages of a job's WARC files: its found pages as pages.jsonl, packed by py-wacz (``scrapy idwacz``).

A found page (an id found, a crawl-scope page harvested) is listed at its first capture in the files (a
response or a revisit record); found pages without a capture are counted, not listed. ``wacz create`` does the
rest: the CDXJ index, datapackage.json and its digest (docs/archiving.md, "WACZ packages").
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from idcrawl.core.lanes import Outcome
from idcrawl.core.urlqueue import QueueState
from idcrawl.state.base import StateStore

__all__ = ["PAGES_FORMAT", "Packed", "WaczError", "first_captures", "found_pages", "pack", "pages_lines", "warc_files"]

#: The header line of a WACZ page list.
PAGES_FORMAT = "json-pages-1.0"


class WaczError(ValueError):
    """A package that cannot be made; ``str()`` is one line."""


@dataclass(frozen=True, slots=True)
class Packed:
    """What :func:`pack` wrote: the package, its pages and the found pages with no capture in the files."""

    path: Path
    warcs: int
    pages: int
    uncaptured: int


def found_pages(store: StateStore) -> list[str]:
    """The URLs of the found pages in the state: each target's found ids by its URL template, in id order,
    then the crawl-scope pages harvested without an error, in URL order."""
    urls: list[str] = []
    for name in store.targets():
        state = store.load(name)
        if state is None:
            continue
        template = state.params.get("url")
        found = state.outcomes.get(Outcome.FOUND)
        if isinstance(template, str) and found is not None:
            urls.extend(template.format(id=id_) for id_ in found)
    harvested = sorted(
        entry.url for entry in store.load_urls()
        if entry.state is QueueState.HARVESTED and not entry.record.not_found and not entry.record.errors
    )
    return urls + harvested


def warc_files(paths: Sequence[Path]) -> list[Path]:
    """The ``*.warc.gz`` files named, or in the folders named, sorted by name (each file's name starts with
    the job and its UTC time, so a job's files sort in the order they were written)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.warc.gz")))
        elif path.is_file():
            files.append(path)
        else:
            raise WaczError(f"WARC {str(path)!r} is neither a file nor a folder")
    if not files:
        raise WaczError(f"no *.warc.gz file in {', '.join(repr(str(p)) for p in paths)}")
    return files


def first_captures(files: Iterable[Path]) -> dict[str, str]:
    """Each captured URL's first WARC-Date (response and revisit records, files and records in order)."""
    from warcio.archiveiterator import ArchiveIterator

    first: dict[str, str] = {}
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit"):
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    if url and url not in first:
                        first[url] = record.rec_headers.get_header("WARC-Date")
    return first


def pages_lines(found: Iterable[str], captures: dict[str, str], title: str) -> tuple[list[str], int]:
    """pages.jsonl's lines (a header, then one page per captured found URL) and the uncaptured count."""
    lines = [json.dumps({"format": PAGES_FORMAT, "id": "pages", "title": title})]
    uncaptured = 0
    seen: set[str] = set()
    for url in found:
        if url in seen:
            continue
        seen.add(url)
        date = captures.get(url)
        if date is None:
            uncaptured += 1
            continue
        lines.append(json.dumps({"url": url, "ts": date, "title": url}))
    return lines, uncaptured


def pack(files: Sequence[Path], found: Iterable[str], out: Path, title: str) -> Packed:
    """Write the WACZ package ``out`` of ``files`` with the found pages captured in them."""
    from wacz.main import main as wacz_main

    if out.suffix != ".wacz":
        raise WaczError(f"-o {str(out)!r}: the package's name must end in .wacz")
    lines, uncaptured = pages_lines(found, first_captures(files), title)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="idwacz-") as tmp:
        pages = Path(tmp) / "pages.jsonl"
        pages.write_text("\n".join(lines) + "\n", encoding="utf-8")
        said = io.StringIO()
        args = ["create", "-o", str(out), "--title", title, *(["-p", str(pages)] if len(lines) > 1 else []),
                *map(str, files)]
        with contextlib.redirect_stdout(said):
            status = wacz_main(args)
    if status:
        raise WaczError(f"wacz create exited {status}: {said.getvalue().strip().splitlines()[-1:]}")
    return Packed(out, len(files), len(lines) - 1, uncaptured)
