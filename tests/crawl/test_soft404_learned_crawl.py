"""Learned soft 404s and content duplicates in real crawls.

The site answers a missing id with ``200 OK`` and a "not found" page that
carries the requested id and the current time inside the same boilerplate as
its real pages (header, navigation, footer). No static rule is given: the
target's ``soft404_probe`` teaches the crawl what that page looks like.
"""

from __future__ import annotations

import random
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.fingerprints import SoftPage, html_text
from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.reference import lane_truth, target_truth

LOW, HIGH = 1000, 1079
GAPS = {1052, 1055, 1056, 1060, 1061, 1062,  # asc from 1050: cut at 1062 (margin 3)
        1045, 1041, 1040, 1032, 1031, 1030}  # desc from 1049: cut at 1030
ARGS = {"name": "reg", "start": 1050, "direction": "both", "margin": 3, "window": 8}
ASC_CUT, DESC_CUT = 1062, 1030
PROBE = 999_999_999  # an id known not to exist
HTML = (("Content-Type", "text/html; charset=utf-8"),)
VOCABULARY = ["road", "bridge", "school", "meals", "hospital", "cleaning", "software", "licences", "office", "furniture", "fuel", "vehicles", "bus", "transport", "waste", "collection", "water", "supply", "street", "lighting", "park", "maintenance", "library", "books", "printing", "security", "services", "catering", "uniforms", "laboratory", "equipment", "medical", "supplies", "snow", "clearing"]


class BoilerplateSoftModel(GapModel):
    """Every page shares a large header, navigation and footer that name the request and the time;
    a missing id gets a 200 "not found" page; ``slow_probe`` delays the probe so lane responses come first."""

    def __init__(self, *args: Any, slow_probe: float = 0.0, probe_status: int = 200,
                 same_body: dict[int, int] | None = None, frozen_time: datetime | None = None) -> None:
        super().__init__(*args)
        self.slow_probe = slow_probe
        self.probe_status = probe_status
        self.same_body = same_body or {}
        self.frozen_time = frozen_time
        self.visits = 0

    def chrome(self, id_: int, content: str) -> bytes:
        now = (self.frozen_time or datetime.now(UTC)).isoformat(timespec="microseconds")
        self.visits += 1
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>Regional procurement register</title>"
            "<script>window.analytics = {page: 'notice', token: '" + f"{random.random()}" + "'};</script></head><body>"
            "<header><nav><a href='/'>Home</a> | <a href='/search'>Search the register</a> | "
            "<a href='/agencies'>Contracting agencies</a> | <a href='/help'>Help and frequently asked questions</a> | "
            "<a href='/contact'>Contact the register office</a></nav>"
            f"<p class='request'>Page generated {now} for request /notice/{id_}</p>"
            "<p>The regional procurement register publishes every contract notice of the public bodies of the "
            "region, as required by the procurement act.</p></header>"
            f"<main>{content}</main>"
            "<footer><p>Regional procurement register office, all rights reserved. Terms of use, privacy "
            f"policy and accessibility statement. Served at {now}, visit {self.visits}.</p></footer></body></html>"
        ).encode()

    def real_page(self, id_: int) -> bytes:
        rng = random.Random(id_)
        subject = " ".join(rng.sample(VOCABULARY, 4))
        agency = " ".join(rng.sample(VOCABULARY, 2)).title()
        return self.chrome(id_, (
            f"<h1 class='title'>Procurement notice {id_}: {subject}</h1>"
            f"<dl><dt>Contracting agency</dt><dd>Department of {agency}</dd>"
            f"<dt>Subject</dt><dd>{subject}</dd><dt>Estimated value</dt><dd>{(id_ * 7919) % 1_000_000} EUR</dd>"
            f"<dt>Procedure</dt><dd>{rng.choice(['open tender', 'restricted procedure', 'negotiated procedure'])}"
            "</dd></dl>"
        ))

    def not_found_page(self, id_: int) -> bytes:
        return self.chrome(id_, (
            f"<div class='message'><h2>Notice {id_} could not be found</h2>"
            "<p>Check the number and try again, or search the register.</p></div>"
        ))

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ == PROBE:
            if self.probe_status != 200:
                return Reply(self.probe_status, b"<html><body>Service unavailable</body></html>", HTML)
            return Reply(200, self.not_found_page(id_), HTML, delay=self.slow_probe)
        if self.exists(id_):
            return Reply(200, self.real_page(self.same_body.get(id_, id_)), HTML)
        return Reply(200, self.not_found_page(id_), HTML)


