"""The page schedule records of a crawl (idcrawl.core.pagebook) and their place in the state stores."""

from __future__ import annotations

import sqlite3
from email.utils import formatdate
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.clock import Clock
from idcrawl.core.fingerprints import html_text
from idcrawl.core.lanes import Outcome as LaneOutcome
from idcrawl.core.pagebook import PageBook, PageEvent, by_target, schedule_from_json, schedule_to_json
from idcrawl.core.recrawl import DAY, Fetch, Outcome, Policy, signature_of
from idcrawl.state import SqliteStateStore
from tests.support.reference import page_revisits_truth, page_signals_truth

T0 = 1_768_201_200.0
OK = Outcome.OK


def book(now: float = T0, **policy: float) -> PageBook:
    return PageBook(Clock(now), {"reg": Policy(**policy)} if policy else None)  # type: ignore[arg-type]


def ok(checksum: str, etag: str | None = None, last_modified: str | None = None) -> Fetch:
    return Fetch(OK, checksum, etag, last_modified)


def test_a_new_page_gets_revision_1_and_its_validators_are_sent_next_time() -> None:
    pages = book()
    visit = pages.visit("reg", 7, ok("a", '"e1"', "Mon, 12 Jan 2026 07:00:00 GMT"))
    assert visit.event is PageEvent.NEW and visit.revision == 1 and visit.emits and visit.previous_checksum is None
    assert pages.validators("reg", 7) == {"If-None-Match": '"e1"', "If-Modified-Since": "Mon, 12 Jan 2026 07:00:00 GMT"}
    assert pages.validators("reg", 8) == {}
    assert pages.get("reg", 7) is not None and pages.get("reg", 7).last_crawled == T0  # type: ignore[union-attr]


def test_304_unchanged_changed_and_a_200_after_a_304() -> None:
    pages = book()
    pages.visit("reg", 1, ok("a", '"e1"'))
    pages.clock.advance(2 * DAY)
    assert pages.visit("reg", 1, Fetch(Outcome.NOT_MODIFIED)).event is PageEvent.NOT_MODIFIED
    assert pages.validators("reg", 1) == {"If-None-Match": '"e1"'}  # a 304 keeps the validators
    pages.clock.advance(2 * DAY)
    after_304 = pages.visit("reg", 1, ok("a", '"e1"'))  # a 200 after a 304, the same signature: no news
    assert after_304.event is PageEvent.UNCHANGED and not after_304.emits
    pages.clock.advance(2 * DAY)
    same = pages.visit("reg", 1, ok("a", '"e1"'))
    assert same.event is PageEvent.UNCHANGED and not same.emits
    pages.clock.advance(2 * DAY)
    changed = pages.visit("reg", 1, ok("b", '"e2"'))
    assert (changed.event, changed.revision, changed.previous_checksum) == (PageEvent.CHANGED, 2, "a")
    assert pages.validators("reg", 1) == {"If-None-Match": '"e2"'}


def test_two_backends_304_and_200_alternating_never_make_news() -> None:
    """Issue 31 finding 1: a page that never changes behind one backend that answers 304 and one that
    ignores validators (200, the same body): no item, and the duration only grows."""
    pages = book()
    pages.visit("reg", 1, ok("a", '"e1"'))
    durations = []
    for n in range(12):
        pages.clock.advance(pages.get("reg", 1).update_duration + 1)  # type: ignore[union-attr]
        visit = pages.visit("reg", 1, Fetch(Outcome.NOT_MODIFIED) if n % 2 == 0 else ok("a", '"e1"'))
        assert not visit.emits
        durations.append(pages.get("reg", 1).update_duration)  # type: ignore[union-attr]
    assert durations == sorted(durations) and durations[0] == DAY * 1.8


def test_a_revisit_after_refetch_after_without_a_body_is_unconditional() -> None:
    pages = PageBook(Clock(T0), refetch_after=90 * DAY)
    pages.visit("reg", 1, ok("a", '"e1"', "Mon, 12 Jan 2026 07:00:00 GMT"))
    for _ in range(3):  # 304s for 90 days: still conditional
        pages.clock.advance(30 * DAY)
        assert pages.validators("reg", 1) and not pages.forced("reg", 1)
        pages.visit("reg", 1, Fetch(Outcome.NOT_MODIFIED))
    pages.clock.advance(1)
    assert pages.forced("reg", 1) and pages.validators("reg", 1) == {}  # 90 days and a second without a body
    changed = pages.visit("reg", 1, ok("b", '"e2"'))  # the server's 304s hid a change
    assert changed.event is PageEvent.CHANGED
    assert not pages.forced("reg", 1) and pages.validators("reg", 1) == {"If-None-Match": '"e2"'}
    never = PageBook(Clock(T0), refetch_after=0.0)
    never.visit("reg", 1, ok("a", '"e1"'))
    never.clock.advance(1000 * DAY)
    assert not never.forced("reg", 1) and never.validators("reg", 1) == {"If-None-Match": '"e1"'}


