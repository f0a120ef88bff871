"""What a real ``scrapy crawl idseq`` tells people at the project's default log level."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.reference import lane_truth

GAPS = {
    1152, 1160, 1161, 1170, 1171, 1172, 1180, 1181, 1182, 1183,  # asc from 1150: cut at 1183 with margin 4
    1140, 1130, 1131, 1132, 1120, 1121, 1122, 1123, 1124,  # desc from 1149: cut at 1121
}
#: the tests' base sets LOG_LEVEL=INFO and turns progress lines off: these tests keep the project's values
PROJECT = ("LOG_LEVEL", "IDCRAWL_PROGRESS_INTERVAL")
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[([\w.]+)\] (\w+): (.*)$")


class SlowModel(GapModel):
    """Every page takes 0.1 s: at concurrency 1, some 65 requests last over 6 s, past the first progress line."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, 0.1)


def log_lines(stderr: str) -> list[tuple[datetime, str, str, str]]:
    """(time, logger, level, message) of each log record's first line."""
    lines = []
    for text in stderr.splitlines():
        match = LINE.match(text)
        if match:
            at, name, level, message = match.groups()
            lines.append((datetime.strptime(at, "%Y-%m-%d %H:%M:%S"), name, level, message))
    return lines


def write_job(tmp_path: Path, up_url: str, down_url: str) -> Path:
    job = tmp_path / "job.toml"
    job.write_text(
        "[defaults]\nmargin = 4\n\n"
        f'[[targets]]\nname = "up"\nurl = "{up_url}"\nstart = 1150\n\n'
        f'[[targets]]\nname = "down"\nurl = "{down_url}"\nstart = 1149\ndirection = "desc"\n'
    )
    return job


def test_a_crawl_at_default_settings_logs_its_plan_progress_and_a_summary_per_target(
    make_site, tmp_path: Path
) -> None:
    up_site, down_site = make_site(SlowModel(1000, 1299, GAPS)), make_site(SlowModel(1000, 1299, GAPS))
    job = write_job(tmp_path, up_site.url(), down_site.url())
    result = run_crawl(tmp_path, {"job": job}, {"CONCURRENT_REQUESTS": 1}, project_defaults=PROJECT)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = log_lines(result.stderr)
    assert lines, result.stderr[-3000:]
    assert [m for _, _, level, m in lines if level == "DEBUG"] == []  # INFO is the project's level

    talk = [(at, m) for at, name, _, m in lines if name == "idcrawl.extensions.progress"]
    messages = [m for _, m in talk]
    state = (tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite").resolve()
    assert messages[0] == f"plan: 2 targets, 2 lanes; state {state}"
    assert messages[1] == f"plan up: {up_site.url()}, margin 4: asc 1150 -> no max"
    assert messages[2] == f"plan down: {down_site.url()}, margin 4: desc 1149 -> 0"

    opened = next(at for at, _, _, m in lines if m == "Spider opened")
    progress = [(at, m) for at, m in talk if m.startswith("progress up: ")]
    assert progress, messages
    assert (progress[0][0] - opened).total_seconds() <= 5  # whole seconds of the log's own timestamps
    assert any(m.startswith("progress down: ") for m in messages)
    assert not any("- ids/s" in m for m in messages)  # every rate is over real elapsed time

    exists = up_site.model.exists
    up_found, up_cut = lane_truth(exists, 1150, 1, None, 4)
    down_found, down_cut = lane_truth(exists, 1149, -1, None, 4)
    assert (up_cut, down_cut) == (1183, 1121)
    summaries = {m.split(":", 1)[0]: m for m in messages if m.startswith("summary")}
    assert len([m for m in messages if m.startswith("summary")]) == 3
    assert summaries["summary"].startswith("summary: finished after ")
    assert summaries["summary"].endswith(f"; state {state}")
    up, down = summaries["summary up"], summaries["summary down"]
    assert up.startswith(f"summary up: found {len(up_found)}, missing {1183 - 1150 + 1 - len(up_found)}, failed 0, ")
    assert f"; asc cut at 1183 after 4 misses (last found {up_found[-1]})" in up
    assert down.startswith(f"summary down: found {len(down_found)}, missing {1149 - 1121 + 1 - len(down_found)}, ")
    assert f"; desc cut at 1121 after 4 misses (last found {down_found[-1]})" in down
    assert sorted(i["id"] for i in result.items if i["target"] == "up") == up_found


def test_a_resumed_run_says_what_it_takes_from_the_state(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1000, 1299, GAPS))
    args = {"url": site.url(), "start": 1150, "margin": 4, "name": "up"}
    first = run_crawl(tmp_path, args, project_defaults=PROJECT)
    assert first.returncode == 0, first.stderr[-3000:]
    found = len(first.items)
    again = run_crawl(tmp_path, {**args, "resume": "bound"}, project_defaults=PROJECT)
    assert again.returncode == 0, again.stderr[-3000:]
    messages = [m for _, name, _, m in log_lines(again.stderr) if name == "idcrawl.extensions.progress"]
    state = (tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite").resolve()
    assert messages[0] == f"plan: 1 target, 1 lane, 1 resumed; state {state}"
    # the lane goes on just after the last found id (1179): new ids may have appeared at the tail
    assert messages[1] == (
        f"plan up: {site.url()}, margin 4: asc 1180 -> no max; "
        f"resumed (resume=bound): {found} found ids known, not fetched again"
    )
    over = run_crawl(tmp_path, {**args, "resume": "reset"}, project_defaults=PROJECT)
    assert over.returncode == 0, over.stderr[-3000:]
    assert "; resume=reset: its stored state was reset, starts over" in over.stderr


def test_state_off_is_said_in_the_plan(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1000, 1299, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1150, "max": 1155, "margin": 0},
                       {"IDCRAWL_STATE": False}, project_defaults=PROJECT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "plan: 1 target, 1 lane; state off" in result.stderr
    assert "asc reached max 1155" in result.stderr


def test_a_crawl_closed_early_says_where_each_lane_was_left(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(1000, 1299, GAPS))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1000, "max": 1299, "margin": 0, "name": "t"},
                       {"CLOSESPIDER_ITEMCOUNT": 5, "CONCURRENT_REQUESTS": 1}, project_defaults=PROJECT)
    assert result.returncode == 0, result.stderr[-3000:]
    [summary] = [m for _, _, _, m in log_lines(result.stderr) if m.startswith("summary t: ")]
    assert re.search(r"; asc closed early \(closespider_itemcount\) at 1\d\d\d$", summary), summary
    assert "summary: closespider_itemcount after " in result.stderr
