"""Recrawl signals in a fleet (issue 31): news = a new signature and the signature keys, in workers sharing
one Redis, as in one process (tests/crawl/test_recrawl_signals_crawl.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crawl.test_recrawl_pages_crawl import DAY, T0
from tests.crawl.test_recrawl_signals_crawl import DROP, ClockModel, TwoBackendsModel
from tests.integration.test_distributed_pages import MARGIN, records, run_fleet, stat

redis = pytest.importorskip("redis")


def job_file(tmp_path: Path, site, extra: str = "") -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f'[[targets]]\nname = "reg"\nurl = "{site.url()}"\nstart = 1\nmargin = {MARGIN}\n{extra}')
    return path


def test_a_fleet_sees_no_news_from_a_304_and_a_200_backend_in_turn(make_site, redis_server, tmp_path: Path) -> None:
    """Finding 1 in a fleet: pages that never change, 304 and 200-same-body in turn: no item, durations grow."""
    model = TwoBackendsModel()
    site = make_site(model)
    job = job_file(tmp_path, site)
    run_fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None)
    now, duration = T0, DAY
    for visit in (1, 2):  # a 304, then a 200 with the same body
        now += duration + 60
        due = run_fleet(tmp_path, f"due{visit}", redis_server, job, now, workers=2)
        assert [item for r in due for item in r.items] == [], visit
        assert stat(due, "idcrawl/pages/changed") == 0, visit
        kind = "idcrawl/pages/not_modified" if visit % 2 == 1 else "idcrawl/pages/unchanged"
        assert stat(due, kind) == 100, visit
        duration *= 1.8
        stored = records(redis_server)
        assert [s.update_duration for s in stored.values()] == [pytest.approx(duration, rel=1e-12)] * 100, visit


def test_a_fleet_drops_a_clock_from_the_signature(make_site, redis_server, tmp_path: Path) -> None:
    """Finding 3 in a fleet: ``signature = "text"`` and ``signature_drop`` from the job file."""
    model = ClockModel()
    site = make_site(model)
    job = job_file(tmp_path, site, f"signature = \"text\"\nsignature_drop = ['{DROP}']\n")
    first = run_fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None)
    assert len([item for r in first for item in r.items]) == 100
    model.version[7] += 1
    due = run_fleet(tmp_path, "due", redis_server, job, T0 + 2 * DAY, workers=2)
    assert [(item["id"], item["revision"]) for r in due for item in r.items] == [(7, 2)]
    assert stat(due, "idcrawl/pages/unchanged") == 99