def test_a_record_of_before_body_at_is_refetched_after_a_304() -> None:
    pages = PageBook(Clock(T0 + 100 * DAY), refetch_after=90 * DAY)
    pages.load("reg", {
        1: schedule_from_json("reg", 1, '{"last_crawled": %r, "update_duration": 60.0, "checksum": "a", '
                                        '"etag": "e", "last_status": 304}' % (T0 + 99 * DAY)),
        2: schedule_from_json("reg", 2, '{"last_crawled": %r, "update_duration": 60.0, "checksum": "a", '
                                        '"etag": "e", "last_status": 200}' % (T0 + 99 * DAY)),
    })
    assert pages.forced("reg", 1) and not pages.forced("reg", 2)


def test_gone_counts_then_the_page_leaves_the_schedule() -> None:
    pages = book(gone_limit=2)
    pages.visit("reg", 1, ok("a"))
    pages.clock.advance(2 * DAY)
    assert pages.visit("reg", 1, Fetch(Outcome.MISSING)).event is PageEvent.GONE
    pages.clock.advance(2 * DAY)
    assert pages.visit("reg", 1, Fetch(Outcome.MISSING)).event is PageEvent.LEFT
    left = pages.take_changes()[("reg", 1)]  # kept, off the schedule: not taken for a page found before records
    assert left is not None and left.gone == 2 and pages.get("reg", 1) == left
    assert pages.due_ids("reg", T0 + 1000 * DAY, found=[1]) == []


def test_found_ids_without_a_record_are_due_first_in_id_order() -> None:
    pages = book()
    pages.visit("reg", 5, ok("a"))
    assert pages.due_ids("reg", T0 + 2 * DAY, found=[3, 5, 9]) == [3, 9, 5]
    assert pages.due_ids("reg", T0, found=[3, 5, 9]) == [3, 9]


def test_failed_a_replay_and_a_304_of_an_unknown_page_are_no_observation() -> None:
    pages = book()
    pages.visit("reg", 1, ok("a"))
    before = pages.get("reg", 1)
    assert pages.visit("reg", 1, ok("b")).event is PageEvent.NONE  # the same moment: a replay
    pages.clock.advance(DAY * 2)
    assert pages.visit("reg", 1, Fetch(Outcome.FAILED)).event is PageEvent.NONE
    assert pages.get("reg", 1) is before
    assert pages.visit("reg", 2, Fetch(Outcome.NOT_MODIFIED)).event is PageEvent.NONE
    assert pages.visit("reg", 2, Fetch(Outcome.MISSING)).event is PageEvent.NONE
    assert pages.get("reg", 2) is None


def test_due_ids_most_overdue_first() -> None:
    pages = book(inc_rate=0.4, dec_rate=0.2, initial_duration=DAY)
    for id_ in (1, 2, 3):
        pages.visit("reg", id_, ok(str(id_)))
    pages.clock.advance(2 * DAY)
    pages.visit("reg", 2, ok("2"))  # penalised: 1.4 d from now
    pages.visit("reg", 3, ok("x"))  # motivated: 0.8 d from now
    assert pages.due_ids("reg") == [1]
    assert pages.due_ids("reg", T0 + 2 * DAY + 0.9 * DAY) == [1, 3]
    assert pages.due_ids("reg", T0 + 10 * DAY) == [1, 3, 2]  # overdue / duration
    assert pages.due_ids("other") == []


def test_changes_and_awaited_items() -> None:
    pages = book()
    pages.visit("reg", 1, ok("a"))
    pages.visit("other", 5, ok("b"))
    assert pages.awaiting == {("reg", 1), ("other", 5)}
    pages.released("reg", 1)
    assert pages.awaiting == {("other", 5)}
    changes = pages.take_changes()
    assert set(changes) == {("reg", 1), ("other", 5)} and pages.take_changes() == {}
    assert set(by_target(changes.items())) == {"reg", "other"}
    pages.clock.advance(2 * DAY)
    pages.visit("reg", 1, Fetch(Outcome.NOT_MODIFIED))
    assert ("reg", 1) not in pages.awaiting  # no item: nothing to wait for


