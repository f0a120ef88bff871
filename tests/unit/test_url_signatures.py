"""What a crawl-scope page's harvest read (issues 31, 33): its URL record keeps the signature of its last
200 (news = another one, as for id pages; a 304 keeps it), its validators and its WARC capture, in the
in-memory queue and the SQLite store (an older ``urls`` table gets the columns), against
``url_news_truth`` in tests/support/reference.py. The fleet's queue: tests/integration/test_redis_url_signatures.py.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idcrawl.core.scope import (
    CrawlProfile,
    Harvest,
    JobScope,
    PageRead,
    Seed,
    UrlRecord,
    has_news,
    read_into,
    url_body_due,
)
from idcrawl.core.urlqueue import MemoryUrlQueue, QueuedUrl, QueueState
from idcrawl.requests import outlink_request
from idcrawl.state import SqliteStateStore
from tests.support.reference import url_news_truth

FRONT = "http://a.test/"
SCOPE = JobScope({"front": Seed("front", FRONT, ("p",))}, {"p": CrawlProfile("p", 1, revisit=1.0)}, {}, ("front",))

Answer = tuple[str, str | None, str | None]
ANSWERS = st.lists(st.tuples(st.sampled_from(["200", "200", "304", "404", "error"]), st.sampled_from(["x", "y"]),
                             st.sampled_from([None, "c1", "c2"])), min_size=1, max_size=10)


def capture_of(name: str | None) -> tuple[str, str, str] | None:
    return None if name is None else (FRONT, f"2026-01-01T00:00:0{name[-1]}.000000Z", f"sha1:{name.upper()}")


def drive(queue: Any, answers: Sequence[Answer], holds: Sequence[bool]) -> list[bool]:
    """The front page taken and answered ``answers`` in turn (a 200 held until written when ``holds``
    says so): whether each gave an item (:func:`has_news` with the record the take handed out)."""
    queue.seed("front", FRONT, 0.0)
    items = []
    now = 0.0
    for (answer, checksum, capture), hold in zip(answers, holds, strict=True):
        record = queue.take(lambda _: True, now)
        assert record is not None and record.url == FRONT
        if answer == "200":
            items.append(has_news(record.checksum, checksum))
            read = PageRead(checksum, f'"{checksum}"', None, capture_of(capture), now)
            if hold:
                queue.fetched(FRONT, [], now, hold=True)
                queue.written(FRONT, now, read)
            else:
                queue.fetched(FRONT, [], now, read=read)
        elif answer == "304":
            items.append(False)
            queue.fetched(FRONT, [], now)  # nothing read: the stored signature stays
        else:
            items.append(False)
            queue.failed(FRONT, Harvest.NOT_FOUND if answer == "404" else Harvest.ERROR, now)
        now += 2.0
    return items


def check(queue: Any, answers: Sequence[Answer], holds: Sequence[bool]) -> None:
    items = drive(queue, answers, holds)
    want, checksum, capture, last_read = url_news_truth(answers)
    assert items == want
    record = queue.get(FRONT).record
    assert (record.checksum, record.capture) == (checksum, capture_of(capture))
    assert record.read_at == (None if last_read is None else 2.0 * last_read)  # drive's clock
    assert record.etag == (None if checksum is None else f'"{checksum}"')


@given(answers=ANSWERS, data=st.data())
def test_a_url_pages_answers_give_items_and_keep_signatures_as_the_reference_says(answers: list[Answer],
                                                                                    data: Any) -> None:
    holds = data.draw(st.lists(st.booleans(), min_size=len(answers), max_size=len(answers)))
    queue = MemoryUrlQueue(rng=random.Random(1))
    queue.start(SCOPE, 0.0)
    check(queue, answers, holds)


def test_a_304_or_nothing_read_keeps_the_record_and_a_200_without_a_capture_keeps_the_stored_one() -> None:
    record = UrlRecord(FRONT, "front", None, ("p",), checksum="x", etag='"x"', capture=capture_of("c1"))
    assert read_into(record, None) is record
    changed = read_into(record, PageRead("y", None, "Mon, 12 Jan 2026 07:00:00 GMT"))
    assert (changed.checksum, changed.etag, changed.last_modified, changed.capture) == (
        "y", None, "Mon, 12 Jan 2026 07:00:00 GMT", capture_of("c1"))
    assert has_news(None, "x") and has_news("x", "y") and not has_news("x", "x")


def test_an_outlink_request_is_conditional_on_the_stored_validators_and_carries_the_stored_capture() -> None:
    def callback(response: Any) -> None:
        pass

    first = outlink_request(UrlRecord(FRONT, "front", None, ("p",)), callback=callback, errback=callback)
    assert first.meta == {"idcrawl_scope": {"url": FRONT}} and not first.headers
    record = UrlRecord(FRONT, "front", None, ("p",), checksum="x", etag='"x"',
                       last_modified="Mon, 12 Jan 2026 07:00:00 GMT", capture=capture_of("c1"))
    again = outlink_request(record, callback=callback, errback=callback)
    assert again.headers["If-None-Match"] == b'"x"'
    assert again.headers["If-Modified-Since"] == b"Mon, 12 Jan 2026 07:00:00 GMT"
    assert again.meta["idcrawl_scope"] == {"url": FRONT, "checksum": "x", "capture": list(capture_of("c1") or ())}
    assert again.meta["handle_httpstatus_list"] == [304] and again.meta["dont_cache"]
    forced = outlink_request(record, callback=callback, errback=callback, refetch=True)
    assert not forced.headers and forced.meta == {"idcrawl_scope": again.meta["idcrawl_scope"]}


def test_a_url_pages_revisit_is_unconditional_once_its_body_is_older_than_refetch_after() -> None:
    record = UrlRecord(FRONT, "front", None, ("p",), checksum="x", etag='"x"', read_at=100.0)
    assert not url_body_due(record, 100.0 + 50, 50)  # not older than refetch_after
    assert url_body_due(record, 100.0 + 50.5, 50)
    assert not url_body_due(record, 1e12, 0)  # 0: never
    assert not url_body_due(UrlRecord(FRONT, "front", None, ("p",)), 1e12, 50)  # no body stored
    assert url_body_due(UrlRecord(FRONT, "front", None, ("p",), checksum="x"), 0.0, 50)  # of unknown age
    assert read_into(record, PageRead("x", at=200.0)).read_at == 200.0
    assert read_into(record, PageRead("x")).read_at == 100.0  # a read without its time keeps the stored one


def test_the_urls_table_keeps_what_a_harvest_read_and_a_table_from_before_gets_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    x = QueuedUrl(UrlRecord("http://a.test/x", "s", None, ("p",), checksum="x", etag='"x"',
                            last_modified="Mon, 12 Jan 2026 07:00:00 GMT", capture=capture_of("c1"), read_at=12.5),
                  QueueState.HARVESTED)
    y = QueuedUrl(UrlRecord("http://a.test/y", "s", None, ("p",)), QueueState.QUEUED)
    store = SqliteStateStore(path)
    store.commit_urls([x, y], [])
    store.close()
    store = SqliteStateStore(path)
    assert [e.record for e in store.load_urls()] == [x.record, y.record]
    store.close()
    db = sqlite3.connect(path)  # a urls table written before signatures were kept
    for column in ("checksum", "etag", "last_modified", "capture", "read_at"):
        db.execute(f"ALTER TABLE urls DROP COLUMN {column}")
    db.commit()
    db.close()
    reader = SqliteStateStore(path, read_only=True)
    assert [e.record.checksum for e in reader.load_urls()] == [None, None]
    reader.close()
    store = SqliteStateStore(path)  # opened for writing: the columns are added
    store.commit_urls([x], [])
    assert [e.record for e in store.load_urls()] == [x.record, y.record]
    store.close()


def test_a_damaged_capture_in_the_urls_table_is_one_line_naming_it(tmp_path: Path) -> None:
    from idcrawl.state.decode import DamagedState

    path = tmp_path / "state.sqlite"
    store = SqliteStateStore(path)
    store.commit_urls([QueuedUrl(UrlRecord("http://a.test/x", "s", None, ("p",)), QueueState.QUEUED)], [])
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE urls SET capture = '[1, 2]'")
    db.commit()
    db.close()
    reader = SqliteStateStore(path, read_only=True)
    with pytest.raises(DamagedState, match=r"URL 'http://a.test/x': capture = "):
        reader.load_urls()
    reader.close()
