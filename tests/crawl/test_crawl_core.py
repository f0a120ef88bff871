"""Behaviour of the idseq spider in real ``scrapy crawl`` runs against local sites."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.reference import lane_truth, target_truth

GAPS = {
    1152, 1160, 1161, 1170, 1171, 1172, 1180, 1181, 1182, 1183,  # asc side: cut at 1183 with margin 4
    1140, 1130, 1131, 1132, 1120, 1121, 1122, 1123, 1124,  # desc side: cut at 1121
}


class JitterModel(GapModel):
    """Small per-id delays so that responses arrive out of id order."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        delay = (id_ * 7919 % 13) / 1000
        return Reply(reply.status, reply.body, reply.headers, delay)


def test_bounded_crawl_with_margin_0_fetches_each_id_once(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1000, 1299, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1100, "max": 1199, "margin": 0})
    assert result.returncode == 0, result.stderr[-3000:]
    requested = site.ids()
    assert sorted(requested) == list(range(1100, 1200))
    assert max(Counter(requested).values()) == 1
    assert result.ids == [i for i in range(1100, 1200) if i not in GAPS]
    assert result.stats["finish_reason"] == "finished"
    assert result.stats["idcrawl/lanes/127.0.0.1:asc/cut_reason"] == "bound"


def test_items_carry_the_contract_fields(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1000, 1299, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1150, "max": 1155, "margin": 0, "name": "t1"})
    assert result.returncode == 0, result.stderr[-3000:]
    item = next(i for i in result.items if i["id"] == 1151)
    assert item["target"] == "t1"
    assert item["url"] == site.url().format(id=1151)
    assert item["status"] == 200
    assert item["attempts"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", item["fetched_at"])
    assert item["checksum"] == hashlib.sha1(site.model.page(1151)).hexdigest()
    assert [i["id"] for i in result.items if i["id"] == 1152] == []  # a gap is no item


@pytest.mark.parametrize("direction", ["asc", "desc", "both"])
@pytest.mark.parametrize("concurrency", [1, 32])
def test_margin_result_matches_ground_truth_at_any_concurrency(
    make_site, tmp_path: Path, direction: str, concurrency: int
) -> None:
    model = JitterModel(1000, 1299, GAPS)
    site = make_site(model)
    window = 16
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1150, "direction": direction, "margin": 4, "window": window},
        {"CONCURRENT_REQUESTS": concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == target_truth(model.exists, 1150, direction, 4)
    requested = site.ids()
    assert max(Counter(requested).values()) == 1, "an id was fetched twice"
    if direction in ("asc", "both"):
        _, cut = lane_truth(model.exists, 1150, 1, None, 4)
        assert cut == 1183
        assert result.stats["idcrawl/lanes/127.0.0.1:asc/cut_at"] == cut
        assert len([i for i in requested if i > cut]) <= window
    if direction in ("desc", "both"):
        start = 1149 if direction == "both" else 1150
        _, cut = lane_truth(model.exists, start, -1, None, 4)
        assert cut == 1121
        assert result.stats["idcrawl/lanes/127.0.0.1:desc/cut_reason"] == "margin"
        assert len([i for i in requested if i < cut]) <= window
    overshoot = result.stats.get("idcrawl/overshoot", 0)
    assert result.stats["idcrawl/found"] == len(result.ids)
    assert result.stats.get("item_scraped_count", 0) == len(result.ids)
    assert overshoot == len([i for i in requested if model.exists(i) and i not in result.ids])


def test_two_targets_interleave_by_rate_in_the_server_log(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 10_000, set()))
    job = tmp_path / "job.toml"
    job.write_text(
        f"""
[[targets]]
name = "A"
url = "{site.url("127.0.0.1")}"
start = 100
max = 129
margin = 0
rate = 1

[[targets]]
name = "b"
url = "{site.url("localhost")}"
start = 5000
max = 5059
margin = 0
rate = 2
"""
    )
    result = run_crawl(tmp_path, {"job": job}, {"CONCURRENT_REQUESTS": 1, "ROBOTSTXT_OBEY": False})
    assert result.returncode == 0, result.stderr[-3000:]
    pattern = "".join("A" if e.host == "127.0.0.1" else "b" for e in site.log if e.id is not None)
    assert pattern == "Abb" * 30
    assert len(result.items) == 90


