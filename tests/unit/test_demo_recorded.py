"""The demo site's spider on pages recorded from the bundled demo site (tests/fixtures/cassettes/test_demo_recorded/).

No server runs: each test replays its committed cassette through idcrawl's pytest plugin (``recorded_crawl``),
and under ``CI=true`` a missing cassette fails instead of reaching the network. The fields of a found page,
a real 404, and the soft-404 rules (``soft404_regex``, ``soft404_css``, ``found_css``, the learned
``soft404_probe``) judged on a soft 404 that the demo site serves at ``/register/{id}`` with status 200.

Refresh (docs/testing.md): delete a cassette, ``python -m idcrawl.demo serve --port 8000`` in one shell, run this
module without ``CI`` in another.
"""

from __future__ import annotations

from typing import Any

import pytest

from idcrawl.core.lanes import Outcome
from idcrawl.demo.site import DemoModel
from idcrawl.spiders.demo import DemoSpider

#: where the cassettes were recorded: ``python -m idcrawl.demo serve --port 8000``
NOTICES = "http://127.0.0.1:8000/notice/{id}"  # 404 for an id that does not exist
REGISTER = "http://127.0.0.1:8000/register/{id}"  # 200 "Notice N could not be found" for one that does not
FOUND = 12_345
GAP = 12_346  # not on the demo site
PROBE = 99_999_999  # far outside it: the page to learn the soft 404 from
MODEL = DemoModel()


def test_the_ids_are_what_the_demo_site_has() -> None:
    assert MODEL.exists(FOUND) and not MODEL.exists(GAP) and not MODEL.exists(PROBE)


def test_a_found_page_gives_the_fields_of_its_notice(recorded_crawl: Any) -> None:
    page = recorded_crawl(DemoSpider, url=NOTICES, start=FOUND, name="notices").fetch(FOUND)
    assert page.outcome is Outcome.FOUND
    item = page.item
    fetched_at = item.pop("fetched_at")
    assert fetched_at.endswith("Z")
    assert item == {
        "target": "notices", "id": FOUND, "url": NOTICES.format(id=FOUND), "status": 200, "attempts": 1,
        "checksum": "ee97a4371fae3eeed08fc1a04d78604d8228f7e7", "revision": 1, "previous_checksum": None,
        "title": f"Procurement notice {FOUND}", "agency": f"Agency {FOUND % 37}",
        "value": FOUND * 7919 % 1_000_000, "published": "2026-10-26",
    }
    # the recorded answer, not scrapy-mock's bare 200: status, headers, and the request's idcrawl meta
    assert page.response.status == 200
    assert page.response.headers["Content-Type"] == b"text/html; charset=utf-8"
    assert page.response.meta["idcrawl"] == {"lane": "notices:asc", "id": FOUND, "target": "notices", "attempt": 1}


def test_a_real_404_is_missing(recorded_crawl: Any) -> None:
    page = recorded_crawl(DemoSpider, url=NOTICES, start=FOUND).fetch(GAP)
    assert (page.outcome, page.response.status, page.output) == (Outcome.MISSING, 404, [])


def test_without_a_rule_a_soft_404_is_found(recorded_crawl: Any) -> None:
    """Why the rules exist: the register answers 200 for an id it does not have, and the page would be an item."""
    page = recorded_crawl(DemoSpider, url=REGISTER, start=FOUND).fetch(GAP)
    assert (page.outcome, page.response.status) == (Outcome.FOUND, 200)
    assert page.item["title"] is None


RULES = {
    "soft404_regex": {"soft404_regex": "could not be found"},
    "soft404_css": {"soft404_css": "h1.notice-missing"},
    "found_css": {"found_css": "h1.title"},
    "soft404_probe": {"soft404_probe": PROBE},
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_soft404_rule_makes_the_soft_404_missing_and_keeps_the_notice_found(
    recorded_crawl: Any, rule: str
) -> None:
    crawl = recorded_crawl(DemoSpider, url=REGISTER, start=FOUND, **RULES[rule])
    soft = crawl.fetch(GAP)
    assert (soft.outcome, soft.response.status, soft.output) == (Outcome.MISSING, 200, [])
    found = crawl.fetch(FOUND)
    assert found.outcome is Outcome.FOUND
    assert found.item["title"] == f"Procurement notice {FOUND}"
    if rule == "soft404_probe":  # learned from the recorded probe page, as a crawl learns it
        assert crawl.crawler.stats.get_value("idcrawl/soft404/probes/127.0.0.1") == "learned"
        assert crawl.crawler.stats.get_value("idcrawl/soft404/learned_missing") == 1


def test_the_learned_probe_on_a_site_with_real_404s_learns_nothing(recorded_crawl: Any) -> None:
    crawl = recorded_crawl(DemoSpider, url=NOTICES, start=FOUND, soft404_probe=PROBE)
    assert crawl.outcome(GAP) is Outcome.MISSING
    assert crawl.crawler.stats.get_value("idcrawl/soft404/probes/127.0.0.1") == "real_404"
