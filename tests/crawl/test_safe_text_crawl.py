"""Issue 27: names are printable and bounded, site and state text is escaped, passwords are masked.

A name that could forge a log line or send terminal escapes is refused in one line wherever it
arrives (``-a name=``, a job file; ``idjob push`` is in tests/integration/test_secrets_redis.py); a
name an older idcrawl let into a state file is shown escaped by every command; text a site sends
(a redirect's host, a meta refresh, a ``Retry-After``) never reaches the log raw.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.states import HOSTILE_NAME, TEMPLATE_SECRET, scrapy_many, snapshot, write_hostile_state

FORGED = "t\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)"
#: Raw characters that must never reach a log line or a terminal.
RAW = ("\x1b", "\x07", "\x00", "\ufffe")

BAD_NAMES = {
    "line break": (FORGED, "line break or a control character"),
    "ESC": ("t\x1b[2J", "line break or a control character"),
    "BEL": ("bell\x07", "line break or a control character"),
    "too long": ("x" * 201, "is 201 characters long (at most 200)"),
}


def assert_refused_in_one_line(stderr: str, reason: str) -> None:
    errors = [line for line in stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, stderr[-3000:]
    assert "name=" in errors[0] and reason in errors[0], errors[0]
    assert "Traceback" not in stderr and "Spider closed (finished)" not in stderr.replace(errors[0], "")
    assert not any(char in stderr for char in RAW), stderr[-3000:]


@pytest.mark.parametrize("kind", BAD_NAMES)
def test_a_name_that_is_not_one_printable_bounded_line_is_refused_from_the_command_line(
    make_site, tmp_path: Path, kind: str
) -> None:
    name, reason = BAD_NAMES[kind]
    site = make_site(GapModel(0, 50, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "name": name})
    assert result.returncode != 0
    assert_refused_in_one_line(result.stderr, reason)
    assert site.log == []


def test_a_name_passed_as_scrapyd_passes_it_is_refused_too(make_site, tmp_path: Path) -> None:
    """scrapyd's ``schedule.json -d target_name=...`` arrives as ``-a target_name=...``."""
    site = make_site(GapModel(0, 50, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "target_name": FORGED})
    assert result.returncode != 0
    assert_refused_in_one_line(result.stderr, "line break or a control character")
    assert site.log == []


def test_a_name_with_a_line_break_is_refused_from_a_job_file(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 50, set()))
    job = tmp_path / "job.toml"
    job.write_text(f'[[targets]]\nname = {json.dumps(FORGED)}\nurl = "{site.url()}"\nstart = 1\nmax = 5\n')
    result = run_crawl(tmp_path, {"job": job})
    assert result.returncode != 0
    assert_refused_in_one_line(result.stderr, "line break or a control character")
    assert "targets[0]: name='t\\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)'" \
        in result.stderr
    assert site.log == []


def test_a_name_an_older_state_file_holds_is_shown_escaped_by_every_command(tmp_path: Path) -> None:
    state = write_hostile_state(tmp_path / "old.sqlite")
    before = snapshot(tmp_path)
    runs = scrapy_many(
        tmp_path,
        ["idplan", "--state", str(state)],
        ["idplan", "--state", str(state), "--json"],
        ["iddue", "--state", str(state), "--at", "2026-11-27T00:00:00Z"],
        ["iddue", "--state", str(state), "--json", "--at", "2026-11-27T00:00:00Z"],
        ["idcoverage", "--state", str(state), "-o", str(tmp_path / "cov.svg")],
        ["idcoverage", "--state", str(state), "-o", str(tmp_path / "cov.html")],
    )
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
        # --json: only the first line naming the state, on stderr
        assert run.stderr in ("", *(f"{c}: reading state file {str(state)!r}\n" for c in ("idplan", "iddue")))
        assert not any(char in run.stdout for char in RAW), run.stdout
        assert TEMPLATE_SECRET not in run.stdout
    plan, plan_json, due, due_json = (run.stdout for run in runs[:4])
    escaped = "evil\\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)\\x1b[2J\\x07\\ufffe"
    assert escaped in plan.replace("\n", "")  # rich may wrap the heading; the name itself holds no line break
    assert "Spider closed (finished)" not in plan.split(escaped[:40])[0]
    assert "https://user:***@reg.example/n/{id}" in plan and "cut" in plan
    assert "margin\\x1b[31m" in plan.replace("\n", "") and "finished\\x1b[2J" in plan
    assert "\nevil" not in due.replace("evil\\n", "")  # the table's cell shows the escape, not a line break
    document = json.loads(plan_json)
    (target,) = document["targets"]
    assert target["name"] == HOSTILE_NAME  # JSON escapes it; scripts get the name as stored
    assert target["params"]["url"] == "https://user:***@reg.example/n/{id}"
    assert json.loads(due_json)["targets"][0]["name"] == HOSTILE_NAME
    for page in ("cov.svg", "cov.html"):
        data = (tmp_path / page).read_bytes()
        assert TEMPLATE_SECRET.encode() not in data
        tree = etree.fromstring(data.split(b"\n", 1)[1] if page.endswith("html") else data)
        texts = " ".join(tree.itertext())
        assert escaped in texts and "https://user:***@reg.example/n/{id}" in texts
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("cov.")} == before  # the state is only read


class HostileSite(GapModel):
    """Site text with terminal escapes: a redirect to a host holding ESC and BEL, a meta refresh to
    one, a Retry-After holding them."""

    ESC = "\x1bc\x07"  # RIS (reset the terminal) and a bell

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ == 105:
            return Reply(302, b"", (("Location", f"http://evil{self.ESC}.invalid/n/105"),))
        if id_ == 106 and nth == 1:
            return Reply(503, b"busy", (("Retry-After", f"soon{self.ESC}"),))
        if id_ == 107:
            body = f"<html><head><meta http-equiv='refresh' content='0; url=http://x{self.ESC}.invalid/'></head></html>"
            return Reply(200, body.encode(), (("Content-Type", "text/html"),))
        return super().reply(id_, host, nth)


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_text_a_site_sends_never_reaches_the_log_raw(make_site, tmp_path: Path, level: str) -> None:
    site = make_site(HostileSite(100, 110, set()))
    log_file = tmp_path / "crawl.log"
    # follow_redirects=any: the redirect to the hostile host is followed, and its failure logged
    result = run_crawl(tmp_path, {"url": site.url(), "start": 100, "margin": 3, "attempts": 2, "cooldown": 0.1,
                                  "follow_redirects": "any"},
                       {"LOG_LEVEL": level, "LOG_FILE": str(log_file)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert {105, 106, 107} <= set(site.ids())
    text = log_file.read_text(encoding="utf-8") + result.stderr
    assert "Spider closed (finished)" in text
    raw = [line for line in text.splitlines() if any(char in line for char in RAW)]
    assert raw == []
    assert "\\x1bc\\x07" in text  # shown, escaped
