"""``scrapy crawl`` (idcrawl's): the exit status of a crawl that closed for a failure reason
(the real command with a Redis gone for good: tests/integration/test_distributed_crawl.py)."""

from __future__ import annotations

from scrapy.settings import Settings

from idcrawl.commands.crawl import failure_exit_code


def test_by_default_every_finish_reason_exits_0_as_in_scrapy() -> None:
    settings = Settings()
    for reason in ("finished", "idcrawl_redis_unavailable", "idcrawl_redis_state_lost", None):
        assert failure_exit_code([reason], settings) == 0


def test_a_failure_reason_exits_with_the_configured_status() -> None:
    settings = Settings({"IDCRAWL_FAIL_EXIT_CODE": "3"})
    assert failure_exit_code(["idcrawl_redis_unavailable"], settings) == 3
    assert failure_exit_code(["idcrawl_redis_state_lost"], settings) == 3
    assert failure_exit_code(["finished"], settings) == 0
    assert failure_exit_code(["idcrawl_idle_timeout"], settings) == 0
    assert failure_exit_code([], settings) == 0


def test_the_failure_reasons_are_a_setting() -> None:
    settings = Settings({"IDCRAWL_FAIL_EXIT_CODE": 2, "IDCRAWL_FAIL_REASONS": "closespider_timeout, shutdown"})
    assert failure_exit_code(["shutdown"], settings) == 2
    assert failure_exit_code(["closespider_timeout"], settings) == 2
    assert failure_exit_code(["idcrawl_redis_unavailable"], settings) == 0
