"""Bounds of an id crawl against a hostile site: huge bodies, a huge robots.txt, slow-loris pages, redirects."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.crawl import crawl_command, read_items, run_crawl
from tests.support.hostile_site import MIB, HostileSite

ARGS = {"start": 1, "max": 9, "margin": 0}
IDS = list(range(1, 10))


@pytest.mark.parametrize("mode", ["length", "stream"])
def test_a_body_over_the_limit_fails_its_id_with_a_reason_in_bounded_memory(tmp_path: Path, mode: str) -> None:
    # "length": the 64 MiB body says its size (cancelled before it is read); "stream": it does not (cancelled at 32 MiB)
    with HostileSite(range(1, 10), big={5: mode}) as site:
        result = run_crawl(tmp_path, {**ARGS, "url": site.url()})
        fetched = site.paths.count("/notice/5")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == [i for i in IDS if i != 5]
    assert result.stats["idcrawl/failed"] == 1
    assert result.stats["idcrawl/outcome/too_large"] == 1
    assert fetched == 1  # not retried: the next attempt would be as large
    assert "Traceback" not in result.stderr and result.error_lines() == []
    # the body is never held whole: a crawl that kept it would hold 64 MiB at least twice over
    assert result.stats["test/peak_rss_mib"] < 64 + 100, result.stats["test/peak_rss_mib"]


def test_a_huge_robots_txt_is_obeyed_up_to_the_cap(tmp_path: Path) -> None:
    robots = b"User-agent: *\nDisallow: /notice/3\n"
    with HostileSite(range(1, 10), robots=robots, robots_filler=50 * MIB, robots_tail=b"Disallow: /notice/7\n") as site:
        result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {"ROBOTSTXT_OBEY": True})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == [i for i in IDS if i != 3]  # the rule past the cap is not read
    assert result.stats["idcrawl/disallowed"] == 1
    assert result.stats["idcrawl/robotstxt/truncated"] == 1
    assert "Traceback" not in result.stderr and result.error_lines() == []
    assert result.stats["test/peak_rss_mib"] < 50 + 100, result.stats["test/peak_rss_mib"]


@pytest.mark.parametrize("reactor", [None, "twisted.internet.epollreactor.EPollReactor"])
def test_sigterm_closes_at_once_with_a_slow_download_in_flight_and_its_id_is_fetched_on_resume(
    tmp_path: Path, reactor: str | None
) -> None:
    args = {**ARGS, "name": "t"}
    # no timeout ends the slow answer early; Scrapy's asyncio reactor, or another one
    settings: dict[str, Any] = {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_TIMEOUT": 600}
    if reactor is not None:
        settings["TWISTED_REACTOR"] = reactor
    with HostileSite(range(1, 10), slow={4}, trickle_seconds=120) as site:
        command, env = crawl_command(tmp_path, {**args, "url": site.url()}, settings, output="run1.jsonl")
        with (tmp_path / "run1.log").open("w") as log:
            proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log)
            # the slow answer has begun; the other ids are answered at once
            assert site.trickling.wait(60), (tmp_path / "run1.log").read_text()[-3000:]
            proc.send_signal(signal.SIGTERM)
            try:
                # the trickle lasts 120 s: an exit within 60 s means the download was not waited for
                proc.wait(timeout=60)
            finally:
                proc.kill()
        stderr = (tmp_path / "run1.log").read_text()
        first = read_items(tmp_path / "run1.jsonl")
        first_stats = json.loads((tmp_path / "stats.json").read_text())
        site.healed.set()
        second = run_crawl(tmp_path, {**args, "url": site.url(), "resume": "bound"}, settings, output="run2.jsonl")
    assert "Traceback" not in stderr, stderr[-3000:]
    assert first_stats["finish_reason"] == "shutdown"
    assert first_stats["idcrawl/outcome/cancelled_at_shutdown"] >= 1
    assert "idcrawl/failed" not in first_stats  # cancelled ids are undecided, not failed
    assert second.returncode == 0, second.stderr[-3000:]
    first_ids = {item["id"] for item in first}
    assert 4 not in first_ids
    # every id once: what the first run had not decided (the slow id among them) is fetched on resume
    assert sorted(item["id"] for item in second.items) == sorted(set(IDS) - first_ids)


def test_an_id_page_redirected_to_another_host_is_not_followed(tmp_path: Path) -> None:
    with HostileSite(range(1, 10)) as other:
        with HostileSite(range(1, 10), redirects={4: other.url().format(id=4)}) as site:
            result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {"ROBOTSTXT_OBEY": True})
        assert other.paths == []  # not even its robots.txt
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == [i for i in IDS if i != 4]
    assert result.stats["idcrawl/missing"] == 1
    assert result.stats["idcrawl/outcome/redirected_offsite"] == 1
    assert all("final_url" not in item for item in result.items)


def test_a_target_that_allows_any_redirect_follows_it_and_its_item_has_both_urls(tmp_path: Path) -> None:
    with HostileSite(range(1, 10)) as other:
        with HostileSite(range(1, 10), redirects={4: other.url().format(id=4)}) as site:
            result = run_crawl(tmp_path, {**ARGS, "url": site.url(), "follow_redirects": "any"})
            url = site.url()
        assert other.paths.count("/notice/4") == 1
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == IDS
    item = next(item for item in result.items if item["id"] == 4)
    assert item["url"] == url.format(id=4)
    assert item["final_url"] == other.url().format(id=4)


def test_a_redirect_on_the_same_host_is_followed_and_the_item_keeps_the_ids_url(tmp_path: Path) -> None:
    with HostileSite(range(1, 10)) as site:
        url = site.url()
        site.redirects[4] = url.format(id=104).replace("127.0.0.1", "www.127.0.0.1").replace("www.", "")
        site.ids = range(1, 105)
        result = run_crawl(tmp_path, {**ARGS, "url": url})
    assert result.returncode == 0, result.stderr[-3000:]
    item = next(item for item in result.items if item["id"] == 4)
    assert item["url"] == url.format(id=4)
    assert item["final_url"] == url.format(id=104)
    assert "idcrawl/outcome/redirected_offsite" not in result.stats
