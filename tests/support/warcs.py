"""WARC files for the tests: written with warcio as idcrawl's writer writes them, and checked as the suite ends.

:func:`write_captures` writes request/response pairs and revisits (one ``.warc.gz`` per call, a ``.cdxj``
beside it by cdxj-indexer), to check the replay harness and the WACZ packaging without a crawl.
:func:`read_warcs` reads back what a crawl wrote (``IDCRAWL_WARC_DIR``). :func:`check_warc` is what
tests/conftest.py runs over every ``*.warc.gz`` the suite wrote under its temp folders: ``warcio check`` (digests) and a full index pass; :func:`allow_broken` exempts a file a test cut on purpose.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

__all__ = ["Capture", "Record", "allow_broken", "check_warc", "exempt", "read_warcs", "write_captures"]

NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

#: Files a test broke on purpose (a cut last record it then checks): not checked at the session's end.
_EXEMPT: set[Path] = set()


def allow_broken(path: Path) -> None:
    _EXEMPT.add(Path(path).resolve())


def exempt(path: Path) -> bool:
    return Path(path).resolve() in _EXEMPT


@dataclass(frozen=True)
class Capture:
    """One fetch: a response (``body``), or a revisit of the capture at (``refers_url``, ``refers_date``).

    ``revisit``: None (a response), "304" (server-not-modified; ``block_headers``: keep the 304's headers in
    the record's block, else an empty block) or "same" (identical-payload-digest, the new 200's headers).
    """

    url: str
    date: str  # WARC-Date, ISO 8601 with Z
    body: bytes = b""
    status: str = "200 OK"
    headers: Sequence[tuple[str, str]] = (("Content-Type", "text/html; charset=utf-8"),)
    revisit: str | None = None
    refers_date: str = ""
    digest: str = ""  # the stored capture's payload digest (a revisit's)
    block_headers: bool = True
    extra: dict[str, str] = field(default_factory=dict)


def _http(status: str, headers: Sequence[tuple[str, str]], body: bytes) -> object:
    from warcio.statusandheaders import StatusAndHeaders

    return StatusAndHeaders(status, [*headers, ("Content-Length", str(len(body)))], protocol="HTTP/1.1")


def write_captures(path: Path, captures: Sequence[Capture], *, job: str = "test") -> dict[str, str]:
    """Write ``captures`` to ``path`` (a ``.warc.gz``: warcinfo, then per capture its response or revisit and
    its request) and a CDXJ index beside it; returns each response's payload digest by (url, date)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    digests: dict[str, str] = {}
    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
        writer.write_record(writer.create_warcinfo_record(
            path.name, {"software": "idcrawl tests", "job": job, "format": "WARC File Format 1.1"}))
        for cap in captures:
            warc_headers = {"WARC-Date": cap.date, **cap.extra}
            if cap.revisit is None:
                record = writer.create_warc_record(
                    cap.url, "response", payload=io.BytesIO(cap.body),
                    http_headers=_http(cap.status, cap.headers, cap.body), warc_headers_dict=warc_headers)
                digests[f"{cap.url} {cap.date}"] = record.rec_headers.get_header("WARC-Payload-Digest")
            else:
                profile = NOT_MODIFIED if cap.revisit == "304" else IDENTICAL
                if cap.revisit == "304":
                    http = _http("304 Not Modified", cap.headers, b"") if cap.block_headers else None
                else:
                    http = _http(cap.status, cap.headers, cap.body)
                record = writer.create_revisit_record(
                    cap.url, digest=cap.digest, refers_to_uri=cap.url, refers_to_date=cap.refers_date,
                    http_headers=http, warc_headers_dict=warc_headers)
                record.rec_headers.replace_header("WARC-Profile", profile)
            host = cap.url.split("/")[2]
            path_part = "/" + cap.url.split("/", 3)[3] if cap.url.count("/") >= 3 else "/"
            request = writer.create_warc_record(
                cap.url, "request", payload=io.BytesIO(b""),
                http_headers=StatusAndHeaders(f"GET {path_part} HTTP/1.1", [("Host", host)], is_http_request=True),
                warc_headers_dict={"WARC-Date": cap.date,
                                   "WARC-Concurrent-To": record.rec_headers.get_header("WARC-Record-ID")})
            writer.write_record(record)
            writer.write_record(request)
    _index(path)
    return digests


def _index(path: Path) -> None:
    from cdxj_indexer.main import CDXJIndexer

    from idcrawl.archive.files import INDEXED

    with path.with_name(path.name + ".cdxj").open("w") as out:
        CDXJIndexer(output=out, inputs=[str(path)], sort=True, records=INDEXED).process_all()


def check_warc(path: Path) -> list[str]:
    """What is wrong with the WARC file at ``path`` (empty: nothing): its gzip members are whole, every record
    parses, its block and payload digests match (``warcio check``), and an index pass reads it to its end."""
    from cdxj_indexer.main import CDXJIndexer
    from warcio.checker import Checker

    problems: list[str] = []
    try:  # warcio reads a cut last gzip member as a short record without a word: read every member to its end
        with gzip.open(path, "rb") as whole:
            while whole.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(f"{path}: not whole gzip members: {exc}")

    class _Args:
        inputs = [str(path)]
        verbose = False

    checker = Checker(_Args())
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            status = checker.process_all()
    except Exception as exc:  # a record warcio cannot read at all
        return [f"{path}: warcio check raised {type(exc).__name__}: {exc}"]
    if status:
        problems.append(f"{path}: warcio check failed: {out.getvalue().strip()[-1000:]}")
    try:
        lines = io.StringIO()
        CDXJIndexer(output=lines, inputs=[str(path)], sort=True).process_all()
        if not lines.getvalue().strip():
            problems.append(f"{path}: no record indexed")
    except Exception as exc:
        problems.append(f"{path}: indexing raised {type(exc).__name__}: {exc}")
    return problems


@dataclass
class Record:
    """One WARC record's headers that the tests look at (and its HTTP status, for responses and revisits)."""

    file: str
    type: str
    uri: str
    date: str
    headers: dict[str, str]
    status: int | None
    body: bytes


def read_warcs(folder: Path, pattern: str = "*.warc.gz") -> list[Record]:
    """Every record of the finished files in ``folder``, file by file in name order (a cut or bad file raises)."""
    records = []
    for path in sorted(folder.glob(pattern)):
        with open(path, "rb") as file:
            for record in ArchiveIterator(file, check_digests="raise"):
                status = None
                if record.http_headers is not None and record.rec_type in ("response", "revisit"):
                    status = int(record.http_headers.get_statuscode())
                records.append(Record(
                    path.name, record.rec_type, record.rec_headers.get_header("WARC-Target-URI") or "",
                    record.rec_headers.get_header("WARC-Date") or "", dict(record.rec_headers.headers),
                    status, record.content_stream().read(),
                ))
    return records
