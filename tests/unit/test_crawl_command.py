"""``scrapy crawl`` (idcrawl's): the exit status of each finish reason, from the one table
(idcrawl.core.exits; real crawls: tests/crawl/test_storage_crawl.py, tests/integration/test_distributed_crawl.py)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from scrapy.settings import Settings

from idcrawl.commands.crawl import crawl_exit_status
from idcrawl.core.exits import (
    DID_NOT_START,
    EXIT_STATUSES,
    NORMAL_PREFIXES,
    NORMAL_REASONS,
    OTHER,
    exit_status,
    is_normal,
    normal_reasons,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "finish-reasons.md"


def test_normal_completions_exit_0_and_every_other_reason_non_zero() -> None:
    for reason in (*NORMAL_REASONS, "idcrawl_limit_Imax", "idcrawl_limit_TAC"):
        assert is_normal(reason) and exit_status(reason) == 0
    assert exit_status("idcrawl_storage_error") == 74
    assert exit_status("idcrawl_redis_unavailable") == 69
    assert exit_status("idcrawl_redis_state_lost") == 65
    assert exit_status("idcrawl_no_progress") == 75
    for reason in ("closespider_errorcount", "site_gone", "cancelled", "idcrawl_watch_error", "", None):
        assert exit_status(reason) == OTHER != 0


def test_a_shutdown_exits_128_plus_its_signal() -> None:
    assert exit_status("shutdown", signal.SIGINT) == 130
    assert exit_status("shutdown", signal.SIGTERM) == 143
    assert exit_status("shutdown") == 143  # no signal known (scrapyd's cancel, Zyte's stop send SIGTERM)
    assert exit_status("shutdown", signal.SIGINT, watching=True) == 0  # watch mode runs until stopped
    assert is_normal("shutdown", watching=True) and "shutdown" in normal_reasons(watching=True)
    assert "shutdown" not in normal_reasons()
    assert crawl_exit_status(["shutdown"], Settings({"IDCRAWL_WATCH": True}), [signal.SIGTERM]) == 0


def test_the_command_uses_the_table_and_a_write_failed_at_close_is_not_success() -> None:
    settings = Settings()
    assert crawl_exit_status(["finished"], settings) == 0
    assert crawl_exit_status(["idcrawl_redis_unavailable"], settings) == 69
    assert crawl_exit_status(["shutdown"], settings, [signal.SIGINT]) == 130
    assert crawl_exit_status([], settings) == OTHER  # the spider never closed: no reason
    assert crawl_exit_status(["finished"], settings, storage_error=True) == 74
    assert crawl_exit_status(["shutdown"], settings, storage_error=True) == 143


def test_the_deprecated_exit_code_still_sets_the_status_of_its_reasons() -> None:
    settings = Settings({"IDCRAWL_FAIL_EXIT_CODE": "3"})
    assert crawl_exit_status(["idcrawl_redis_unavailable"], settings) == 3
    assert crawl_exit_status(["idcrawl_redis_state_lost"], settings) == 3
    assert crawl_exit_status(["finished"], settings) == 0
    assert crawl_exit_status(["idcrawl_storage_error"], settings) == 74  # not listed: the table's
    settings = Settings({"IDCRAWL_FAIL_EXIT_CODE": 2, "IDCRAWL_FAIL_REASONS": "closespider_timeout, shutdown"})
    assert crawl_exit_status(["shutdown"], settings) == 2
    assert crawl_exit_status(["closespider_timeout"], settings) == 2
    assert crawl_exit_status(["idcrawl_redis_unavailable"], settings) == 69


def _doc_table() -> dict[str, str]:
    """finish reason (as written in the exit-status table of the docs) -> exit status cell."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Exit status"):]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0] or cells[1].startswith("-") or cells[0] == "finish reason":
            continue
        for reason in re.findall(r"`([^`]+)`", cells[0]) if cells[0].startswith("`") else [cells[0]]:
            rows[reason] = cells[1]
    return rows


def test_the_docs_exit_status_table_is_the_codes() -> None:
    rows = _doc_table()
    for reason in NORMAL_REASONS:
        assert rows[reason] == "0", reason
    for prefix in NORMAL_PREFIXES:
        assert rows[f"{prefix}<rule>"] == "0"
    for reason, status in EXIT_STATUSES.items():
        if reason == "shutdown":
            assert rows[reason].startswith(f"{128 + signal.SIGINT}") and str(status) in rows[reason]
        else:
            assert rows[reason] == str(status), reason
    assert rows["anything else"] == str(OTHER)
    assert rows["the crawl did not start"] == str(DID_NOT_START)
    assert set(rows) == {*NORMAL_REASONS, *EXIT_STATUSES, *(f"{p}<rule>" for p in NORMAL_PREFIXES),
                         "anything else", "the crawl did not start"}
