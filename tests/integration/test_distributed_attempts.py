"""Attempts and followed refreshes in a distributed job, as in one process (tests/crawl/test_attempts_crawl.py,
test_metarefresh_crawl.py): a 429's ``Retry-After`` holds the id's next attempt whichever worker sends it,
and a meta refresh decides an id's outcome in a worker as it does in one process."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.crawl.test_attempts_crawl import FLAKY, FlakyModel, times_of
from tests.crawl.test_metarefresh_crawl import REFRESHING, RefreshModel
from tests.integration.test_distributed_crawl import run_fleet, worker_settings

pytest.importorskip("redis")


def test_retry_after_holds_an_ids_next_attempt_in_a_fleet(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1019, set(), failures=1, status=429, headers=(("Retry-After", "2"),)))
    args = {"url": site.url(), "start": 1000, "max": 1019, "margin": 0, "cooldown": 0.1}
    results = run_fleet(tmp_path, args, worker_settings(redis_server, job="attempts", IDCRAWL_RETRY_JITTER=0),
                        workers=2)
    assert sorted(i["id"] for r in results for i in r.items) == list(range(1000, 1020))
    assert Counter(site.ids()) == {i: 2 if i in FLAKY else 1 for i in range(1000, 1020)}
    for id_ in FLAKY:
        first, second = times_of(site, id_)
        assert second - first >= 2.0 - 0.02, id_


def test_a_meta_refresh_decides_an_ids_outcome_in_a_fleet(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site(RefreshModel(1, 20, {4}))
    args = {"url": site.url(), "start": 1, "max": 20, "margin": 0}
    results = run_fleet(tmp_path, args, worker_settings(redis_server, job="refresh", IDCRAWL_PROFILE="fast"),
                        workers=2)
    assert [e.path for e in site.log if e.path == "/front"] == ["/front", "/front"]  # each refresh followed once
    assert sorted(i["id"] for r in results for i in r.items) == [i for i in range(1, 21) if i not in {4, *REFRESHING}]
    assert Counter(site.ids()) == {i: 1 for i in range(1, 21)}
