"""``scrapy idjob`` and ``scrapy idplan`` on a distributed job; incidents of every worker in one XML log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from idcrawl.extensions.incidents import schema
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.support.crawl import REPO, run_crawl
from tests.support.reference import lane_truth

redis = pytest.importorskip("redis")

GAPS = {105, 106, 107, 108, 95, 94, 93}


def scrapy(workdir: Path, *args: str, settings: dict[str, Any], stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy", *args]
    for key, value in settings.items():
        command += ["-s", f"{key}={json.dumps(value) if isinstance(value, bool) else value}"]
    env = {"SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=120, input=stdin,
                          check=False)


def redis_settings(redis_server, job: str) -> dict[str, Any]:
    return {"IDCRAWL_DISTRIBUTED": True, **redis_server.settings, "IDCRAWL_REDIS_JOB": job}


def test_idplan_and_idjob_status_read_a_distributed_job(make_site, redis_server, tmp_path: Path) -> None:
    model = GapModel(0, 300, GAPS)
    site = make_site(model)
    args = {"url": site.url(), "start": 100, "direction": "both", "margin": 3, "name": "reg"}
    result = run_crawl(tmp_path, args, worker_settings(redis_server, job="plan"))
    assert result.returncode == 0, result.stderr[-3000:]
    plan = scrapy(tmp_path, "idplan", "--json", settings=redis_settings(redis_server, "plan"))
    assert plan.returncode == 0, plan.stderr
    document = json.loads(plan.stdout)
    assert "idcrawl:{plan}:" in document["state"]
    (target,) = document["targets"]
    lanes = {lane["key"]: lane for lane in target["lanes"]}
    asc_found, asc_cut = lane_truth(model.exists, 100, 1, None, 3)
    assert lanes["reg:asc"]["cut_at"] == asc_cut == 107
    assert lanes["reg:asc"]["cut_reason"] == "margin"
    assert lanes["reg:asc"]["content"]["count"] == len(asc_found)
    assert lanes["reg:desc"]["cut_at"] == 93
    status = scrapy(tmp_path, "idjob", "status", "--json", settings=redis_settings(redis_server, "plan"))
    assert status.returncode == 0, status.stderr
    job = json.loads(status.stdout)
    assert job["finished"] is True
    assert {lane["key"]: lane["cut_at"] for lane in job["lanes"]} == {"reg:asc": 107, "reg:desc": 93}
    assert job["workers"] == []  # the worker left when it closed
    text = scrapy(tmp_path, "idjob", "status", settings=redis_settings(redis_server, "plan"))
    assert "reg:asc: cut at 107 (margin)" in text.stdout
    assert text.stdout.splitlines()[1] == "job 'plan' (keys idcrawl:{plan}:): finished"  # its name, then its keys
    assert job["name"] == "plan"
    plan_text = scrapy(tmp_path, "idplan", settings=redis_settings(redis_server, "plan"))
    assert plan_text.returncode == 0, plan_text.stderr
    assert "last run: none recorded" not in plan_text.stdout and "last run: #1 " in plan_text.stdout, plan_text.stdout


def test_idjob_push_validates_then_feeds_and_clean_deletes_the_job(redis_server, tmp_path: Path) -> None:
    settings = redis_settings(redis_server, "pushclean")
    client = redis.Redis.from_url(redis_server.url)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "url": "http://h/n/{id}", "start": 1, "margn": 3}))
    refused = scrapy(tmp_path, "idjob", "push", str(bad), settings=settings)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"idjob: error: {bad}: margn=3: unknown key (known: " + refused.stderr.split("(known: ", 1)[1].strip()
    ]
    assert client.llen("idcrawl:{pushclean}:feed") == 0
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"name": "x", "url": "http://h/n/{id}", "start": 1}]))
    pushed = scrapy(tmp_path, "idjob", "push", str(good), settings=settings)
    assert pushed.returncode == 0, pushed.stderr
    assert client.llen("idcrawl:{pushclean}:feed") == 1
    # a live worker: its heartbeat an hour ahead, so that it is still alive however late the command starts
    # (stamped "now", it once looked dead to a command that started past the lease at load 15)
    client.zadd("idcrawl:{pushclean}:workers", {"w": (int(client.time()[0]) + 3600) * 1000})
    client.set("other:{job}:keep", 1)
    kept = scrapy(tmp_path, "idjob", "clean", settings=settings)
    assert kept.returncode == 1 and "1 worker(s)" in kept.stderr
    cleaned = scrapy(tmp_path, "idjob", "clean", "--force", settings=settings)
    assert cleaned.returncode == 0, cleaned.stderr
    assert client.keys("idcrawl:{pushclean}:*") == []
    assert client.get("other:{job}:keep") == b"1"


def test_limits_are_shared_by_the_fleet_and_incidents_end_up_in_one_valid_xml_log(
    make_site, redis_server, tmp_path: Path
) -> None:
    site = make_site(GapModel(0, 10_000, set()))
    job = tmp_path / "job.toml"
    job.write_text(f"""
