"""Job limits (idcrawl.extensions.limits.IdLimits) in real ``scrapy crawl`` runs: one domain stops, the other goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lxml import etree

from idcrawl import settings as project_settings
from idcrawl.addon import EXTENSIONS as ADDON_EXTENSIONS
from idcrawl.demo.site import Reply
from idcrawl.extensions.incidents import schema
from tests.conftest import GapModel
from tests.support.crawl import CrawlResult, run_crawl

STOPPED, OTHER = "127.0.0.1", "localhost"
EXTENSIONS = {"tests.support.statsdump.StatsDump": 0, "idcrawl.extensions.limits.IdLimits": 200}


class SlowModel(GapModel):
    """Replies to host 127.0.0.1 take ``delay`` seconds; ids above ``last_found`` there are 404."""

    def __init__(self, delay: float = 0.0, last_found: int = 10_000) -> None:
        super().__init__(0, 10_000, set())
        self.delay, self.last_found = delay, last_found

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if host == STOPPED and id_ > self.last_found:
            return Reply(404, b"<html>no</html>", (("Content-Type", "text/html"),), self.delay)
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, self.delay if host == STOPPED else 0.0)


def two_domain_crawl(site: Any, tmp_path: Path, limits: dict[str, Any]) -> CrawlResult:
    job = tmp_path / "job.toml"
    job.write_text(
        f"""
[[targets]]
name = "A"
url = "{site.url(STOPPED)}"
start = 100
max = 399
margin = 0

