"""Watch mode woken by found pages and by crawl scope's revisits (one process, SQLite state).

A found page that falls due between two tail waves wakes a wave of its own, which revisits only it;
a crawl-scope job whose crawl profile has ``revisit`` gets a wave at each URL's next harvest. The
clock is fixed (``IDCRAWL_NOW``) and sped up while the crawl sleeps (``IDCRAWL_WATCH_SPEED``): the
waves' times are exact and no test sleeps through simulated hours.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from idcrawl.core.clock import format_time, stamp
from idcrawl.core.recrawl import DAY
from idcrawl.core.watch import TICK
from idcrawl.state import SqliteStateStore
from tests.crawl.test_recrawl_pages_crawl import T0, ChangingModel
from tests.crawl.test_scope_crawl import GRAPH, truth
from tests.crawl.test_urlqueue_crawl import A, B, C, pages, revisit_job, stored
from tests.crawl.test_watch_crawl import watch_until
from tests.support.crawl import run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings

HOUR = 3600.0
#: clock seconds per real second while asleep: the 2 h before the page's wave take 2 s, the 22 h
#: after it (to the tail) 22 s, far longer than the SIGINT sent once that wave is done needs
SPEED = 3600
MARGIN = 5


class TwentyPages(ChangingModel):
    """Pages 1..20 with ETags (a revisit is a conditional request; 304 when unchanged)."""

    def exists(self, id_: int) -> bool:
        return 1 <= id_ <= 20 and id_ not in self.gone


def state_file(workdir: Path) -> Path:
    return workdir / ".scrapy" / "idcrawl" / "idseq.sqlite"


def test_a_page_due_between_tail_waves_wakes_a_wave_that_revisits_only_it_then_the_watch_sleeps_to_the_tail(
    make_site, tmp_path: Path
) -> None:
    """A run a day and a minute before found 1..20: its tail and pages fall due a minute before
    the watch starts; page 7's record is moved so it falls due 2 h into the watch. ``recrawl_max =
    1d``: wave 1's revisits and tail walk (no news) leave everything due a day later. Wave 1 (T0):
    the tail's margin and the 19 due pages; wave 2 (2 h later): page 7 alone, conditional (304);
    then the watch sleeps to the tail's time. SIGINT while asleep: exit 0; a later run resumes."""
    model = TwentyPages()
    site = make_site(model)
    args = {"url": site.url(), "start": 1, "margin": MARGIN, "name": "reg", "window": 1, "recrawl_max": "1d"}
    settings: dict[str, Any] = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    before = run_crawl(tmp_path, {**args, "resume": "due"}, {**settings, "IDCRAWL_NOW": format_time(T0 - DAY - 60)})
    assert before.returncode == 0 and before.ids == list(range(1, 21)), before.stderr[-3000:]
    store = SqliteStateStore(state_file(tmp_path))
    try:
        record = store.load_pages("reg")[7]
        store.commit({}, {}, {}, pages={"reg": {7: replace(record, last_crawled=T0 + 2 * HOUR - DAY)}})
    finally:
        store.close()
    site.log.clear()
    model.conditional.clear()

    code, log = watch_until(tmp_path, {**args, "watch": "true"},
                            {**settings, "IDCRAWL_NOW": format_time(T0), "IDCRAWL_WATCH_SPEED": SPEED},
                            "idcrawl: watch: wave 2 done")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "shutdown" and stats["idcrawl/watch/waves"] == 2
    page_wave = T0 + 2 * HOUR + TICK
    assert stats["idcrawl/watch/slept"] == page_wave - T0
    # asleep until the tail (and the 19 pages wave 1 revisited) fall due: a day after wave 1
    assert stats["idcrawl/watch/next_wave"] == stamp(T0 + DAY + TICK)
    requested = [(e.id, e.status) for e in site.log if e.id is not None]
    wave_1, wave_2 = requested[:-1], requested[-1:]
    assert sorted(wave_1) == [*((i, 304) for i in range(1, 21) if i != 7), *((i, 404) for i in range(21, 21 + MARGIN))]
    assert wave_2 == [(7, 304)]  # exactly the page that fell due, a conditional request
    assert sorted(model.conditional) == list(range(1, 21)) and model.conditional[-1] == 7
    assert not (tmp_path / "items.jsonl").exists() or (tmp_path / "items.jsonl").read_text() == ""
    store = SqliteStateStore(state_file(tmp_path), read_only=True)
    try:
        runs = store.runs()
        records = store.load_pages("reg")
    finally:
        store.close()
    assert [(r.started_at, r.ended_at, r.finish_reason) for r in runs] == [  # one row for the watch session
        (stamp(T0 - DAY - 60), stamp(T0 - DAY - 60), "finished"), (stamp(T0), stamp(page_wave), "finished")]
    assert runs[1].watch == {"waves": 2, "fetches": stats["downloader/response_count"], "news": 0}
    assert (records[7].last_crawled, records[7].update_duration) == (page_wave, DAY)
    assert {i: r.last_crawled for i, r in records.items() if i != 7} == dict.fromkeys(set(range(1, 21)) - {7}, T0)

    # a later resume=due run (no watch) a day after wave 1 goes on from that state: the tail and the
    # 19 pages are due, page 7 (revisited 2 h later) is not
    site.log.clear()
    later = run_crawl(tmp_path, {**args, "resume": "due"}, {**settings, "IDCRAWL_NOW": format_time(T0 + DAY + 60)})
    assert later.returncode == 0, later.stderr[-3000:]
    assert sorted(e.id for e in site.log if e.id is not None) == [
        *(i for i in range(1, 21) if i != 7), *range(21, 21 + MARGIN)]


