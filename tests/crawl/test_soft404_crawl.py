"""Soft 404s in real crawls: a site that answers missing ids with a 200 "not found" page.

With an outcome rule the crawl must be the crawl of the same site serving real
404s: the same items, the same missing counts, the same cuts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import IdSite, Reply
from tests.conftest import GapModel
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.reference import lane_truth, target_truth

LOW, HIGH = 1000, 1079
GAPS = {1052, 1055, 1056, 1060, 1061, 1062,  # asc from 1050: cut at 1062 (margin 3)
        1045, 1041, 1040, 1032, 1031, 1030}  # desc from 1049: cut at 1030
ARGS = {"name": "gz", "start": 1050, "direction": "both", "margin": 3, "window": 8}
ASC_CUT, DESC_CUT = 1062, 1030


class SoftModel(GapModel):
    """Missing ids answer 200 with a "not found" page carrying the id and a timestamp."""

    def not_found_page(self, id_: int) -> bytes:
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>Notice</title></head><body>"
            f"<div class='notfound'><h2>Notice {id_} was not found</h2><p>{time.time():.6f}</p></div>"
            "</body></html>"
        ).encode()

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if self.exists(id_):
            return super().reply(id_, host, nth)
        return Reply(200, self.not_found_page(id_), (("Content-Type", "text/html; charset=utf-8"),))


class ForbiddenModel(GapModel):
    """Missing ids answer 403."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if self.exists(id_):
            return super().reply(id_, host, nth)
        return Reply(403, b"<html><body>Forbidden</body></html>", (("Content-Type", "text/html"),))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrawlResult]:
    """The same ids served as real 404s."""
    with IdSite(GapModel(LOW, HIGH, GAPS)) as site:
        result = run_crawl(tmp_path_factory.mktemp("reference"), {"url": site.url(), **ARGS})
    assert result.returncode == 0, result.stderr[-3000:]
    model = GapModel(LOW, HIGH, GAPS)
    assert result.ids == target_truth(model.exists, 1050, "both", 3)
    assert lane_truth(model.exists, 1050, 1, None, 3)[1] == ASC_CUT
    assert lane_truth(model.exists, 1049, -1, None, 3)[1] == DESC_CUT
    yield result


def checksums(result: CrawlResult, target: str = "gz") -> dict[int, str]:
    return {item["id"]: item["checksum"] for item in result.items if item["target"] == target}


def assert_same_crawl(result: CrawlResult, reference: CrawlResult, target: str = "gz") -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    assert checksums(result, target) == checksums(reference)
    assert {i["id"] for i in result.items if i["target"] == target} == set(reference.ids)
    for lane in ("asc", "desc"):
        key = f"idcrawl/lanes/{target}:{lane}"
        ref = f"idcrawl/lanes/gz:{lane}"
        assert result.stats[f"{key}/cut_reason"] == "margin"
        assert result.stats[f"{key}/cut_at"] == reference.stats[f"{ref}/cut_at"]
        assert result.stats[f"{key}/missing"] == reference.stats[f"{ref}/missing"] > 0
        assert result.stats.get(f"{key}/failed", 0) == 0
    assert result.stats[f"idcrawl/lanes/{target}:asc/cut_at"] == ASC_CUT
    assert result.stats[f"idcrawl/lanes/{target}:desc/cut_at"] == DESC_CUT


def assert_soft(site: IdSite) -> None:
    """The gaps the crawl reached were answered 200, each with a different body."""
    gap_statuses = {e.status for e in site.log if e.id in GAPS}
    assert gap_statuses == {200}


def page_sizes() -> tuple[int, int]:
    model = SoftModel(LOW, HIGH, GAPS)
    soft = max(len(model.not_found_page(i)) for i in GAPS)
    real = min(len(model.page(i)) for i in range(LOW, HIGH + 1) if model.exists(i))
    return soft, real


RULES: list[tuple[str, Any]] = [
    ("soft404_regex", r"Notice \d+ was not found"),
    ("soft404_css", "div.notfound"),
    ("soft404_xpath", "//div[@class='notfound']/h2"),
    ("found_css", "h1.title::text"),
    ("found_xpath", "//dd[@class='value']"),
    ("soft404_max_bytes", page_sizes()[0]),
]