def model(**kwargs: Any) -> BoilerplateSoftModel:
    return BoilerplateSoftModel(LOW, HIGH, GAPS, **kwargs)


def assert_ground_truth(result: CrawlResult, target: str = "reg") -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    exists = model().exists
    assert result.ids == target_truth(exists, 1050, "both", 3)
    assert lane_truth(exists, 1050, 1, None, 3)[1] == ASC_CUT
    assert lane_truth(exists, 1049, -1, None, 3)[1] == DESC_CUT
    for lane, cut in (("asc", ASC_CUT), ("desc", DESC_CUT)):
        assert result.stats[f"idcrawl/lanes/{target}:{lane}/cut_reason"] == "margin"
        assert result.stats[f"idcrawl/lanes/{target}:{lane}/cut_at"] == cut
    assert result.stats.get("idcrawl/failed", 0) == 0


def test_the_site_is_a_fair_test() -> None:
    """Real pages share most of their text with the soft-404 page, yet stay far below the threshold."""
    site = model()
    probe = SoftPage.learn(html_text(site.not_found_page(PROBE)))
    assert probe is not None
    soft = [probe.similarity(html_text(site.not_found_page(i))) for i in GAPS]
    real = [probe.similarity(html_text(site.real_page(i))) for i in range(LOW, HIGH + 1) if site.exists(i)]
    assert min(soft) == 1.0
    assert 0.4 < max(real) < 0.8  # boilerplate-heavy, but below the default 0.9 (and the 0.8 used below)
    assert site.not_found_page(1052) != site.not_found_page(1052)  # the time changes on every request


@pytest.mark.parametrize("concurrency", [1, 16])
def test_a_learned_soft_404_page_cuts_like_real_404s(make_site, tmp_path: Path, concurrency: int) -> None:
    # the probe answers late: lane responses arrive first and wait for it
    site = make_site(model(slow_probe=0.5))
    result = run_crawl(
        tmp_path, {"url": site.url(), **ARGS, "soft404_probe": PROBE, "soft404_similarity": "0.8"},
        {"CONCURRENT_REQUESTS": concurrency},
    )
    assert_ground_truth(result)
    assert result.stats["idcrawl/soft404/probes/reg"] == "learned"
    reached_gaps = [i for i in GAPS if i in site.ids()]
    assert result.stats["idcrawl/soft404/learned_missing"] >= len(reached_gaps) > 0
    assert site.ids().count(PROBE) == 1
    assert {e.status for e in site.log if e.id in GAPS} == {200}
    assert "learned its soft-404 page" in result.stderr


def test_a_site_spider_with_its_own_start_still_probes_first(make_site, tmp_path: Path) -> None:
    """The probe comes from IdSoft404Middleware, whatever the spider's ``start()`` yields."""
    site = make_site(model(slow_probe=0.5))
    result = run_crawl(
        tmp_path, {"url": site.url(), **ARGS, "soft404_probe": PROBE, "soft404_similarity": "0.8"},
        runspider=Path(__file__).parents[1] / "support" / "own_start_spider.py",
    )
    assert_ground_truth(result)
    assert result.stats["idcrawl/soft404/probes/reg"] == "learned"
    assert site.ids().count(PROBE) == 1
    assert "own start request answered: hello" in result.stderr


def test_with_the_probe_middleware_turned_off_nothing_is_probed_or_held(make_site, tmp_path: Path) -> None:
    site = make_site(model())
    result = run_crawl(
        tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1063, "margin": 0, "soft404_probe": PROBE},
        {"SPIDER_MIDDLEWARES": {"idcrawl.spidermiddlewares.soft404.IdSoft404Middleware": None}},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1050, 1064))  # the soft 404s are items, as without the probe
    assert PROBE not in site.ids()
    assert "idcrawl/soft404/probes/reg" not in result.stats