def test_a_watching_crawl_scope_job_revisits_the_front_page_in_a_second_wave(tmp_path: Path) -> None:
    """"frontpages" (hop 0) every hour, "daily" (to hop 2) every day: wave 1 walks the graph to hop 2,
    the watch sleeps an hour (the front page's next harvest), wave 2 fetches the front page alone. The
    items limit (per process) ends the crawl at wave 2's item; a later run at 1.5 h fetches nothing
    (wave 2's harvest was committed), one at 2 h the front page again. The pages have a clock in them:
    each revisit is news (an item; an unchanged page would be none)."""
    server = LinkGraphSite(GRAPH, clock=True).start()
    try:
        walk = sorted(truth(server, 2))
        job = tmp_path / "job.toml"
        job.write_text(revisit_job(server, "1h", "1d"))
        settings = {**resolver_settings([A, B, C]), "CONCURRENT_REQUESTS": 1}
        result = run_crawl(tmp_path, {"job": job, "watch": "true"},
                           {**settings, "IDCRAWL_NOW": format_time(T0), "IDCRAWL_WATCH_SPEED": SPEED,
                            "CLOSESPIDER_ITEMCOUNT": len(walk) + 1})
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "closespider_itemcount"
        assert result.stats["idcrawl/watch/waves"] == 2
        assert result.stats["idcrawl/watch/slept"] == HOUR
        fetched = pages(server)  # one request at a time: wave 1's walk, then wave 2's
        assert sorted(fetched[:-1]) == walk and fetched[-1] == "/"
        assert sorted(item["url"].split(str(server.port), 1)[1] for item in result.items) == sorted([*walk, "/"])
        front = next(url for url in stored(tmp_path) if url.endswith(f":{server.port}/"))
        record = stored(tmp_path)[front].record
        assert (record.last_harvest, record.next_harvest, record.cycles) == (T0 + HOUR, T0 + 2 * HOUR, 2)

        server.log.clear()
        quiet = run_crawl(tmp_path, {"job": job}, {**settings, "IDCRAWL_NOW": format_time(T0 + 1.5 * HOUR)})
        assert quiet.returncode == 0 and server.log == [] and quiet.items == [], quiet.stderr[-3000:]
        again = run_crawl(tmp_path, {"job": job}, {**settings, "IDCRAWL_NOW": format_time(T0 + 2 * HOUR)})
        assert again.returncode == 0, again.stderr[-3000:]
        assert pages(server) == ["/"]
    finally:
        server.stop()