def test_a_crawl_book_keeps_no_record_once_visited_only_the_changes() -> None:
    pages = PageBook(Clock(T0), retain=False)
    pages.load("reg", {1: schedule_from_json("reg", 1, '{"last_crawled": 0.0, "update_duration": 60.0, '
                                                       '"checksum": "a", "etag": "\\"e\\""}')})
    assert pages.due_ids("reg") == [1] and pages.validators("reg", 1) == {"If-None-Match": '"e"'}
    assert pages.visit("reg", 1, Fetch(Outcome.NOT_MODIFIED)).event is PageEvent.NOT_MODIFIED
    assert pages.visit("reg", 2, ok("b")).event is PageEvent.NEW
    assert pages.get("reg", 1) is None and pages.get("reg", 2) is None  # memory: loaded records, changes
    changes = pages.take_changes()
    assert changes[("reg", 1)] is not None and changes[("reg", 1)].last_status == 304  # type: ignore[union-attr]
    assert changes[("reg", 2)] is not None and changes[("reg", 2)].checksum == "b"  # type: ignore[union-attr]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from(["200", "304", "missing", "failed"]),
                  st.sampled_from(["a", "b"]), st.sampled_from([0.0, 60.0, 3600.0, 2 * DAY])),
        max_size=40,
    ),
    st.integers(1, 3),
)
def test_the_book_equals_the_reference_model(steps: list[tuple[int, str, str, float]], gone_limit: int) -> None:
    policy = {"gone_limit": gone_limit, "min_duration": 60.0, "max_duration": 30 * DAY, "inc_rate": 0.4,
              "dec_rate": 0.2, "initial_duration": DAY}
    pages = book(**policy)  # type: ignore[arg-type]
    fetches: list[tuple[int, str, str | None, float]] = []
    events: list[tuple[str, int]] = []
    kinds = {"200": OK, "304": Outcome.NOT_MODIFIED, "missing": Outcome.MISSING, "failed": Outcome.FAILED}
    for id_, answer, checksum, step in steps:
        now = pages.clock.advance(step)
        fetches.append((id_, answer, checksum if answer == "200" else None, now))
        visit = pages.visit("reg", id_, Fetch(kinds[answer], checksum if answer == "200" else None))
        events.append((visit.event.value, visit.revision))
    want_events, want_left = page_revisits_truth(fetches, gone_limit, DAY, 0.4, 0.2, 60.0, 30 * DAY)
    assert events == want_events
    left = {}
    for id_ in range(1, 5):
        schedule = pages.get("reg", id_)
        if schedule is not None and schedule.gone < gone_limit:  # a record that left the schedule: gone
            left[id_] = (schedule.checksum, schedule.revision, schedule.update_duration, schedule.gone)
    assert left.keys() == want_left.keys()
    for id_, (checksum, revision, duration, gone) in left.items():
        want_checksum, want_revision, want_duration, want_gone = want_left[id_]
        assert (checksum, revision, gone) == (want_checksum, want_revision, want_gone)
        assert duration == pytest.approx(want_duration, rel=1e-12)


#: Pages of one notice: a clock and a token that change at every fetch, a script, a style, whitespace,
#: and the notice's text in two versions.
_PAGE = ("<html><head><style>p {{ color: red }}</style><script>var n = {n};</script></head><body>\n"
         "<h1>Notice{space}{title}</h1><p>Served at {clock}</p>\n<p>token={token}</p></body></html>")
