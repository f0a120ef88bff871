"""The session-end WARC check (tests/conftest.py, tests/support/warcs.py): it passes a good file and names
a cut one, a changed body and a file that is not a WARC."""

from __future__ import annotations

import gzip
from pathlib import Path

from tests.support.warcs import Capture, allow_broken, check_warc, write_captures

URL = "http://127.0.0.1:8123/item/"


def _warc(path: Path) -> Path:
    write_captures(path, [Capture(f"{URL}{n}", "2026-11-28T10:00:00Z", f"<p>page {n}</p>".encode() * 50)
                          for n in range(5)])
    return path


def test_a_file_written_record_by_record_passes(tmp_path: Path) -> None:
    assert check_warc(_warc(tmp_path / "a.warc.gz")) == []
    assert (tmp_path / "a.warc.gz.cdxj").read_text().count("\n") == 5  # the responses; requests are not indexed


def test_a_cut_last_record_is_named(tmp_path: Path) -> None:
    path = _warc(tmp_path / "a.warc.gz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    allow_broken(path)
    problems = check_warc(path)
    assert problems and str(path) in problems[0]


def test_a_body_that_does_not_match_its_digest_is_named(tmp_path: Path) -> None:
    path = _warc(tmp_path / "a.warc.gz")
    raw = b"".join(gzip.decompress(path.read_bytes()).split(b"<p>page 3</p>", 1))  # drop 13 bytes of one body
    raw = raw.replace(b"<p>page 2</p>", b"<p>PAGE 2</p>", 1)  # and change one without changing its length
    path.write_bytes(gzip.compress(raw))
    allow_broken(path)
    problems = check_warc(path)
    assert problems and "warcio check failed" in problems[0]


def test_a_file_that_is_not_a_warc_is_named(tmp_path: Path) -> None:
    path = tmp_path / "b.warc.gz"
    path.write_bytes(gzip.compress(b"not a WARC record\r\n\r\n"))
    allow_broken(path)
    assert check_warc(path)


def test_the_session_check_would_fail_on_a_file_left_broken(tmp_path: Path) -> None:
    """What the conftest fixture does at the end, on a folder with one good and one cut file."""
    good, cut = _warc(tmp_path / "good.warc.gz"), _warc(tmp_path / "cut.warc.gz")
    cut.write_bytes(cut.read_bytes()[:-10])
    allow_broken(cut)
    found = [p for path in sorted(tmp_path.rglob("*.warc.gz")) for p in check_warc(path)]
    assert len(found) >= 1 and all("cut.warc.gz" in p for p in found) and check_warc(good) == []