@pytest.mark.parametrize(("key", "value"), RULES, ids=[key for key, _ in RULES])
def test_soft_404s_with_a_rule_crawl_like_real_404s(make_site, tmp_path: Path, reference, key: str, value: Any) -> None:
    if key == "soft404_max_bytes":
        soft, real = page_sizes()
        assert soft < real
    site = make_site(SoftModel(LOW, HIGH, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), **ARGS, key: value})
    assert_same_crawl(result, reference)
    assert_soft(site)
    # each soft 404 is counted under the test that judged it, and under no other
    kind = key.removeprefix("soft404_")
    counted = {k: v for k, v in result.stats.items() if k.startswith("idcrawl/soft404/")}
    assert counted == {f"idcrawl/soft404/{kind}": sum(1 for e in site.log if e.id in GAPS)}, counted


def test_without_a_rule_soft_404s_are_items(make_site, tmp_path: Path) -> None:
    site = make_site(SoftModel(LOW, HIGH, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1050, "max": 1057, "margin": 0})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1050, 1058))  # 1052, 1055, 1056 are "not found" pages


def test_rules_per_target_from_a_job_file(make_site, tmp_path: Path, reference) -> None:
    site = make_site(SoftModel(LOW, HIGH, GAPS))
    job = tmp_path / "job.toml"
    job.write_text(
        f"""
[defaults]
soft404_regex = 'Notice \\d+ was not found'
margin = 3
window = 8

[[targets]]
name = "gz"
url = "{site.url("127.0.0.1")}"
start = 1050
direction = "both"

[[targets]]
name = "plain"             # the same site without a rule: soft 404s are items
url = "{site.url("localhost")}"
start = 1050
max = 1053
margin = 0
soft404_regex = ""
"""
    )
    result = run_crawl(tmp_path, {"job": job})
    assert_same_crawl(result, reference)
    assert sorted(i["id"] for i in result.items if i["target"] == "plain") == [1050, 1051, 1052, 1053]


@pytest.mark.parametrize("how", ["argument", "setting"])
def test_missing_statuses_from_argument_or_setting(make_site, tmp_path: Path, reference, how: str) -> None:
    site = make_site(ForbiddenModel(LOW, HIGH, GAPS))
    if how == "argument":
        result = run_crawl(tmp_path, {"url": site.url(), **ARGS, "missing_statuses": "403,404"})
    else:
        result = run_crawl(tmp_path, {"url": site.url(), **ARGS}, {"IDCRAWL_MISSING_STATUSES": "403"})
    assert_same_crawl(result, reference)


def test_a_spider_subclass_decides_in_classify(make_site, tmp_path: Path, reference) -> None:
    site = make_site(SoftModel(LOW, HIGH, GAPS))
    spider_file = Path(__file__).parents[1] / "support" / "classify_spider.py"
    result = run_crawl(tmp_path, {"url": site.url(), **ARGS}, runspider=spider_file)
    assert_same_crawl(result, reference)
    assert {i["title"] for i in result.items} == {f"Procurement notice {i}" for i in reference.ids}


def test_a_spider_subclass_adds_to_the_lane_request(make_site, tmp_path: Path, reference) -> None:
    """``make_id_request`` overridden as docs/spiders.md shows: the same crawl, every request with its header."""
    site = make_site(GapModel(LOW, HIGH, GAPS))
    spider_file = Path(__file__).parents[1] / "support" / "header_spider.py"
    result = run_crawl(tmp_path, {"url": site.url(), **ARGS}, runspider=spider_file)
    assert_same_crawl(result, reference)
    assert {i["id"]: i["token"] for i in result.items} == {i: f"token-{i}" for i in reference.ids}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("soft404_regex", "(", "soft404_regex='(': is not a valid regular expression"),
        ("found_css", "h1[", "found_css='h1[': is not a valid CSS selector"),
    ],
)
def test_bad_rule_is_one_clear_line_and_no_request(make_site, tmp_path: Path, key: str, value: str, message: str) -> None:
    site = make_site(SoftModel(LOW, HIGH, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1050, key: value})
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert message in errors[0]
    assert "Traceback" not in result.stderr
    assert site.log == []
    assert result.items == []