_CLOCK, _TOKEN = r"Served at \d\d:\d\d:\d\d", r"token=\w+"


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 3), st.sampled_from(["200", "304", "missing"]), st.sampled_from(["A", "B"]),
            st.sampled_from(["07:00:00", "19:41:07"]), st.sampled_from(["x1", "q9"]), st.sampled_from([" ", "  \n"]),
            st.integers(1, 2), st.sampled_from([None, -10 * DAY, 0.0, 5 * DAY]),
            st.sampled_from([0.0, 60.0, 3600.0, 2 * DAY, 20 * DAY]),
        ),
        max_size=30,
    ),
    st.sampled_from(["body", "text"]), st.sampled_from([(), (_CLOCK,), (_CLOCK, _TOKEN)]), st.booleans(),
    st.sampled_from([0.0, 3 * DAY]), st.integers(1, 3),
)
def test_the_book_equals_the_signal_model(
    steps: list[tuple[int, str, str, str, str, str, int, float | None, float]], mode: str,
    drop: tuple[str, ...], sync: bool, refetch_after: float, gone_limit: int,
) -> None:
    """Signatures (body/text, drop patterns), Last-Modified sync and forced refetches: the page book
    against tests/support/reference.py's independent model (stdlib HTML parser, one pattern at a time)."""
    policy = Policy(inc_rate=0.4, dec_rate=0.2, min_duration=60.0, max_duration=30 * DAY, initial_duration=DAY,
                    gone_limit=gone_limit, signature=mode, signature_drop=drop, sync=sync)
    pages = PageBook(Clock(T0), {"reg": policy}, refetch_after=refetch_after)
    fetches: list[tuple[int, str, str | None, float | None, float]] = []
    events: list[tuple[str, int]] = []
    forced: list[bool] = []
    for id_, answer, title, clock, token, space, n, lm, step in steps:
        now = pages.clock.advance(step)
        body = _PAGE.format(title=title, clock=clock, token=token, space=space, n=n)
        modified = None if lm is None else T0 + lm
        header = None if modified is None else formatdate(modified, usegmt=True)
        if pages.get("reg", id_) is not None:
            forced.append(pages.forced("reg", id_))
        else:
            forced.append(False)
        if answer == "200":
            raw = body.encode()
            signature = signature_of(raw, policy, text=lambda raw=raw: html_text(raw), decoded=lambda body=body: body)
            fetch = Fetch(OK, signature, last_modified=header)
        else:
            fetch = Fetch(Outcome.NOT_MODIFIED if answer == "304" else Outcome.MISSING, last_modified=header)
        fetches.append((id_, answer, body if answer == "200" else None, modified, now))
        visit = pages.visit("reg", id_, fetch)
        events.append((visit.event.value, visit.revision))
    want_events, want_forced, want_pages = page_signals_truth(
        fetches, mode=mode, drop=drop, sync=sync, refetch_after=refetch_after, gone_limit=gone_limit,
        initial=DAY, inc_rate=0.4, dec_rate=0.2, lo=60.0, hi=30 * DAY)
    assert events == want_events
    assert forced == want_forced
    for id_, (duration, revision) in want_pages.items():
        record = pages.get("reg", id_)
        assert record is not None and record.revision == revision
        assert record.update_duration == pytest.approx(duration, rel=1e-12)


def test_clock_pages_make_news_with_body_and_none_with_text_and_drop() -> None:
    """Issue 31 finding 3: a page with a clock and a token changes at every fetch by its bytes."""
    fetches = [(1, "200", _PAGE.format(title="A", clock=f"0{h}:00:00", token=f"t{h}", space=" ", n=1), None,
                T0 + h * 2 * DAY) for h in range(6)]
    common = {"sync": False, "refetch_after": 0.0, "gone_limit": 3, "initial": DAY, "inc_rate": 0.8,
              "dec_rate": 0.2, "lo": 60.0, "hi": 30 * DAY}
    body_events, _, _ = page_signals_truth(fetches, mode="body", drop=(), **common)  # type: ignore[arg-type]
    text_events, _, _ = page_signals_truth(fetches, mode="text", drop=(_CLOCK, _TOKEN), **common)  # type: ignore[arg-type]
    assert [e for e, _ in body_events[1:]] == ["changed"] * 5
    assert [e for e, _ in text_events[1:]] == ["unchanged"] * 5


# -- the state stores ----------------------------------------------------------------------------


def test_a_record_round_trips_through_json() -> None:
    pages = book()
    pages.visit("reg", 9, ok("a", '"e"', "Mon, 12 Jan 2026 07:00:00 GMT"))
    record = pages.get("reg", 9)
    assert record is not None
    assert schedule_from_json("reg", 9, schedule_to_json(record)) == record


def test_sqlite_commits_page_records_with_the_outcomes_and_forgets_them_on_reset(tmp_path: Path) -> None:
    from pyroaring import BitMap64

    pages = book()
    for id_ in (1, 2, 3):
        pages.visit("reg", id_, ok(str(id_), f'"{id_}"'))
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.commit({"reg": {"url": "u"}}, {"reg": {LaneOutcome.FOUND: BitMap64([1, 2, 3])}}, {},
                 pages=by_target(pages.take_changes().items()))
    assert store.load_pages("reg") == {i: pages.get("reg", i) for i in (1, 2, 3)}
    store.commit({}, {}, {}, pages={"reg": {2: None}})  # left the schedule
    assert sorted(store.load_pages("reg")) == [1, 3]
    store.reset("reg")
    assert store.load_pages("reg") == {}
    store.close()


