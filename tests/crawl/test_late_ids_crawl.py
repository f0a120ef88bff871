"""Late ids in real crawls (issue 31, finding 5): ids missing when the tail passed them and published later
are re-probed by ``resume=due`` every ``late_every``, at most ``late_max`` per re-probe, newest first."""

from __future__ import annotations

import json
from pathlib import Path

from idcrawl.core.clock import format_time, parse_time
from idcrawl.core.recrawl import DAY
from tests.conftest import GapModel
from tests.crawl.test_recrawl_crawl import due_run, state_of, tails_of
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.reference import late_passes_truth
from tests.support.states import scrapy

T0 = parse_time("2026-01-12T07:00:00Z")
HOUR = 3600.0


def crawl(workdir: Path, site, at: float, **args: object) -> CrawlResult:
    site.log.clear()
    result = run_crawl(
        workdir,
        {"url": site.url(), "start": 1000, "margin": 3, "name": "reg", **args},
        {"IDCRAWL_NOW": format_time(at), "CONCURRENT_REQUESTS_PER_DOMAIN": 1},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def asked(site) -> list[int]:
    return [e.id for e in site.log if e.id is not None]


def test_resume_due_re_probes_late_ids_on_their_interval_with_a_cap(make_site, tmp_path: Path) -> None:
    gaps = {1002, 1005, 1007, 1010, 1013}
    model = GapModel(1000, 1019, set(gaps))
    site = make_site(model)
    crawl(tmp_path, site, T0)
    model.gaps -= {1007, 1013}  # published late, below last_found
    keys = {"resume": "due", "late_every": "6h", "late_max": 3}
    # the tail is not due (1 day); the late ids are (never re-probed): the newest 3, nothing else
    first = crawl(tmp_path, site, T0 + HOUR, **keys)
    passes = late_passes_truth(sorted(gaps), found=set(range(1000, 1020)) - gaps, cap=3,
                               exists=model.exists, times=4)
    assert asked(site) == passes[0] == [1013, 1010, 1007]
    assert first.ids == [1007, 1013]
    assert first.stats["idcrawl/late/planned"] == 3 and first.stats["idcrawl/late/found"] == 2
    assert tails_of(tmp_path)["reg"].late_at == T0 + HOUR
    store = state_of(tmp_path)
    try:  # found late: a found page now, revisited by the rule
        assert {1007, 1013} <= set(store.load_pages("reg"))
    finally:
        store.close()
    # within the interval: nothing reaches the site
    crawl(tmp_path, site, T0 + 7 * HOUR, **keys)
    assert asked(site) == []
    # due again: the rotation goes on below where the last one stopped, then from the top
    crawl(tmp_path, site, T0 + 7 * HOUR + 1, **keys)
    assert asked(site) == passes[1] == [1005, 1002, 1010]
    crawl(tmp_path, site, T0 + 14 * HOUR, **keys)
    assert asked(site) == passes[2] == [1005, 1002, 1010]


def test_late_ids_are_off_by_default_and_ride_with_a_due_tail(make_site, tmp_path: Path) -> None:
    model = GapModel(1000, 1009, {1004})
    site = make_site(model)
    crawl(tmp_path, site, T0)
    model.gaps.clear()
    pages = set(range(1000, 1010)) - {1004}  # found pages: revisited when due, beside
    crawl(tmp_path, site, T0 + 2 * DAY, resume="due")  # off: the tail's margin only
    assert [i for i in asked(site) if i not in pages] == [1010, 1011, 1012]
    walked = crawl(tmp_path, site, T0 + 5 * DAY, resume="due", late_every="1d")
    assert sorted(i for i in asked(site) if i not in pages) == [1004, 1010, 1011, 1012]
    assert walked.ids == [1004]
    tail = tails_of(tmp_path)["reg"]
    assert (tail.last_crawled, tail.late_at) == (T0 + 5 * DAY, T0 + 5 * DAY)



def test_iddue_lists_the_late_ids_a_due_run_re_probes_at_that_time(make_site, tmp_path: Path) -> None:
    gaps = {1002, 1005, 1007, 1010, 1013}
    model = GapModel(1000, 1019, set(gaps))
    site = make_site(model)
    job = tmp_path / "job.toml"
    job.write_text(f'[[targets]]\nname = "reg"\nurl = "{site.url()}"\nstart = 1000\nmargin = 3\n'
                   'late_every = "6h"\nlate_max = 3\n')
    due_run(tmp_path, site, T0, job)
    model.gaps -= {1007, 1013}

    def listed(at: float) -> dict:
        run = scrapy(tmp_path, "iddue", "--job", str(job), "--at", format_time(at), "--format", "json")
        assert run.returncode == 0, run.stderr
        return next(t for t in json.loads(run.stdout)["targets"] if t["name"] == "reg")

    before = listed(T0 + HOUR)
    assert before["due"] and not before["tail"]["due"] and before["late"] == [1013, 1010, 1007]
    due_run(tmp_path, site, T0 + HOUR, job)
    assert asked(site) == before["late"]
    after = listed(T0 + 2 * HOUR)  # within late_every: nothing
    assert after["late"] == [] and not after["due"]
    again = listed(T0 + 7 * HOUR + 1)
    due_run(tmp_path, site, T0 + 7 * HOUR + 1, job)
    assert asked(site) == again["late"] == [1005, 1002, 1010]
    tsv = scrapy(tmp_path, "iddue", "--job", str(job), "--at", format_time(T0 + 14 * HOUR), "--format", "tsv")
    header, row = (line.split("\t") for line in tsv.stdout.splitlines()[-2:])
    assert dict(zip(header, row, strict=True))["late ids"] == "3"
