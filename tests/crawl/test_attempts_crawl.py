"""Attempts after a cool-down, in real crawls against a site with scripted failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import run_crawl

FLAKY = {1003, 1007, 1012}


class FlakyModel(GapModel):
    """Flaky ids answer ``status`` ``failures`` times, then their page."""

    def __init__(self, *args: object, failures: int = 2, status: int = 503, headers: tuple = ()) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.failures, self.status, self.headers = failures, status, headers

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ in FLAKY and nth <= self.failures:
            return Reply(self.status, b"busy", self.headers)
        return super().reply(id_, host, nth)


def times_of(site, id_: int) -> list[float]:
    return [e.at for e in site.log if e.id == id_]


@pytest.mark.parametrize("concurrency", [1, 8])
def test_flaky_ids_become_items_on_the_third_attempt(make_site, tmp_path: Path, concurrency: int) -> None:
    site = make_site(FlakyModel(1000, 1019, set()))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1000, "max": 1019, "margin": 0, "attempts": 3, "cooldown": 0.3, "backoff": 2},
        {"CONCURRENT_REQUESTS": concurrency, "IDCRAWL_RETRY_JITTER": 0},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1000, 1020))
    by_id = {item["id"]: item for item in result.items}
    assert {i for i, item in by_id.items() if item["attempts"] == 3} == FLAKY
    assert all(item["attempts"] == 1 for i, item in by_id.items() if i not in FLAKY)
    for id_ in FLAKY:
        t1, t2, t3 = times_of(site, id_)
        assert t2 - t1 >= 0.3 - 0.02  # cooldown x backoff^0 (server-side timestamps)
        assert t3 - t2 >= 0.6 - 0.02  # cooldown x backoff^1
        between = [e.id for e in site.log if t1 < e.at < t3 and e.id != id_]
        assert between, "other ids must be fetched while an id cools down"
    assert result.stats["idcrawl/attempts/retried"] == 2 * len(FLAKY)
    assert result.stats["idcrawl/attempts/found_on/3"] == len(FLAKY)


def test_with_too_few_attempts_flaky_ids_fail_but_do_not_cut_the_lane_early(make_site, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1019, set()))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1000, "direction": "asc", "margin": 2, "attempts": 2, "cooldown": 0.2},
        {"IDCRAWL_RETRY_JITTER": 0},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == [i for i in range(1000, 1020) if i not in FLAKY]
    assert result.stats["idcrawl/failed"] == len(FLAKY)
    assert result.stats["idcrawl/attempts/gave_up"] == len(FLAKY)
    # the lane walked past every failed id and was cut only past the site's end
    assert result.stats["idcrawl/lanes/127.0.0.1:asc/cut_at"] == 1021
    assert len({i for i in site.ids() if i > 1021}) <= 128  # the default window
    for id_ in FLAKY:
        assert len(times_of(site, id_)) == 2


def test_retry_after_delays_the_next_attempt(make_site, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1019, set(), failures=1, status=429, headers=(("Retry-After", "2"),)))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1000, "max": 1019, "margin": 0, "cooldown": 0.1},
        {"IDCRAWL_RETRY_JITTER": 0},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1000, 1020))
    for id_ in FLAKY:
        t1, t2 = times_of(site, id_)
        assert t2 - t1 >= 2.0 - 0.02


def test_garbage_retry_after_is_ignored(make_site, tmp_path: Path) -> None:
    site = make_site(FlakyModel(1000, 1009, set(), failures=1, status=503, headers=(("Retry-After", "soon-ish"),)))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1000, "max": 1009, "margin": 0, "cooldown": 0.1},
        {"LOG_LEVEL": "DEBUG"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1000, 1010))
    assert "ignoring unparsable Retry-After" in result.stderr


def test_connection_errors_are_retried_then_failed(tmp_path: Path) -> None:
    # nothing listens on this port: every attempt is refused
    result = run_crawl(
        tmp_path,
        {"url": "http://127.0.0.1:9/{id}", "start": 1, "max": 3, "margin": 0, "attempts": 2, "cooldown": 0.1},
        {"ROBOTSTXT_OBEY": False},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.items == []
    assert result.stats["idcrawl/failed"] == 3
    assert result.stats["idcrawl/attempts/retried"] == 3
    assert result.stats["idcrawl/attempts/failed_on/2"] == 3