[[targets]]
name = "a"
url = "{site.url()}"
start = 1000
max = 1400
margin = 0
""")
    settings = worker_settings(redis_server, job="inc", IDCRAWL_LIMIT_TTMAX=30, IDCRAWL_INCIDENT_RULES="TTmax,errors")
    first = finish(start_worker(tmp_path / "w0", {"job": job}, settings), tmp_path / "w0")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["idcrawl/lanes/a:asc/cut_reason"] == "limit:TTmax"
    assert 30 <= first.stats["idcrawl/dispensed"] <= 34
    # a worker that joins later sees the fleet's stop: it takes nothing, and writes no second incident
    second = finish(start_worker(tmp_path / "w1", {"job": job}, settings), tmp_path / "w1")
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats.get("idcrawl/dispensed", 0) == 0
    assert second.stats["idcrawl/lanes/a:asc/cut_reason"] == "limit:TTmax"
    client = redis.Redis.from_url(redis_server.url)
    assert client.hget("idcrawl:{inc}:limits:domain:127.0.0.1", "stopped") == b"TTmax"
    assert client.llen("idcrawl:{inc}:incidents") == 1
    out = tmp_path / "incidents.xml"
    drained = scrapy(tmp_path, "idjob", "incidents", "-o", str(out), settings=redis_settings(redis_server, "inc"))
    assert drained.returncode == 0, drained.stderr
    assert client.llen("idcrawl:{inc}:incidents") == 0
    tree = etree.parse(str(out))
    schema().assertValid(tree)
    assert [i.findtext("rule") for i in tree.getroot()] == ["TTmax"]


def test_the_commands_apply_the_distributed_profile_and_name_what_they_read(
    make_site, redis_server, tmp_path: Path
) -> None:
    from tests.support.states import write_known_state

    site = make_site(GapModel(0, 300, GAPS))
    args = {"url": site.url(), "start": 100, "margin": 3, "name": "fleet"}
    result = run_crawl(tmp_path, args, worker_settings(redis_server, job="prof"))
    assert result.returncode == 0, result.stderr[-3000:]
    write_known_state(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite")  # the cwd's default: other targets
    # as documented: the profile, no IDCRAWL_DISTRIBUTED
    profiled = {"IDCRAWL_PROFILE": "distributed", "IDCRAWL_REDIS_JOB": "prof", **redis_server.settings}
    named = f"reading Redis job 'idcrawl:{{prof}}:' at {redis_server.url}"
    plan = scrapy(tmp_path, "idplan", "--json", settings=profiled)
    assert plan.returncode == 0, plan.stderr
    assert [t["name"] for t in json.loads(plan.stdout)["targets"]] == ["fleet"]
    assert plan.stderr.splitlines() == [f"idplan: {named}"]  # --json: stdout stays JSON
    text = scrapy(tmp_path, "idplan", settings=profiled)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == f"idplan: {named}"
    assert "fleet:asc" in text.stdout and "seed" not in text.stdout
    due = scrapy(tmp_path, "iddue", "--json", settings=profiled)
    assert due.returncode == 0, due.stderr
    assert [t["name"] for t in json.loads(due.stdout)["targets"]] == ["fleet"]
    assert due.stderr.splitlines() == [f"iddue: {named}"]
    svg = tmp_path / "map.svg"
    coverage = scrapy(tmp_path, "idcoverage", "-o", str(svg), settings=profiled)
    assert coverage.returncode == 0, coverage.stderr
    assert coverage.stdout.splitlines() == [f"idcoverage: {named}", f"wrote {svg} (1 target, 1 lane)"]
    status = scrapy(tmp_path, "idjob", "status", settings=profiled)
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[0] == f"idjob: {named}"
    # an explicit -s still beats the profile, as for a crawl: the local state file
    local = scrapy(tmp_path, "idplan", "--json",
                   settings={**profiled, "IDCRAWL_DISTRIBUTED": False, "IDCRAWL_STATE_BACKEND": "sqlite"})
    assert local.returncode == 0, local.stderr
    assert sorted(t["name"] for t in json.loads(local.stdout)["targets"]) == ["reg", "seed"]
    assert local.stderr.splitlines() == ["idplan: reading state file '.scrapy/idcrawl/idseq.sqlite'"]