def test_sqlite_keeps_page_records_of_ids_up_to_the_largest(tmp_path: Path) -> None:
    """Ids from 2**63 do not fit SQLite's signed INTEGER: they are stored wrapped and read back whole."""
    ids = (0, 2**63 - 1, 2**63, 2**64 - 1)
    pages = book()
    for id_ in ids:
        pages.visit("reg", id_, ok(str(id_)))
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.commit({"reg": {"url": "u"}}, {}, {}, pages=by_target(pages.take_changes().items()))
    assert store.load_pages("reg") == {i: pages.get("reg", i) for i in ids}
    store.commit({}, {}, {}, pages={"reg": {2**64 - 1: None}})
    assert sorted(store.load_pages("reg")) == list(ids[:-1])
    store.close()


def test_an_older_state_file_without_the_pages_table_opens_and_gets_it(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    SqliteStateStore(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE pages")  # as written before page records existed
    db.commit()
    db.close()
    read_only = SqliteStateStore(path, read_only=True)
    assert read_only.load_pages("reg") == {}
    read_only.close()
    store = SqliteStateStore(path)  # opened for writing: the table is added
    pages = book()
    pages.visit("reg", 1, ok("a"))
    store.commit({"reg": {}}, {}, {}, pages=by_target(pages.take_changes().items()))
    assert store.load_pages("reg") == {1: pages.get("reg", 1)}
    names = {row[0] for row in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "pages" in names
    store.close()


def test_a_pages_lane_fetches_found_ids_that_other_lanes_of_its_target_skip() -> None:
    from idcrawl.core.frontier import Frontier, LaneSpec
    from idcrawl.core.targets import parse_target

    reg = parse_target({"url": "http://example.org/n/{id}", "start": 1, "max": 6, "margin": 0, "name": "reg"})
    frontier: Frontier[object] = Frontier([])
    specs = [
        LaneSpec("reg:asc", "asc", 1, 1, 6, 1),
        LaneSpec("reg:pages", "pages", 0, 1, 1, 1, ids=(4, 2), refetch_found=True),
    ]
    frontier.add_target(reg, specs, known_found={1, 2, 3, 4})
    dispensed = []
    while (dispatch := frontier.next().dispatch) is not None:
        dispensed.append((dispatch.lane, dispatch.id))
        frontier.record(dispatch.lane, dispatch.id, LaneOutcome.FOUND)
    assert sorted(dispensed) == [("reg:asc", 5), ("reg:asc", 6), ("reg:pages", 2), ("reg:pages", 4)]
    assert frontier.skipped_found == 4  # 1..4 by the asc lane, not 2 and 4 again by the pages lane


def test_a_revisit_request_is_conditional_takes_its_304_and_stays_out_of_the_http_cache() -> None:
    from idcrawl.core.frontier import Dispatch
    from idcrawl.core.targets import parse_target
    from idcrawl.requests import CONDITIONAL_KEY, HANDLED_STATUSES, lane_request

    reg = parse_target({"url": "http://example.org/n/{id}", "start": 1, "name": "reg"})
    dispatch = Dispatch(reg, "reg:due", 7)
    plain = lane_request(dispatch, callback=print, errback=print)
    assert CONDITIONAL_KEY not in plain.meta and "dont_cache" not in plain.meta
    assert b"If-None-Match" not in plain.headers and 304 not in plain.meta["handle_httpstatus_list"]
    validators = {"If-None-Match": '"e1"', "If-Modified-Since": "Mon, 12 Jan 2026 07:00:00 GMT"}
    revisit = lane_request(dispatch, callback=print, errback=print, validators=validators)
    assert revisit.headers[b"If-None-Match"] == b'"e1"'
    assert revisit.headers[b"If-Modified-Since"] == b"Mon, 12 Jan 2026 07:00:00 GMT"
    assert revisit.meta[CONDITIONAL_KEY] is True and revisit.meta["dont_cache"] is True
    assert revisit.meta["handle_httpstatus_list"] == [304, *HANDLED_STATUSES]
    assert revisit.meta["idcrawl"] == plain.meta["idcrawl"]