def test_without_the_probe_every_id_is_found(make_site, tmp_path: Path) -> None:
    site = make_site(model())
    result = run_crawl(tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1063, "margin": 0})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1050, 1064))  # 1052, 1055, 1056, 1060-1062 are "not found" pages
    assert "idcrawl/soft404/learned_missing" not in result.stats


def test_probe_keys_in_a_job_file(make_site, tmp_path: Path) -> None:
    site = make_site(model())
    job = tmp_path / "job.toml"
    job.write_text(
        f"""
[defaults]
soft404_probe = {PROBE}
margin = 3
window = 8

[[targets]]
name = "reg"
url = "{site.url("127.0.0.1")}"
start = 1050
direction = "both"

[[targets]]
name = "plain"             # the same site without the probe: soft 404s are items
url = "{site.url("localhost")}"
start = 1050
max = 1053
margin = 0
soft404_probe = ""
"""
    )
    result = run_crawl(tmp_path, {"job": job})
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(i["id"] for i in result.items if i["target"] == "reg") == target_truth(model().exists, 1050, "both", 3)
    assert sorted(i["id"] for i in result.items if i["target"] == "plain") == [1050, 1051, 1052, 1053]
    assert "idcrawl/soft404/probes/plain" not in result.stats


def test_a_probe_answered_404_means_real_404s_and_learns_nothing(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(LOW, HIGH, GAPS))  # real 404s, the probe too
    result = run_crawl(tmp_path, {"url": site.url(), **ARGS, "soft404_probe": PROBE})
    assert_ground_truth(result)
    assert result.stats["idcrawl/soft404/probes/reg"] == "real_404"
    assert "the site has real 404s" in result.stderr
    assert " WARNING: " not in result.stderr


def test_a_failing_probe_is_one_warning_and_learns_nothing(make_site, tmp_path: Path) -> None:
    site = make_site(model(probe_status=503))
    result = run_crawl(
        tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1057, "margin": 0, "soft404_probe": PROBE},
        {"RETRY_TIMES": 1},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1050, 1058))  # nothing learned: the soft 404s are items
    warnings = [line for line in result.stderr.splitlines() if " WARNING: " in line and "probe" in line]
    assert len(warnings) == 1, result.stderr[-3000:]
    assert "soft-404 probe" in warnings[0] and "503" in warnings[0] and "nothing learned" in warnings[0]
    assert result.stats["idcrawl/soft404/probes/reg"] == "failed"
    assert site.ids().count(PROBE) == 2  # RETRY_TIMES applies to the probe
    assert result.error_lines() == []  # no "gave up retrying" error besides the warning


def test_an_unreachable_probe_is_one_warning_and_learns_nothing(make_site, tmp_path: Path) -> None:
    site = make_site(model())
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/notice/{PROBE}"
    result = run_crawl(
        tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1057, "margin": 0, "soft404_probe": closed},
        {"RETRY_TIMES": 1},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1050, 1058))
    warnings = [line for line in result.stderr.splitlines() if " WARNING: " in line and "probe" in line]
    assert len(warnings) == 1, result.stderr[-3000:]
    assert closed in warnings[0] and "failed" in warnings[0] and "nothing learned" in warnings[0]
    # Scrapy's robots.txt middleware reports the unreachable host itself; idcrawl adds no error
    assert all("[scrapy.downloadermiddlewares." in line for line in result.error_lines())
    assert result.stats["idcrawl/soft404/probes/reg"] == "failed"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"soft404_probe": "-1"}, "soft404_probe='-1': must be an id known not to exist"),
        ({"soft404_probe": "1", "soft404_similarity": "1.5"}, "soft404_similarity='1.5': must be a number > 0 and <= 1"),
    ],
)
def test_bad_probe_arguments_are_one_line_and_no_request(make_site, tmp_path: Path, args: dict[str, str],
                                                         message: str) -> None:
    site = make_site(model())
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1050, **args})
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert message in errors[0]
    assert "Traceback" not in result.stderr
    assert site.log == []


# -- content duplicates ---------------------------------------------------------------------


