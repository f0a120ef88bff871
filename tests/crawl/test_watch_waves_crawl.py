"""Watch waves that scale (issue 31, finding 2), in a real watching crawl (one process, SQLite state).

Twenty found pages with short durations (30 to 58.5 s) falling due over 28.5 s: a wave takes
everything due within its coalescing window (a minute), so the first wave revisits all twenty and
they share its time; without a window each page woke a wave of its own. Fixed clock.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from idcrawl.core.clock import format_time, stamp
from idcrawl.state import SqliteStateStore
from tests.crawl.test_recrawl_pages_crawl import T0
from tests.crawl.test_watch_crawl import watch_until
from tests.crawl.test_watch_pages_crawl import MARGIN, TwentyPages, state_file
from tests.support.crawl import run_crawl


def test_twenty_pages_due_within_half_a_minute_share_one_wave(make_site, tmp_path: Path) -> None:
    model = TwentyPages()
    site = make_site(model)
    args = {"url": site.url(), "start": 1, "margin": MARGIN, "name": "reg", "window": 1,
            "recrawl_initial": "8s", "recrawl_min": "5s", "recrawl_max": "1h"}
    settings: dict[str, Any] = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    before = run_crawl(tmp_path, {**args, "resume": "due"}, {**settings, "IDCRAWL_NOW": format_time(T0 - 60)})
    assert before.returncode == 0 and before.ids == list(range(1, 21)), before.stderr[-3000:]
    store = SqliteStateStore(state_file(tmp_path))
    try:  # crawled 30 s before T0, page k falls due 1.5 (k - 1) s after T0
        pages = {id_: replace(record, last_crawled=T0 - 30, update_duration=30 + 1.5 * (id_ - 1))
                 for id_, record in store.load_pages("reg").items()}
        store.commit({}, {}, {}, pages={"reg": pages})
    finally:
        store.close()
    site.log.clear()

    code, log = watch_until(tmp_path, {**args, "watch": "true"},
                            {**settings, "IDCRAWL_NOW": format_time(T0 + 0.5), "IDCRAWL_WATCH_SPEED": 1},
                            "idcrawl: watch: wave 1 done")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["idcrawl/watch/waves"] == 1
    # wave 1 (T0 + 0.5 s: page 1 due) takes all twenty, due within its minute (before: page 1 alone)
    assert sorted(e.id for e in site.log if e.id is not None and e.id <= 20) == list(range(1, 21))
    store = SqliteStateStore(state_file(tmp_path), read_only=True)
    try:
        runs = store.runs()
        records = store.load_pages("reg")
    finally:
        store.close()
    assert len(runs) == 2 and runs[1].started_at == stamp(T0 + 0.5)
    assert {record.last_crawled for record in records.values()} == {T0 + 0.5}  # the wave's time