def test_unbounded_range_costs_no_more_memory_than_a_small_one(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 10**15, set(range(2000, 2100))))
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()  # a state of its own: max is part of a target's identity
    small = run_crawl(tmp_path / "small", {"url": site.url(), "start": 1000, "max": 10**4, "margin": 5})
    large = run_crawl(tmp_path / "large", {"url": site.url(), "start": 1000, "max": 10**15, "margin": 5})
    assert small.returncode == 0 and large.returncode == 0, large.stderr[-3000:]
    assert small.ids == large.ids == list(range(1000, 2000))
    # peak RSS of the whole crawler process, sampled by Scrapy's MemoryUsage extension
    assert large.stats["memusage/max"] <= small.stats["memusage/max"] + 8 * 2**20


def test_site_spider_subclass_extracts_fields_with_css(make_site, tmp_path: Path) -> None:
    site = make_site()
    result = run_crawl(tmp_path, {"url": site.url(), "start": 10_000, "max": 10_004, "margin": 0}, spider="demo")
    assert result.returncode == 0, result.stderr[-3000:]
    item = next(i for i in result.items if i["id"] == 10_001)
    assert item["title"] == "Procurement notice 10001"
    assert item["agency"] == f"Agency {10_001 % 37}"
    assert item["value"] == 10_001 * 7919 % 1_000_000


def test_follow_up_requests_go_through_the_scheduler(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 10_000, {5}))
    spider_file = Path(__file__).parents[1] / "support" / "followup_spider.py"
    result = run_crawl(
        tmp_path, {"url": site.url(), "start": 1, "max": 8, "margin": 0}, runspider=spider_file
    )
    assert result.returncode == 0, result.stderr[-3000:]
    details = sorted(i["detail_of"] for i in result.items if "detail_of" in i)
    assert details == [1, 2, 3, 4, 6, 7, 8]
    assert sorted(i for i in site.ids() if i >= 1000) == [1001, 1002, 1003, 1004, 1006, 1007, 1008]


def test_progress_lines_are_logged_per_target(make_site, tmp_path: Path) -> None:
    site = make_site(JitterModel(1000, 1299, GAPS))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1150, "direction": "both", "margin": 4, "name": "gazette"},
        {"IDCRAWL_PROGRESS_INTERVAL": 0.2, "CONCURRENT_REQUESTS": 2},
    )
    assert result.returncode == 0
    summary = [line for line in result.stderr.splitlines() if "summary gazette:" in line]
    assert len(summary) == 1
    found = len(result.ids)
    assert f"summary gazette: found {found}, missing " in summary[0]
    assert "asc cut at 1183 after 4 misses" in summary[0] and "desc cut at 1121 after 4 misses" in summary[0]


def test_a_job_of_more_lanes_than_lane_stats_keeps_the_job_totals_only(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 10_000, set()))
    job = tmp_path / "job.toml"
    job.write_text("".join(f'[[targets]]\nname = "t{i}"\nurl = "{site.url()}"\nstart = {i * 100}\nmax = {i * 100 + 4}\n'
                           "margin = 0\n\n" for i in range(3)))
    result = run_crawl(tmp_path, {"job": job}, {"IDCRAWL_LANE_STATS": 2})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["idcrawl/lanes"] == 3 and result.stats["idcrawl/found"] == 15
    assert not [key for key in result.stats if key.startswith("idcrawl/lanes/")]
    again = tmp_path / "again"  # a state of its own: the first run's would resume with nothing to fetch
    again.mkdir()
    result = run_crawl(again, {"job": job}, {"IDCRAWL_LANE_STATS": 3})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["idcrawl/lanes/t2:asc/found"] == 5 and result.stats["idcrawl/lanes/t0:asc/cursor"] == 5
