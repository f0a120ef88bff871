"""Issue 12: every bad input a new user hit gets one line, a non-zero exit, no request, nothing changed.

Settings (every IDCRAWL_* through one table), ids past 2**64-1, non-UTF-8 and oversized job files,
JOBDIR and state paths under a regular file, the distributed extra missing, and a big job that
still stops when asked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from idcrawl.demo.site import DemoModel
from tests.support.crawl import CrawlResult, crawl_command, read_items, run_crawl
from tests.support.states import scrapy_many, snapshot

MAX_ID = 2**64 - 1
#: A folder that shadows the installed redis with a module that fails to import (the extra missing).
NO_REDIS = "import redis: ModuleNotFoundError"


def _without_redis(tmp_path: Path) -> str:
    stub = tmp_path / "no-redis" / "redis"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'redis'\", name='redis')\n")
    return str(stub.parent)


def _crawl(workdir: Path, args: dict, settings: dict | None = None, *, pythonpath: str | None = None) -> CrawlResult:
    if pythonpath is None:
        return run_crawl(workdir, args, settings)
    command, env = crawl_command(workdir, args, settings)
    env["PYTHONPATH"] = os.pathsep.join([pythonpath, env["PYTHONPATH"]])
    proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=180, check=False)
    return CrawlResult(proc.returncode, proc.stderr, read_items(workdir / "items.jsonl"))


def _assert_refused(result: CrawlResult, message: str) -> None:
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert message in errors[0], errors[0]
    assert "Traceback" not in result.stderr
    assert "Task exception was never retrieved" not in result.stderr


SITE = "{site}"  # the live site's template

# (spider arguments, settings, the message of the one ERROR line)
CASES = [
    # item 3: settings, through the one table of idcrawl.core.setting_specs
    ({}, {"IDCRAWL_WINDOW": "abc"}, "bad setting: IDCRAWL_WINDOW='abc': must be an integer >= 1"),
    ({}, {"IDCRAWL_POLITENESS_FACTOR": "abc"}, "bad setting: IDCRAWL_POLITENESS_FACTOR='abc': must be a finite number"),
    ({}, {"IDCRAWL_STATE_COMMIT_ITEMS": "0"}, "bad setting: IDCRAWL_STATE_COMMIT_ITEMS='0': must be an integer in 1.."),
    ({}, {"IDCRAWL_DISTRIBUTED": "abc"}, "bad setting: IDCRAWL_DISTRIBUTED='abc': must be True or False"),
    ({}, {"IDCRAWL_MISSING_STATUSES": "404,x"}, "bad setting: IDCRAWL_MISSING_STATUSES='404,x': must be a list"),
    # item 2: ids past the largest id the state can hold, negative ids, format specs
    ({"start": 2**64}, {}, f"start='{2**64}': is above the largest id idcrawl can store (2**64-1 = {MAX_ID})"),
    ({"start": 10**30}, {}, f"start='{10**30}': is above the largest id idcrawl can store"),
    ({"start": 1, "max": 2**64}, {}, f"max='{2**64}': is above the largest id idcrawl can store"),
    ({"min": 2**64, "direction": "desc", "max": 2**65}, {}, f"min='{2**64}': is above the largest id"),
    ({"start": -1}, {}, "start='-1': must be an integer >= 0"),
    ({"start": 5, "url": "http://127.0.0.1:{port}/notice/{{id:c}}"}, {}, "has a bad format spec for an integer id"),
    ({"start": 5, "url": "http://127.0.0.1:{port}/notice/{{id:99999d}}"}, {}, "has a format spec wider than 1000"),
    # URLs that parsed as templates but broke later (urlsplit, the scheduler's loop, every request)
    ({"start": 5, "url": "http://[::1/{{id}}"}, {}, "url='http://[::1/{id}': is not a valid URL (Invalid IPv6 URL)"),
    ({"start": 5, "url": "http://127.0.0.1:99999/{{id}}"}, {}, "is not a valid URL (Port out of range 0-65535)"),
    ({"start": 5, "url": "http://ex ample.com/{{id}}"}, {}, "has spaces or control characters in its host"),
    ({"start": 5, "url": "http://" + "a" * 64 + ".example/{{id}}"}, {}, "has an invalid host name"),
]


@pytest.mark.parametrize(("args", "settings", "message"), CASES, ids=[c[2][:50] for c in CASES])
def test_bad_input_is_one_line_no_request_nothing_saved(make_site, tmp_path: Path, args, settings, message) -> None:
    site = make_site()
    args = {"url": site.url(), **{k: str(v).format(port=site.port) for k, v in args.items()}}
    if "start" not in args and "min" not in args:
        args["start"] = 10_000
    before = snapshot(tmp_path)
    result = run_crawl(tmp_path, args, settings)
    _assert_refused(result, message)
    assert site.log == []
    assert snapshot(tmp_path) == before  # no state file, no feed, nothing


def test_an_asc_lane_without_max_stops_at_the_largest_id(make_site, tmp_path: Path) -> None:
    # every id exists: without the implicit bound the lane would walk past 2**64-1 into OverflowError
    site = make_site(DemoModel(low=0, high=2**65, gap_percent=0))
    result = run_crawl(tmp_path, {"url": site.url(), "start": MAX_ID - 4})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and result.error_lines() == []
    assert result.ids == list(range(MAX_ID - 4, MAX_ID + 1))
    assert max(site.ids()) == MAX_ID
    assert result.stats["idcrawl/lanes/127.0.0.1:asc/cut_reason"] == "bound"


def test_a_non_utf8_job_file_is_one_line(make_site, tmp_path: Path) -> None:
    site = make_site()
    job = tmp_path / "job.toml"
    job.write_bytes(f"[[targets]]\nname = 'caf\xe9'\nurl = '{site.url()}'\nstart = 1\n".encode("latin-1"))
    before = snapshot(tmp_path)
    result = run_crawl(tmp_path, {"job": job})
    _assert_refused(result, f"job={str(job)!r}: is not UTF-8 text (byte 0xe9 on line 2)")
    assert site.log == [] and snapshot(tmp_path) == before
    plan, folder = scrapy_many(tmp_path, ["idplan", "--job", str(job)], ["idplan", "--state", str(tmp_path)])
    assert (plan.returncode, plan.stderr.splitlines()) == (
        1, [f"idplan: error: job={str(job)!r}: is not UTF-8 text (byte 0xe9 on line 2)"])
    assert (folder.returncode, folder.stderr.splitlines()) == (
        1, [f"idplan: error: state file {str(tmp_path)!r}: is a folder, not a state file"])


def test_a_job_file_that_is_a_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "job.toml").mkdir()
    result = run_crawl(tmp_path, {"job": tmp_path / "job.toml"})
    _assert_refused(result, "job.toml': is a folder, not a TOML file")


def test_a_job_above_max_targets_is_refused_before_parsing(make_site, tmp_path: Path) -> None:
    site = make_site()
    job = tmp_path / "job.toml"
    job.write_text("".join(f"[[targets]]\nname = 't{i}'\nurl = '{site.url()}'\nstart = {i}\n" for i in range(4)))
    result = run_crawl(tmp_path, {"job": job}, {"IDCRAWL_MAX_TARGETS": 3})
    _assert_refused(result, "targets: has 4 targets, more than IDCRAWL_MAX_TARGETS=3")
    assert site.log == []


def test_paths_under_a_regular_file_are_one_line(make_site, tmp_path: Path) -> None:
    site = make_site()
    (tmp_path / "afile").write_text("a regular file\n")
    (tmp_path / "state.sqlite").write_bytes(b"not a database, just bytes " * 100)
    (tmp_path / "folder").mkdir()
    cases = [
        ({"JOBDIR": str(tmp_path / "afile" / "job")}, "JOBDIR='{d}/afile/job': is under '{d}/afile', which is a file"),
        ({"JOBDIR": str(tmp_path / "afile")}, "JOBDIR='{d}/afile': is a file, not a folder"),
        ({"IDCRAWL_STATE_PATH": str(tmp_path / "folder")}, "IDCRAWL_STATE_PATH='{d}/folder': is a directory; give a file path"),
        ({"IDCRAWL_STATE_PATH": str(tmp_path / "afile" / "s.sqlite")}, "is under '{d}/afile', which is a file"),
        ({"IDCRAWL_STATE_PATH": str(tmp_path / "state.sqlite")},
         "state file '{d}/state.sqlite': is not an idcrawl state file (corrupt or foreign)"),
        ({"IDCRAWL_DUPEFILTER_PATH": str(tmp_path / "folder")}, "IDCRAWL_DUPEFILTER_PATH='{d}/folder': is a directory; give a file path"),
    ]
    workdirs = [tmp_path / "work" / str(i) for i in range(len(cases))]
    for workdir in workdirs:
        workdir.mkdir(parents=True)
    before = snapshot(tmp_path)
    with ThreadPoolExecutor(3) as pool:  # independent crawls: each ~2 s, mostly Scrapy's start-up
        results = list(pool.map(lambda case: run_crawl(case[0], {"url": site.url(), "start": 10_000}, case[1]),
                                zip(workdirs, (settings for settings, _ in cases), strict=True)))
    for (_settings, message), result in zip(cases, results, strict=True):
        _assert_refused(result, message.format(d=tmp_path))
    assert snapshot(tmp_path) == before
    assert site.log == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"IDCRAWL_PROFILE": "distributed"},
         "bad setting: IDCRAWL_DISTRIBUTED=True (from IDCRAWL_PROFILE='distributed'): needs the 'distributed' extra "
         "(redis is not installed): pip install 'idcrawl[distributed]'"),
        ({"IDCRAWL_STATE_BACKEND": "redis"},
         "bad setting: IDCRAWL_STATE_BACKEND='redis': needs the 'distributed' extra (redis is not installed)"),
    ],
)
def test_the_distributed_extra_missing_is_one_line(make_site, tmp_path: Path, settings, message) -> None:
    site = make_site()
    stub = _without_redis(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = _crawl(workdir, {"url": site.url(), "start": 10_000}, settings, pythonpath=stub)
    _assert_refused(result, message)
    assert site.log == [] and snapshot(workdir) == {}


def test_a_redis_url_that_does_not_parse_is_one_line(make_site, tmp_path: Path) -> None:
    site = make_site()
    result = run_crawl(tmp_path, {"url": site.url(), "start": 10_000},
                       {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": "localhost:6379"})
    _assert_refused(result, "Redis at REDIS_URL='localhost:6379' is unreachable: Redis URL must specify one of")
    assert site.log == []


# -- item 4: a big job stops when asked --------------------------------------------------

BIG = 2_000  # targets; every lane walks on forever (every id exists), so only a stop ends the crawl


def _big_job(tmp_path: Path, url: str) -> Path:
    job = tmp_path / "big.toml"
    job.write_text("".join(f"[[targets]]\nname = 't{i}'\nurl = '{url}'\nstart = {i * 1_000_000}\n"
                           for i in range(BIG)))
    return job


def test_a_big_job_stops_on_closespider_timeout(make_site, tmp_path: Path) -> None:
    site = make_site(DemoModel(low=0, high=10**12, gap_percent=0))
    result = run_crawl(tmp_path, {"job": _big_job(tmp_path, site.url())}, {"CLOSESPIDER_TIMEOUT": 2}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "closespider_timeout"
    assert result.stats["idcrawl/lanes"] == BIG
    assert "Traceback" not in result.stderr


def test_a_big_job_stops_on_one_sigint(make_site, tmp_path: Path) -> None:
    started = threading.Event()
    site = make_site(DemoModel(low=0, high=10**12, gap_percent=0), on_request=lambda entry: started.set())
    command, env = crawl_command(tmp_path, {"job": _big_job(tmp_path, site.url())})
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert started.wait(120), "no request reached the site"
        proc.send_signal(signal.SIGINT)  # once, as a user's Ctrl-C
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT, stderr[-3000:]  # a shutdown's exit status (core/exits.py)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "shutdown"
    assert "Traceback" not in stderr


def test_a_refused_run_leaves_an_earlier_state_untouched(make_site, tmp_path: Path) -> None:
    site = make_site(DemoModel(low=0, high=30, gap_percent=0))
    settings = {"JOBDIR": str(tmp_path / "job")}
    first = run_crawl(tmp_path, {"url": site.url(), "start": 0}, settings)
    assert first.returncode == 0 and len(first.items) == 31, first.stderr[-3000:]
    (tmp_path / "items.jsonl").unlink()
    (tmp_path / "stats.json").unlink()
    jobdir = tmp_path / "job"
    before = snapshot(jobdir)
    mtimes = {p: p.stat().st_mtime_ns for p in jobdir.rglob("*")}
    requests = len(site.log)
    for args, extra, message in [
        ({"start": 0, "resume": "bound"}, {"IDCRAWL_WINDOW": "abc"}, "IDCRAWL_WINDOW='abc'"),
        ({"start": 2**64, "resume": "bound"}, {}, f"start='{2**64}'"),
        ({"start": 0, "resume": "bound"}, {"IDCRAWL_STATE_COMMIT_ITEMS": "0"}, "IDCRAWL_STATE_COMMIT_ITEMS='0'"),
    ]:
        result = run_crawl(tmp_path, {"url": site.url(), **args}, {**settings, **extra})
        _assert_refused(result, message)
    assert len(site.log) == requests
    assert snapshot(jobdir) == before
    assert {p: p.stat().st_mtime_ns for p in jobdir.rglob("*")} == mtimes


def test_a_job_file_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "job.toml"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    result = run_crawl(tmp_path, {"job": fifo}, timeout=120)
    _assert_refused(result, f"job={str(fifo)!r}: is not a regular file")


@pytest.mark.parametrize(
    ("path", "message"),
    [("/dev/zero", "job='/dev/zero': is not a regular file"), ("a\x00b", "job='a\\x00b': is not a valid file path")],
)
def test_job_paths_that_never_end_or_cannot_exist(path: str, message: str) -> None:
    from idcrawl.core.inputs import TargetError
    from idcrawl.core.jobfile import parse_job

    with pytest.raises(TargetError) as info:
        parse_job(path, max_targets=10)
    assert str(info.value) == message


def test_the_addon_refuses_a_bad_setting_for_any_spider(make_site, tmp_path: Path) -> None:
    site = make_site()
    spider = tmp_path / "plain.py"
    spider.write_text("import scrapy\n\nclass Plain(scrapy.Spider):\n    name = 'plain'\n"
                      f"    start_urls = [{site.url().format(id=10_000)!r}]\n")
    result = run_crawl(tmp_path, settings={"IDCRAWL_POLITENESS_FACTOR": "abc"}, runspider=spider)
    _assert_refused(result, "bad setting: IDCRAWL_POLITENESS_FACTOR='abc': must be a finite number >= 0")
    assert site.log == []
