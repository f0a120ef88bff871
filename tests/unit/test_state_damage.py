"""Damage inside a valid SQLite state file: every read checks what it decodes and refuses in one line
naming the table, the target and what is wrong; the file is left as it was (the real commands and crawls:
tests/crawl/test_state_damage_crawl.py)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rich.console import Console

from idcrawl.commands.report import collect, plan_document, render_plan
from idcrawl.core.recrawl import Kind, Schedule
from idcrawl.core.scope import UrlRecord
from idcrawl.core.urlqueue import QueuedUrl
from idcrawl.state import SqliteStateStore
from idcrawl.state.base import FeedMarks, StateError
from idcrawl.state.decode import DamagedState
from tests.support.states import damage, write_known_state


def write_full_state(path: Path) -> Path:
    """The known state, plus a page record, a tail schedule, feed marks and a queued URL."""
    write_known_state(path)
    store = SqliteStateStore(path)
    store.commit({}, {}, {}, feeds=FeedMarks(2, {"/tmp/items.jsonl": 120}),
                 pages={"reg": {100: Schedule(Kind.PAGE, "reg/100", 1000.0, 3600.0, checksum="ab")}},
                 tails={"reg": Schedule(Kind.TAIL, "reg", 1000.0, 3600.0, last_found=120)})
    store.commit_urls([QueuedUrl(UrlRecord("https://reg.example/about", "reg", None, ("news",)))], [])
    store.close()
    return path


def read_all(store: SqliteStateStore) -> None:
    """Every read idplan, idcoverage, iddue and a crawl make."""
    for name in store.targets():
        store.load(name)
        store.load_pages(name)
    store.runs()
    store.tail_schedules()
    store.feed_marks()
    store.load_urls()


def lane(record: dict[str, Any] | str) -> tuple[str, tuple[Any, ...]]:
    text = record if isinstance(record, str) else json.dumps(record)
    return "UPDATE lanes SET record = ? WHERE key = 'reg:asc'", (text,)


GOOD_LANE = {"key": "reg:asc", "start": 100, "step": 1, "stop": 120, "cursor": 121, "last_found": 120,
             "cut_at": None, "reason": "bound"}

#: (kind of damage, SQL, the words the one line must hold)
DAMAGE: list[tuple[str, list[Any], list[str]]] = [
    ("junk bitmap", [("UPDATE outcomes SET ids = ? WHERE target = 'reg' AND outcome = 'found'", (b"junk" * 5,))],
     ["table outcomes", "'reg'", "found ids are not a bitmap"]),
    ("bitmap as text", ["UPDATE outcomes SET ids = 'abc' WHERE target = 'reg' AND outcome = 'found'"],
     ["table outcomes", "'reg'", "not a bitmap"]),
    ("empty bitmap blob", [("UPDATE outcomes SET ids = ? WHERE target = 'reg' AND outcome = 'missing'", (b"",))],
     ["table outcomes", "missing ids are not a bitmap"]),
    ("unknown outcome", ["UPDATE outcomes SET outcome = 'lost' WHERE target = 'reg' AND outcome = 'failed'"],
     ["table outcomes", "unknown outcome 'lost'"]),
    ("lane record of another shape", [lane({"x": 1})], ["table lanes", "'reg'", "lane 'reg:asc' lacks field"]),
    ("lane record not JSON", [lane("{not json")], ["table lanes", "lane 'reg:asc' is not valid JSON"]),
    ("lane record a list", [lane("[1, 2]")], ["table lanes", "is not a JSON object"]),
    ("lane start text", [lane({**GOOD_LANE, "start": "100"})], ["table lanes", "start = '100' is not id"]),
    ("lane step 0", [lane({**GOOD_LANE, "step": 0})], ["table lanes", "step = 0 is not 1 or -1"]),
    ("lane cursor out of range", [lane({**GOOD_LANE, "cursor": 2**65})], ["table lanes", "cursor"]),
    ("lane of another key", [lane({**GOOD_LANE, "key": "reg:desc"})], ["holds the record of lane 'reg:desc'"]),
    ("lane unknown field", [lane({**GOOD_LANE, "speed": 3})], ["unknown field 'speed'"]),
    ("params not JSON", ["UPDATE targets SET params = '[1,2' WHERE name = 'reg'"],
     ["table targets", "'reg'", "params is not valid JSON"]),
    ("params nested too deep", [("UPDATE targets SET params = ? WHERE name = 'reg'", ("[" * 100_000,))],
     ["params is not valid JSON"]),
    ("lane nested too deep", [lane("[" * 100_000)], ["lane 'reg:asc' is not valid JSON"]),
    ("params a list", ["UPDATE targets SET params = '[1,2]' WHERE name = 'reg'"], ["params is not a JSON object"]),
    ("params start text", [("UPDATE targets SET params = ? WHERE name = 'reg'", (json.dumps({"start": "x"}),))],
     ["params: start = 'x'"]),
    ("lanes table dropped", ["DROP TABLE lanes"], ["table lanes", "the table is missing"]),
    ("runs table dropped", ["DROP TABLE runs"], ["table runs", "the table is missing"]),
    ("schema_version not a number", ["UPDATE meta SET value = 'x' WHERE key = 'schema_version'"],
     ["table meta", "schema_version 'x' is not a number"]),
    ("page record junk", ["UPDATE pages SET record = '\"junk\"'"], ["table pages", "'reg'", "page 100 is not a JSON object"]),
    ("page record zero duration", [
        ("UPDATE pages SET record = ?", (json.dumps({"last_crawled": 1.0, "update_duration": 0}),))],
     ["table pages", "update_duration = 0 is not duration"]),
    ("tail record junk", ["UPDATE tails SET record = '{\"kind\": \"tail\"}'"], ["table tails", "lacks field 'key'"]),
    ("tail record of another kind", [("UPDATE tails SET record = ?", (json.dumps(
        {"kind": "ghost", "key": "reg", "last_crawled": 1.0, "update_duration": 2.0}),))], ["kind = 'ghost'"]),
    ("run counts not JSON", ["UPDATE runs SET counts = '{' WHERE id = 1"], ["table runs", "run 1: counts"]),
    ("run targets not names", ["UPDATE runs SET targets = '[1]' WHERE id = 2"], ["run 2: targets"]),
    ("run started_at bytes", ["UPDATE runs SET started_at = X'00ff' WHERE id = 2"], ["run 2: started_at = b'"]),
    ("feed mark offset text", ["UPDATE feeds SET offset = 'far'"], ["table feeds", "offset = 'far'"]),
    ("URL queue state", ["UPDATE urls SET state = 'lost'"], ["table urls", "state = 'lost'"]),
    ("URL queue paths", ["UPDATE urls SET paths = '[[1]]'"], ["table urls", "paths"]),
]


@pytest.mark.parametrize(("kind", "statements", "words"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_each_kind_of_damage_is_one_line_naming_table_target_and_problem(
    tmp_path: Path, kind: str, statements: list[Any], words: list[str]
) -> None:
    path = write_full_state(tmp_path / "state.sqlite")
    digest = damage(path, *statements)
    with pytest.raises(StateError) as caught:
        store = SqliteStateStore(path, read_only=True)
        try:
            read_all(store)
        finally:
            store.close()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"state file {str(path)!r}: ")
    for word in words:
        assert word in message, message
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("statement", ["DROP TABLE lanes", "UPDATE meta SET value = 'x' WHERE key = 'schema_version'",
                                       "ALTER TABLE lanes DROP COLUMN record"])
def test_a_damaged_schema_is_refused_before_opening_for_writing(tmp_path: Path, statement: str) -> None:
    path = write_full_state(tmp_path / "state.sqlite")
    digest = damage(path, statement)
    with pytest.raises(DamagedState, match=r"table (lanes|meta)"):
        SqliteStateStore(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_an_undamaged_state_reads_as_before(tmp_path: Path) -> None:
    path = write_full_state(tmp_path / "state.sqlite")
    store = SqliteStateStore(path, read_only=True)
    state = store.load("reg")
    assert state is not None and state.lanes["reg:desc"].cut_at == 77
    assert store.load_pages("reg")[100].checksum == "ab"
    assert store.tail_schedules()["reg"].last_found == 120
    assert store.feed_marks() == FeedMarks(2, {"/tmp/items.jsonl": 120})
    assert [entry.url for entry in store.load_urls()] == ["https://reg.example/about"]
    assert [run.targets for run in store.runs()] == [["reg", "seed"], ["reg"]]
    store.close()


# -- any single-field corruption: a one-line refusal or a valid plan, never a traceback ------------------------

#: (table, column, the row's condition) of every stored field the reads decode
FIELDS = [
    ("targets", "params", "name = 'reg'"), ("outcomes", "ids", "target = 'reg' AND outcome = 'found'"),
    ("outcomes", "outcome", "target = 'reg' AND outcome = 'missing'"), ("lanes", "record", "key = 'reg:desc'"),
    ("lanes", "record", "key = 'seed:asc'"), ("lanes", "key", "key = 'reg:asc'"), ("runs", "counts", "id = 1"),
    ("runs", "targets", "id = 2"), ("runs", "started_at", "id = 1"), ("runs", "ended_at", "id = 2"),
    ("runs", "finish_reason", "id = 2"), ("pages", "record", "id = 100"), ("pages", "id", "id = 100"),
    ("tails", "record", "target = 'reg'"), ("feeds", "offset", "run = 2"), ("feeds", "path", "run = 2"),
    ("urls", "state", "1"), ("urls", "hops", "1"), ("urls", "paths", "1"), ("urls", "crawl_profiles", "1"),
    ("urls", "links", "1"), ("urls", "next_harvest", "1"), ("meta", "value", "key = 'schema_version'"),
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


def _json_text(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@st.composite
def corruptions(draw: Callable[..., Any]) -> tuple[str, str, str, Any, str | None]:
    """A field and its new value: junk of any type, or (for a JSON object) one key set to any JSON value."""
    table, column, where = draw(st.sampled_from(FIELDS))
    key = draw(st.one_of(st.none(), st.sampled_from(
        ["key", "start", "step", "stop", "cursor", "last_found", "cut_at", "reason", "url", "min", "max",
         "direction", "last_crawled", "update_duration", "gone", "revision", "kind", "last_status", "found"])))
    if key is not None:
        return table, column, where, draw(json_values), key
    value = draw(st.one_of(scalars, st.binary(max_size=24), json_values.map(_json_text)))
    return table, column, where, value, None


def _corrupt(path: Path, table: str, column: str, where: str, value: Any, key: str | None) -> bool:
    db = sqlite3.connect(path)
    try:
        if key is not None:
            (text,) = db.execute(f"SELECT {column} FROM {table} WHERE {where}").fetchone()
            record = json.loads(text)
            if not isinstance(record, dict):
                return False
            record[key] = value
            value = _json_text(record)
        db.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (value,))
        db.commit()
    except (sqlite3.Error, ValueError, TypeError, OverflowError):
        return False  # a NOT NULL column, a duplicate key, a value SQLite cannot hold: not a corruption
    finally:
        db.close()
    return True


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corruption=corruptions())
def test_any_single_field_corruption_is_a_one_line_refusal_or_a_valid_plan(
    tmp_path_factory: pytest.TempPathFactory, corruption: tuple[str, str, str, Any, str | None]
) -> None:
    path = write_full_state(tmp_path_factory.mktemp("state") / "state.sqlite")
    assume(_corrupt(path, *corruption))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        store = SqliteStateStore(path, read_only=True)
        try:
            read_all(store)
            views = collect(store)
        finally:
            store.close()
        json.dumps(plan_document(views, state=str(path), keep=0))
        render_plan(views, Console(file=StringIO(), width=120), keep=3, state=str(path))
    except StateError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith(f"state file {str(path)!r}: ")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_page_id_or_feed_mark_of_inf_or_nan_is_damage_not_a_traceback(value: float) -> None:
    from idcrawl.state.decode import feed_mark, page_record

    with pytest.raises(DamagedState, match="is not a number"):
        page_record("{}", "pages", "t", value)
    with pytest.raises(DamagedState, match="is not a number"):
        feed_mark(value, "items.jsonl", 0, "feeds")
