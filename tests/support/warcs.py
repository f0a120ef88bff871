"""Reading back the WARC files a crawl wrote (``IDCRAWL_WARC_DIR``), for the archive tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator


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