def test_an_id_serving_an_earlier_page_is_marked_duplicate(make_site, tmp_path: Path) -> None:
    site = make_site(model(same_body={1053: 1051, 1054: 1051}))
    # real pages carry the time: exact duplicates need identical bodies, so serve a frozen copy
    frozen = {i: site.model.real_page(i) for i in (1050, 1051, 1053, 1054, 1057)}
    site.model.real_page = lambda id_: frozen[id_]  # type: ignore[method-assign]
    result = run_crawl(tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1057, "margin": 0,
                                  "soft404_probe": PROBE})
    assert result.returncode == 0, result.stderr[-3000:]
    items = {item["id"]: item for item in result.items}
    assert sorted(items) == [1050, 1051, 1053, 1054, 1057]
    assert items[1053]["checksum"] == items[1051]["checksum"] == items[1054]["checksum"]
    # the first of the three to reach the pipeline (ids are decided in any order) is the original
    first = [i for i in (1051, 1053, 1054) if "duplicate_of" not in items[i]]
    assert len(first) == 1
    assert all(items[i]["duplicate_of"] == first[0] for i in {1051, 1053, 1054} - set(first))
    assert all("duplicate_of" not in items[i] for i in (1050, 1057))
    assert all("duplicate_of_target" not in item and "_idcrawl_minhash" not in item for item in items.values())
    assert result.stats["idcrawl/content/duplicates"] == 2


def test_drop_mode_drops_duplicates_and_the_state_still_records_them_found(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(LOW, HIGH, GAPS))
    page = site.model.page
    site.model.page = lambda id_: page(1050) if id_ in (1053, 1054) else page(id_)  # type: ignore[method-assign]
    result = run_crawl(tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1057, "margin": 0},
                       {"IDCRAWL_CONTENT_DUPLICATES": "drop"})
    assert result.returncode == 0, result.stderr[-3000:]
    # 1053 and 1054 served 1050's page: one of the three is kept
    kept = set(result.ids) & {1050, 1053, 1054}
    assert len(kept) == 1 and set(result.ids) == kept | {1051, 1057}
    assert result.stats["idcrawl/content/duplicates"] == 2
    assert result.stats["idcrawl/lanes/reg:asc/found"] == 5  # dropped items are still found ids


def test_near_duplicates_are_marked_with_similarity(make_site, tmp_path: Path) -> None:
    # the same content as 1051, another visit counter in the footer (the time is frozen: crossing a
    # minute changes more words of the page, and the similarity with them)
    site = make_site(model(same_body={1053: 1051}, frozen_time=datetime(2026, 11, 26, 4, 0, tzinfo=UTC)))
    result = run_crawl(
        tmp_path, {"url": site.url(), "name": "reg", "start": 1050, "max": 1057, "margin": 0,
                   "soft404_probe": PROBE},
        {"IDCRAWL_CONTENT_NEAR_DUPLICATES": 0.8},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    items = {item["id"]: item for item in result.items}
    assert sorted(items) == [1050, 1051, 1053, 1054, 1057]
    assert items[1053]["checksum"] != items[1051]["checksum"]
    marked = [i for i, item in items.items() if "near_duplicate_of" in item]
    assert marked in ([1051], [1053])  # whichever of the pair reached the pipeline second
    assert items[marked[0]]["near_duplicate_of"] == ({1051, 1053} - set(marked)).pop()
    assert 0.8 <= items[marked[0]]["near_duplicate_similarity"] <= 1.0
    assert all("_idcrawl_minhash" not in item for item in items.values())
    assert result.stats["idcrawl/content/near_duplicates"] == 1
    assert result.stats.get("idcrawl/content/duplicates", 0) == 0


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("IDCRAWL_CONTENT_DUPLICATES", "maybe", "IDCRAWL_CONTENT_DUPLICATES='maybe': must be one of mark, drop, off"),
        ("IDCRAWL_CONTENT_NEAR_DUPLICATES", "2", "IDCRAWL_CONTENT_NEAR_DUPLICATES='2': must be a Jaccard threshold"),
    ],
)
def test_bad_content_settings_are_one_line(make_site, tmp_path: Path, setting: str, value: str, message: str) -> None:
    site = make_site(model())
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1050}, {setting: value})
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert message in errors[0]
    assert "Traceback" not in result.stderr
    assert site.log == []
