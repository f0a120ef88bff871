"""Feed marks (IDCRAWL_STATE_EMIT_ONCE): stored by both state stores (Redis: tests/integration/test_feed_marks_redis.py),
read back from feed files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

from pyroaring import BitMap64
from scrapy.settings import Settings

from idcrawl.core.lanes import Outcome
from idcrawl.core.targets import parse_target
from idcrawl.feeds import overwritten_feeds, recover_feed_tails
from idcrawl.local.worker import own_line
from idcrawl.state import SqliteStateStore
from idcrawl.state.base import FeedMarks


def _line(target: str, id_: int) -> bytes:
    return json.dumps({"target": target, "id": id_, "url": f"http://x/{id_}"}).encode() + b"\n"


# -- stores ---------------------------------------------------------------------------


def test_sqlite_keeps_the_feed_marks_of_the_latest_run(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite")
    assert store.feed_marks() is None
    store.commit({"t": {}}, {}, {}, feeds=FeedMarks(1, {"/a.jsonl": 10, "/b.jsonl": -1}))
    store.commit({}, {"t": {Outcome.FOUND: BitMap64([5])}}, {}, feeds=FeedMarks(1, {"/a.jsonl": 250}))
    assert store.feed_marks() == FeedMarks(1, {"/a.jsonl": 250, "/b.jsonl": -1})
    store.commit({}, {}, {}, feeds=FeedMarks(2, {"/c.jsonl": 0}))
    store.commit({}, {}, {})  # a commit without marks leaves them as they were
    store.close()
    reader = SqliteStateStore(tmp_path / "state.sqlite", read_only=True)
    assert reader.feed_marks() == FeedMarks(2, {"/c.jsonl": 0})
    reader.close()


def test_a_state_file_from_before_feed_marks_is_read_and_gets_the_table_when_written(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path)
    store.commit({"t": {"url": "u"}}, {"t": {Outcome.FOUND: BitMap64([1, 2])}}, {})
    store.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE feeds")  # as an older idcrawl wrote it
    db.commit()
    db.close()
    reader = SqliteStateStore(path, read_only=True)
    assert reader.feed_marks() is None
    state = reader.load("t")
    assert state is not None and list(state.outcomes[Outcome.FOUND]) == [1, 2]
    reader.close()
    writer = SqliteStateStore(path)
    assert writer.feed_marks() is None
    writer.commit({}, {}, {}, feeds=FeedMarks(3, {"/a.jsonl": 7}))
    assert writer.feed_marks() == FeedMarks(3, {"/a.jsonl": 7})
    writer.close()


# -- reading a feed's tail back ---------------------------------------------------------


def test_the_complete_lines_past_a_mark_are_read_back(tmp_path: Path) -> None:
    feed = tmp_path / "run1.jsonl"
    committed = _line("t", 1) + _line("t", 2)
    tail = _line("t", 3) + b"not json\n" + b"[1, 2]\n" + _line("u", 9) + b'{"other": 1}\n' + _line("t", 4)
    feed.write_bytes(committed + tail + _line("t", 5)[:20])  # id 5's line was cut by the kill
    found = recover_feed_tails(FeedMarks(1, {str(feed): len(committed)})).found
    assert {target: sorted(ids) for target, ids in found.items()} == {"t": [3, 4], "u": [9]}


def test_a_feed_that_cannot_be_read_back_gives_nothing(tmp_path: Path) -> None:
    short = tmp_path / "short.jsonl"
    short.write_bytes(_line("t", 1))  # rewritten since the mark: shorter than it
    other = tmp_path / "other.jsonl"
    other.write_bytes(_line("t", 2) + _line("t", 3))
    marks = FeedMarks(4, {
        str(short): 1000,
        str(tmp_path / "gone.jsonl"): 0,
        str(other): -1,  # not readable back (several items per id, another format, ...)
        str(tmp_path): 0,  # a directory
    })
    assert not recover_feed_tails(marks).found
    assert not recover_feed_tails(None).found


def test_the_feeds_a_run_overwrites_are_read_from_the_feeds_setting(tmp_path: Path) -> None:
    def crawler(feeds: dict[str, dict[str, object]]) -> SimpleNamespace:
        return SimpleNamespace(settings=Settings({"FEEDS": feeds}))

    plain, uri = tmp_path / "a.jsonl", (tmp_path / "b.jsonl").as_uri()
    feeds = {str(plain): {"overwrite": True}, uri: {"overwrite": True}, str(tmp_path / "c.jsonl"): {},
             "s3://bucket/d.jsonl": {"overwrite": True}}
    assert overwritten_feeds(crawler(feeds)) == {str(plain), str(tmp_path / "b.jsonl")}
    # a path with placeholders: which file it overwrites is not known yet, so no feed is read back
    templated = crawler({str(tmp_path / "items-%(name)s.jsonl"): {"overwrite": True}})
    assert overwritten_feeds(templated) is None
    feed = tmp_path / "items-idseq.jsonl"
    feed.write_bytes(_line("t", 1))
    assert not recover_feed_tails(FeedMarks(2, {str(feed): 0}), skip=overwritten_feeds(templated)).found
    assert sorted(recover_feed_tails(FeedMarks(2, {str(feed): 0})).found["t"]) == [1]


def test_only_this_jobs_lines_are_read_back_and_the_others_are_counted(tmp_path: Path) -> None:
    """Another job appending to the feed (same target name, another template) must not pass for this job."""
    feed = tmp_path / "items.jsonl"
    mine = parse_target({"name": "t", "url": "http://x/{id}", "start": "1", "min": "1", "max": "100"})
    foreign = [
        json.dumps({"target": "t", "id": 6, "url": "http://y/6"}),  # same name, another site
        json.dumps({"target": "t", "id": 7, "url": "http://x/7/"}),  # not what the template renders
        json.dumps({"target": "t", "id": 500, "url": "http://x/500"}),  # outside the target's bounds
        json.dumps({"target": "u", "id": 8, "url": "http://x/8"}),  # a target this job does not have
        json.dumps({"target": "t", "id": 9}),  # no url
    ]
    feed.write_bytes(_line("t", 3) + "\n".join(foreign).encode() + b"\n" + _line("t", 4) + b'{"other": 1}\n')
    read = recover_feed_tails(FeedMarks(1, {str(feed): 0}), own=own_line([mine]))
    assert {target: sorted(ids) for target, ids in read.found.items()} == {"t": [3, 4]}
    assert read.foreign == len(foreign)
