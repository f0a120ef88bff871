"""Dupefilters shared by the workers of a distributed job (real redis-server)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from idcrawl.distributed.dupefilters import RedisBloomSeen
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import worker_settings
from tests.support.crawl import run_crawl

redis = pytest.importorskip("redis")

SPIDER = Path(__file__).parents[1] / "support" / "shared_detail_spider.py"


def fp(i: int) -> bytes:
    return hashlib.sha1(str(i).encode()).digest()


def test_the_redis_bloom_filter_is_sharded_and_keeps_its_rate(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    bloom = RedisBloomSeen(client, "t:{j}:", 0.01, 2000, shard_bits=4096)
    assert bloom.shards > 1 and bloom.bits >= 2000 * 9  # ~9.6 bits per item at 1%
    added = [bloom.add(fp(i)) for i in range(2000)]
    assert sum(added) <= 2000 * 0.02  # "was there already" is a false positive here
    assert all(fp(i) in bloom for i in range(2000))
    assert len(bloom) == 2000 - sum(added)
    false_positives = sum(fp(i) in bloom for i in range(10_000, 20_000))
    assert false_positives <= 10_000 * 0.01 * 2.5
    assert 0.003 < bloom.estimated_error_rate() < 0.02
    shards = client.keys("t:{j}:bloom:*")
    assert len(shards) == bloom.shards + 1  # + the count
    # another worker's view of the same keys
    other = RedisBloomSeen(redis.Redis.from_url(redis_server.url), "t:{j}:", 0.01, 2000, shard_bits=4096)
    assert all(fp(i) in other for i in range(0, 2000, 97))


@pytest.mark.parametrize("dupefilter", ["RedisBloomDupeFilter", "RedisRFPDupeFilter"])
def test_a_detail_page_one_worker_fetched_is_not_fetched_by_another(
    make_site, redis_server, tmp_path: Path, dupefilter: str
) -> None:
    site = make_site(GapModel(0, 10_000, set()))
    settings = worker_settings(redis_server, job="df", DUPEFILTER_CLASS=f"idcrawl.distributed.dupefilters.{dupefilter}",
                               CONCURRENT_REQUESTS=1)
    first = run_crawl(tmp_path, {"url": site.url(), "start": 0, "max": 19, "margin": 0, "name": "a"}, settings,
                      runspider=SPIDER)
    assert first.returncode == 0, first.stderr[-3000:]
    details = sorted(i for i in site.ids() if i >= 5000)
    assert details == [5000, 5001, 5002, 5003, 5004]  # each once within one worker too
    if dupefilter == "RedisBloomDupeFilter":
        # one BLOOM call per follow-up request (20; the first also refused with NOSCRIPT), the adds of the
        # 5 fetched detail pages riding along or in calls of their own: the 20 lane requests cost none
        assert first.stats["idcrawl/redis/commands/bloom"] <= 20 + 1 + 5 + 1
    site.log.clear()
    # another target for the same job: joining it takes the explicit word (a fleet job's targets are one set)
    second = run_crawl(tmp_path, {"url": site.url(), "start": 20, "max": 39, "margin": 0, "name": "b"},
                       {**settings, "IDCRAWL_REDIS_MERGE_TARGETS": True}, runspider=SPIDER)
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(site.ids()) == list(range(20, 40)), "a detail page was fetched again"
    if dupefilter == "RedisBloomDupeFilter":  # scrapy-redis's filter does not count dupefilter/filtered
        assert second.stats.get("dupefilter/filtered", 0) >= 20


@pytest.mark.parametrize("dupefilter", ["RedisBloomDupeFilter", "RedisRFPDupeFilter"])
def test_a_link_to_a_lane_page_the_job_handed_out_is_not_fetched_again(
    make_site, redis_server, tmp_path: Path, dupefilter: str
) -> None:
    site = make_site(GapModel(0, 10_000, set()))
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    settings = worker_settings(redis_server, job="lanelinks",
                               DUPEFILTER_CLASS=f"idcrawl.distributed.dupefilters.{dupefilter}", CONCURRENT_REQUESTS=1)
    # the detail pages 5000..5004 are the lane pages of target "details": a first worker crawls them
    first = run_crawl(tmp_path / "1", {"url": site.url(), "start": 5000, "max": 5004, "margin": 0, "name": "details"},
                      settings, runspider=SPIDER)
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(site.ids()) == list(range(5000, 5005))
    site.log.clear()
    # a second worker of the job crawls ids that link to them: the job handed those pages out already
    # (another target for the same job: joining it takes the explicit word, a fleet job's targets are one set)
    second = run_crawl(tmp_path / "2", {"url": site.url(), "start": 0, "max": 19, "margin": 0, "name": "a"},
                       {**settings, "IDCRAWL_REDIS_MERGE_TARGETS": True}, runspider=SPIDER)
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(site.ids()) == list(range(20)), "a lane's page was fetched again as a follow-up"
    assert not any(key.endswith("/commands/bloom") or key.endswith("/commands/sadd") for key in second.stats)


def test_a_fleet_without_the_profile_shares_its_seen_set(make_site, redis_server, tmp_path: Path) -> None:
    """``IDCRAWL_DISTRIBUTED=True`` alone (no ``distributed`` profile, no ``DUPEFILTER_CLASS``): the backend
    puts the add-on's dupefilter's fingerprints in Redis, so a detail page one worker fetched is not
    fetched by another worker of the job in another directory (its own filter file would not know it)."""
    site = make_site(GapModel(0, 10_000, set()))
    settings = worker_settings(redis_server, job="noprofile", CONCURRENT_REQUESTS=1)
    assert "DUPEFILTER_CLASS" not in settings and "IDCRAWL_PROFILE" not in settings
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    first = run_crawl(tmp_path / "1", {"url": site.url(), "start": 0, "max": 19, "margin": 0, "name": "a"}, settings,
                      runspider=SPIDER)
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(i for i in site.ids() if i >= 5000) == [5000, 5001, 5002, 5003, 5004]
    assert first.stats["idcrawl/dupefilter/backend"] == "redis-bloom"
    site.log.clear()
    second = run_crawl(tmp_path / "2", {"url": site.url(), "start": 20, "max": 39, "margin": 0, "name": "b"},
                       {**settings, "IDCRAWL_REDIS_MERGE_TARGETS": True}, runspider=SPIDER)
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(site.ids()) == list(range(20, 40)), "a detail page was fetched again"
    assert second.stats["idcrawl/dupefilter/backend"] == "redis-bloom"
    assert second.stats.get("dupefilter/filtered", 0) >= 20
