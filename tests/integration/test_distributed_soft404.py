"""Learned soft 404s in a distributed job: two workers of one Redis job, on the site of
tests/crawl/test_soft404_learned_crawl.py (a missing id answers 200 with a "not found" page inside the real
pages' boilerplate), give the single process's items and cuts, each id fetched once across the fleet."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.crawl.test_soft404_learned_crawl import ARGS, ASC_CUT, DESC_CUT, GAPS, PROBE, model
from tests.integration.test_distributed_crawl import run_fleet, worker_settings
from tests.support.reference import target_truth

pytest.importorskip("redis")


def test_two_workers_learn_the_soft_404_page_and_cut_where_one_process_does(
    make_site, redis_server, tmp_path: Path
) -> None:
    site = make_site(model(slow_probe=0.5))  # lane responses come first and wait for their worker's probe
    args = {"url": site.url(), **ARGS, "soft404_probe": PROBE, "soft404_similarity": "0.8"}
    results = run_fleet(tmp_path, args, worker_settings(redis_server, job="soft", CONCURRENT_REQUESTS=8), workers=2)
    exists = model().exists
    assert sorted(i["id"] for r in results for i in r.items) == target_truth(exists, 1050, "both", 3)
    fetched = Counter(site.ids())
    assert fetched.pop(PROBE) == 2, "each worker learns the page itself"
    assert set(fetched.values()) == {1}, "each id once across the fleet"
    reached_gaps = GAPS & set(fetched)
    assert sum(r.stats.get("idcrawl/soft404/learned_missing", 0) for r in results) >= len(reached_gaps) > 0
    for result in results:
        assert result.stats["finish_reason"] == "finished"
        assert result.stats["idcrawl/soft404/probes/reg"] == "learned"
        for lane, cut in (("asc", ASC_CUT), ("desc", DESC_CUT)):  # the fleet's cuts, as one process cuts
            assert result.stats[f"idcrawl/lanes/reg:{lane}/cut_reason"] == "margin"
            assert result.stats[f"idcrawl/lanes/reg:{lane}/cut_at"] == cut
        assert "Traceback" not in result.stderr
