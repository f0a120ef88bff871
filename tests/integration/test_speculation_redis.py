"""Adaptive speculation in a fleet: 3 real ``scrapy crawl`` workers on one Redis job.

No timing is measured: the waste past a cut is a count of the server's requests.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.support.crawl import run_crawl
from tests.support.reference import lane_truth, target_truth

pytest.importorskip("redis")

GAPS = {1152, 1160, 1161, 1170, 1171, 1172}  # runs shorter than the margin: the lanes end at the site's ends


class Jitter(GapModel):
    """Small per-id delays so that responses arrive out of id order."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, (id_ * 7919 % 13) / 1000)


@pytest.mark.parametrize("speculation", ["adaptive", "window"])
def test_three_workers_request_at_most_the_margin_past_each_lane_end(
    make_site, redis_server, tmp_path: Path, speculation: str
) -> None:
    model = Jitter(1100, 1199, GAPS)
    site = make_site(model)
    margin, concurrency = 4, 32
    args = {"url": site.url(), "start": 1150, "direction": "both", "margin": margin, "window": 64}
    settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": concurrency, "IDCRAWL_SPECULATION": speculation}
    (tmp_path / "single").mkdir()
    single = run_crawl(tmp_path / "single", args, {"CONCURRENT_REQUESTS": concurrency, **settings})
    assert single.returncode == 0, single.stderr[-3000:]
    assert single.ids == target_truth(model.exists, 1150, "both", margin)
    site.log.clear()
    site._counts.clear()

    fleet = worker_settings(redis_server, job=f"spec-{speculation}", IDCRAWL_REDIS_CLAIM_BLOCK=8,
                            CONCURRENT_REQUESTS=concurrency, **settings)
    procs = [start_worker(tmp_path / f"w{n}", args, fleet) for n in range(3)]
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    union = sorted(i["id"] for r in results for i in r.items)
    assert union == single.ids  # the same items, each once
    requested = site.ids()
    assert max(Counter(requested).values()) == 1
    _, asc_cut = lane_truth(model.exists, 1150, 1, None, margin)
    _, desc_cut = lane_truth(model.exists, 1149, -1, None, margin)
    assert (asc_cut, desc_cut) == (1203, 1096)
    past = (len([i for i in requested if i > asc_cut]), len([i for i in requested if i < desc_cut]))
    if speculation == "adaptive":
        assert past[0] <= margin and past[1] <= margin, past
