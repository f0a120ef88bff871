"""A found page of the crawl scope is harvested only once its item is written (issue 16, one process).

Run 1 walks the link graph of ``test_scope_crawl``; ``tests.support.hold_item.HoldItem`` holds the
item of one page (``/3``) in the item pipeline for good, after its response was parsed and its links
offered. The test waits until the state file has committed every other page of the walk harvested
(checkpoints every 0.1 s; it waits on the file, not on a clock), then SIGKILLs the crawl: the held
page's item never reached the feed. The rerun fetches that page again (it is still ``taken`` in the
state), and nothing else (but ``/9``, which answers 404 and is queued again at every run's start): the union of the two runs' items is every page of the walk, each once.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from idcrawl.core.urlqueue import QueueState
from idcrawl.state import SqliteStateStore
from idcrawl.state.base import StateError
from tests.crawl.test_scope_crawl import GRAPH, job, truth
from tests.support.crawl import crawl_command, read_items, run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings

A, B, C = "a.test", "b.test", "c.test"
HELD = "/3"
MAX_HOPS = 3


@pytest.fixture
def site() -> Iterator[LinkGraphSite]:
    server = LinkGraphSite(GRAPH).start()
    yield server
    server.stop()


def committed(workdir: Path, site: LinkGraphSite) -> dict[str, QueueState]:
    """Path -> the state the state file's last commit has for it ({} before the first commit)."""
    path = workdir / ".scrapy" / "idcrawl" / "idseq.sqlite"
    if not path.exists():
        return {}
    try:
        store = SqliteStateStore(path, read_only=True)
    except (StateError, sqlite3.Error):  # being created
        return {}
    try:
        prefix = f"http://a.test:{site.port}"
        return {entry.url[len(prefix):]: entry.state for entry in store.load_urls()}
    except sqlite3.Error:
        return {}
    finally:
        store.close()


def test_a_page_killed_before_its_item_was_written_is_fetched_again(site: LinkGraphSite, tmp_path: Path) -> None:
    expected = truth(site, MAX_HOPS)
    answered = {path for path in expected if path != "/9"}  # /9 answers 404: no item
    assert HELD in answered
    mark = tmp_path / "held"
    path = job(tmp_path, site, MAX_HOPS)
    settings = {**resolver_settings([A, B, C]), "CONCURRENT_REQUESTS": 1, "IDCRAWL_STATE_COMMIT_INTERVAL": 0.1}
    command, env = crawl_command(tmp_path, {"job": path}, {
        **settings, "ITEM_PIPELINES": {"tests.support.hold_item.HoldItem": 100},
        "HOLD_ITEM_PATH": HELD, "HOLD_ITEM_MARK": str(mark)}, output="run1.jsonl")
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    others = set(expected) - {HELD}
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            states = committed(tmp_path, site)
            if mark.exists() and all(states.get(p) is QueueState.HARVESTED for p in others):
                break
            time.sleep(0.05)  # waits for the crawl process to commit, not for simulated time
        else:
            pytest.fail(f"run 1 never committed the other pages (rc {proc.returncode}): {committed(tmp_path, site)}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    states = committed(tmp_path, site)
    assert states[HELD] is QueueState.TAKEN  # its links were followed, its harvest waits for its item
    killed = read_items(tmp_path / "run1.jsonl")
    assert HELD not in {item["url"].split(str(site.port), 1)[1] for item in killed}
    site.log.clear()
    rerun = run_crawl(tmp_path, {"job": path}, settings, output="run2.jsonl")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    # that page again, and the page that answered 404 (queued again at every run's start), nothing else
    assert sorted(p for p in site.fetched(A) if p != "/robots.txt") == sorted([HELD, "/9"])
    prefix = f"http://a.test:{site.port}"
    union = Counter(item["url"][len(prefix):] for item in killed + rerun.items)
    assert union == Counter(dict.fromkeys(answered, 1))  # every page of the walk, each once here
    after = committed(tmp_path, site)
    assert set(after.values()) == {QueueState.HARVESTED}  # /9 too (its not-found counter: 2)
    store = SqliteStateStore(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite", read_only=True)
    try:
        cycles = {entry.url[len(prefix):]: entry.record.cycles for entry in store.load_urls()}
    finally:
        store.close()
    assert cycles[HELD] == 1  # harvested once: the killed run's fetch was never counted
