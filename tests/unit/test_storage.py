"""idcrawl.storage: a failed write is reported once and closes the crawl; Scrapy's JOBDIR files left
unreadable are rebuilt (real crawls on a full tmpfs: tests/crawl/test_storage_crawl.py)."""

from __future__ import annotations

import errno
import io
import json
import logging
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from idcrawl._scrapy import repair_jobdir
from idcrawl.storage import GuardedFile, report_storage_error, storage_failed, storage_problem


class FakeCrawler:
    engine = None  # the spider is not open: nothing to close

    def __init__(self) -> None:
        self.stats = self

    def set_value(self, key: str, value: Any) -> None:
        setattr(self, key.replace("/", "_"), value)


class FailingRaw(io.FileIO):
    """A file whose writes fail with ``error`` after ``good`` successful ones."""

    def __init__(self, path: Path, error: int, good: int = 0) -> None:
        super().__init__(path, "w")
        self.error, self.good = error, good

    def write(self, data: Any) -> int:
        if self.good <= 0:
            raise OSError(self.error, "simulated")
        self.good -= 1
        return super().write(data)


def test_storage_errors_are_those_of_a_file_system_that_cannot_take_the_write() -> None:
    for code in (errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT):
        assert storage_problem(OSError(code, "x")) == f"[Errno {code}] x"
    assert storage_problem(OSError(errno.EACCES, "denied")) is None
    assert storage_problem(ValueError("x")) is None
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # type: ignore[attr-defined]
    assert storage_problem(full) == "database or disk is full"
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5  # type: ignore[attr-defined]
    assert storage_problem(locked) is None


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_a_feed_file_reports_its_first_failed_write_once_and_drops_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, code: int
) -> None:
    crawler = FakeCrawler()
    path = tmp_path / "items.jsonl"
    feed = GuardedFile(FailingRaw(path, code, good=1), str(path), crawler)
    with caplog.at_level(logging.INFO, logger="idcrawl.storage"):
        for n in range(3000):  # several buffer spills
            assert feed.write(b'{"id": %d}\n' % n) > 0
        feed.flush()
        feed.close()
        report_storage_error(crawler, tmp_path / "other", "[Errno 28] x")
    assert feed.failed and feed.closed
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and str(path) in errors[0].getMessage() and f"[Errno {code}]" in errors[0].getMessage()
    assert [r.levelno for r in caplog.records if "also not written" in r.getMessage()] == [logging.INFO]
    assert storage_failed(crawler) == str(path)


def test_a_feed_file_raises_other_errors(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    feed = GuardedFile(FailingRaw(path, errno.EBADF), str(path), FakeCrawler())
    feed.write(b"x" * 10)
    with pytest.raises(OSError, match="simulated"):
        feed.flush()


def test_a_sound_feed_file_is_an_ordinary_buffered_file(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    feed = GuardedFile(io.FileIO(path, "w"), str(path), FakeCrawler())
    text = io.TextIOWrapper(feed, encoding="utf-8")  # as the CSV exporter wraps it
    text.write("a,b\n")
    text.close()
    assert path.read_text() == "a,b\n" and not feed.failed


def test_jobdir_files_left_empty_or_cut_are_rebuilt_once(tmp_path: Path) -> None:
    queue = tmp_path / "requests.queue"
    (queue / "127.0.0.1-0").mkdir(parents=True)
    (queue / "127.0.0.1-0" / "0").write_bytes(b"\x00\x00")
    (queue / "active.json").write_text('{"127.0.0.1-0": [0')  # cut
    (tmp_path / "spider.state").write_bytes(pickle.dumps({"a": 1})[:5])
    (tmp_path / "requests.seen").write_bytes(b"0123\n45")
    rebuilt = repair_jobdir(tmp_path)
    assert [phrase.split(" ")[0] for phrase in rebuilt] == ["requests.queue", "spider.state", "requests.seen"]
    assert not queue.exists() and not (tmp_path / "spider.state").exists()
    assert (tmp_path / "requests.seen").read_bytes() == b"0123\n45\n"
    assert repair_jobdir(tmp_path) == []


def test_sound_jobdir_files_are_left_alone(tmp_path: Path) -> None:
    queue = tmp_path / "requests.queue"
    queue.mkdir()
    (queue / "active.json").write_text(json.dumps({"127.0.0.1-0": [0]}))
    (tmp_path / "spider.state").write_bytes(pickle.dumps({"a": 1}))
    (tmp_path / "requests.seen").write_bytes(b"0123\n")
    assert repair_jobdir(tmp_path) == []
    assert (queue / "active.json").exists() and pickle.loads((tmp_path / "spider.state").read_bytes()) == {"a": 1}
    assert repair_jobdir(tmp_path / "missing") == []