[[targets]]
name = "b"
url = "{site.url(OTHER)}"
start = 5000
max = 5002
margin = 0
"""
    )
    settings = {
        "CONCURRENT_REQUESTS": 2,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "ROBOTSTXT_OBEY": False,
        "EXTENSIONS": EXTENSIONS,
        "IDCRAWL_INCIDENT_LOG": str(tmp_path / "incidents.xml"),
        **limits,
    }
    result = run_crawl(tmp_path, {"job": job}, settings, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished"
    # the other domain finished normally
    assert sorted(site.ids(OTHER)) == [5000, 5001, 5002]
    assert result.stats["idcrawl/lanes/b:asc/cut_reason"] == "bound"
    assert sorted(i["id"] for i in result.items if i["target"] == "b") == [5000, 5001, 5002]
    return result


def incidents(tmp_path: Path) -> list[etree._Element]:
    doc = etree.parse(str(tmp_path / "incidents.xml"))
    schema().assertValid(doc)
    return list(doc.getroot())


def test_limits_extension_is_wired_in_the_project_settings() -> None:
    # through the idcrawl add-on, which the project's settings enable
    assert "idcrawl.addon.IdCrawl" in project_settings.ADDONS
    assert "idcrawl.extensions.limits.IdLimits" in ADDON_EXTENSIONS


def test_plmax_stops_one_domain_while_the_other_finishes(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel())
    result = two_domain_crawl(site, tmp_path, {"IDCRAWL_LIMIT_PLMAX": 5})
    assert result.stats["idcrawl/lanes/A:asc/cut_reason"] == "limit:PLmax"
    assert result.stats["idcrawl/limits/PLmax"] == 1
    assert result.stats["idcrawl/limits/domains/127.0.0.1/rule"] == "PLmax"
    assert 5 <= len(site.ids(STOPPED)) <= 6  # at most the one in flight at the trigger
    assert not (tmp_path / "incidents.xml").exists()  # PLmax writes no incident by default


def test_ttmax_stops_one_domain_and_writes_a_valid_incident(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel())
    result = two_domain_crawl(site, tmp_path, {"IDCRAWL_LIMIT_TTMAX": 5})
    assert result.stats["idcrawl/lanes/A:asc/cut_reason"] == "limit:TTmax"
    assert sorted(site.ids(STOPPED)) == list(range(100, 105))  # no request after the 5th target
    [incident] = incidents(tmp_path)
    assert incident.findtext("domain") == STOPPED
    assert incident.findtext("rule") == "TTmax"
    assert incident.findtext("category") == "secondary"
    assert incident.findtext("limit") == "5"
    assert incident.findtext("observed") == "5"
    assert incident.find("cursors/cursor").get("lane") == "A:asc"


def test_tdl_stops_a_slow_domain_after_its_time(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel(delay=0.1))
    result = two_domain_crawl(site, tmp_path, {"IDCRAWL_LIMIT_TDL": "1s"})
    assert result.stats["idcrawl/lanes/A:asc/cut_reason"] == "limit:TDL"
    log = [e for e in site.log if e.host == STOPPED and e.id is not None]
    assert 3 <= len(log) <= 14  # ~1 s of 0.1 s fetches, then nothing new
    assert log[-1].at - log[0].at <= 1.6
    [incident] = incidents(tmp_path)
    assert incident.findtext("rule") == "TDL"
    assert incident.findtext("unit") == "seconds"
    assert float(incident.findtext("limit")) == 1.0
    assert 1.0 <= float(incident.findtext("observed")) < 2.0
    assert incident.findtext("urls/url").startswith(f"http://{STOPPED}:")


def test_tst_stops_a_domain_whose_found_count_stays_put(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel(last_found=104))
    result = two_domain_crawl(site, tmp_path, {"IDCRAWL_LIMIT_TST": 3})
    assert result.stats["idcrawl/lanes/A:asc/cut_reason"] == "limit:TST"
    requested = sorted(site.ids(STOPPED))
    # 5 found ids, then 3 iterations without a new one (one more may be due to a late outcome)
    assert requested[:8] == list(range(100, 108))
    assert len(requested) <= 10


def test_imax_with_lt_takes_lt_requests_per_iteration(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel())
    result = two_domain_crawl(site, tmp_path, {"IDCRAWL_LIMIT_IMAX": 2, "IDCRAWL_LIMIT_LT": 3})
    assert result.stats["idcrawl/lanes/A:asc/cut_reason"] == "limit:Imax"
    assert sorted(site.ids(STOPPED)) == list(range(100, 106))
    assert result.stats["idcrawl/limits/domains/127.0.0.1/iterations"] == 2


def test_tac_stops_a_domain_whose_iterations_are_too_far_apart(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel(delay=0.8))
    result = two_domain_crawl(site, tmp_path, {"IDCRAWL_LIMIT_TAC": 0.4})
    assert result.stats["idcrawl/lanes/A:asc/cut_reason"] == "limit:TAC"
    assert len(site.ids(STOPPED)) <= 2
    [incident] = incidents(tmp_path)
    assert incident.findtext("rule") == "TAC"


def test_a_job_limit_closes_the_spider_with_its_rule(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel())
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 100, "max": 399, "margin": 0},
        {"EXTENSIONS": EXTENSIONS, "IDCRAWL_JOB_LIMIT_PLMAX": 10, "CONCURRENT_REQUESTS": 1,
         "IDCRAWL_INCIDENT_LOG": str(tmp_path / "incidents.xml")},
        timeout=60,
    )
    assert result.stats["finish_reason"] == "idcrawl_limit_PLmax"
    assert result.stats["idcrawl/limits/PLmax"] == 1
    assert 10 <= len(site.ids()) <= 12


def test_a_bad_limit_value_is_one_error_line_and_no_request(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel())
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 100, "max": 110},
        {"EXTENSIONS": EXTENSIONS, "IDCRAWL_LIMIT_TDL": "15x"},
        timeout=60,
    )
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert "IDCRAWL_LIMIT_TDL" in errors[0] and "15x" in errors[0]
    assert "Traceback" not in result.stderr
    assert site.log == []


def test_an_unusable_incident_log_is_one_error_line_at_start(make_site, tmp_path: Path) -> None:
    site = make_site(SlowModel())
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 100, "max": 110},
        {"EXTENSIONS": EXTENSIONS, "IDCRAWL_LIMIT_TDL": "15m", "IDCRAWL_INCIDENT_LOG": str(tmp_path)},
        timeout=60,
    )
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1 and "IDCRAWL_INCIDENT_LOG" in errors[0] and "is a directory" in errors[0]
    assert site.log == []


def test_unhandled_spider_errors_are_incidents_when_asked(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 100, set()))
    log = tmp_path / "incidents.xml"
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1, "max": 5, "margin": 0},
        {"EXTENSIONS": EXTENSIONS, "IDCRAWL_LIMIT_PLMAX": 1000, "IDCRAWL_INCIDENT_LOG": str(log),
         "IDCRAWL_INCIDENT_RULES": "TTmax,errors"},
        runspider=Path(__file__).parents[1] / "support" / "failing_spider.py",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    doc = etree.parse(str(log))
    schema().assertValid(doc)
    errors = doc.findall(".//incident[@kind='error']")
    assert len(errors) == 1
    text = etree.tostring(errors[0], encoding="unicode")
    assert "ValueError: cannot parse &lt;notice&gt; &amp; co" in text
    assert site.url().format(id=3) in text
