"""Issue 27: the Redis password never shown, wherever a fleet or a command writes.

A fleet of two workers and every command run against a redis-server with ``requirepass``: with the
right password (Redis restarted mid-crawl, so each worker logs that Redis does not answer), with a
wrong one, and with a TLS ``rediss://`` URL against the plain server. Everything written is read
back: the processes' stdout and stderr and every file under the test's directory (feeds, stats
dumps, log files, incident logs, coverage pages); the password is in none of them. ``idjob push``
refuses a name that is not one printable line, in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import KILL_GAPS, SlowModel, finish, start_worker, worker_settings
from tests.support.crawl import REPO, run_crawl
from tests.support.redis_server import RedisServer, require_redis_server

redis = pytest.importorskip("redis")

SECRET = "S3cretRedisPw-7f2c"
WRONG = "Wr0ngRedisPw-91ab"
TEMPLATE_SECRET = "tplS3cret-5d1e"  # a template's password (shown only masked; its items keep the URL)


@pytest.fixture
def locked_redis():
    """A redis-server with ``requirepass SECRET`` and an append-only file (a restart keeps the job)."""
    require_redis_server()
    server = RedisServer(persistent=True, password=SECRET).start()
    try:
        yield server
    finally:
        server.stop()


def command(workdir: Path, args: list[str], settings: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    line = [sys.executable, "-m", "scrapy", *args]
    for key, value in settings.items():
        line += ["-s", f"{key}={json.dumps(value) if isinstance(value, bool | dict) else value}"]
    env = {"SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
           "COLUMNS": "120"}
    return subprocess.run(line, cwd=workdir, env=env, capture_output=True, text=True, timeout=120, check=False)


def every_command(workdir: Path, settings: dict[str, Any]) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each reading command (and an ``idjob push``), at once; ``idjob clean`` is left to the caller."""
    pushed = workdir / "push.json"
    pushed.write_text(json.dumps({"name": "pushed", "url": f"http://u:{TEMPLATE_SECRET}@127.0.0.1:1/n/{{id}}",
                                  "start": 1, "max": 3}))
    commands = {
        "idjob status": ["idjob", "status"],
        "idjob status --json": ["idjob", "status", "--json"],
        "idjob incidents": ["idjob", "incidents", "-o", str(workdir / "incidents.xml")],
        "idjob push": ["idjob", "push", str(pushed)],
        "idplan": ["idplan"],
        "idplan --json": ["idplan", "--json"],
        "idcoverage svg": ["idcoverage", "-o", str(workdir / "coverage.svg")],
        "idcoverage html": ["idcoverage", "-o", str(workdir / "coverage.html")],
        "iddue": ["iddue"],
        "iddue --json": ["iddue", "--json"],
    }
    with ThreadPoolExecutor(4) as pool:
        runs = pool.map(lambda args: command(workdir, args, settings), commands.values())
        return dict(zip(commands, runs, strict=True))


def shown_where(secret: str, directory: Path, *texts: str) -> list[str]:
    """Where ``secret`` was written: the indexes of ``texts`` and the files under ``directory`` holding it."""
    hits = [f"output {index}" for index, text in enumerate(texts) if secret in text]
    hits += [str(path) for path in sorted(directory.rglob("*")) if path.is_file() and secret.encode() in path.read_bytes()]
    return hits


def test_a_fleet_and_every_command_never_show_the_password(make_site, locked_redis, tmp_path: Path) -> None:
    model = SlowModel(900, 1400, KILL_GAPS)
    site = make_site(model)
    job = tmp_path / "job.toml"
    job.write_text(f'[[targets]]\nname = "reg"\nurl = "{site.url()}"\nstart = 1000\ndirection = "both"\nmargin = 5\n'
                   f'[[targets]]\nname = "tpl"\nurl = "{site.url().replace("http://", f"http://u:{TEMPLATE_SECRET}@")}"\n'
                   'start = 1\nmax = 3\nmargin = 0\n')
    settings = worker_settings(locked_redis, job="secret", IDCRAWL_REDIS_LEASE_TIMEOUT=20, IDCRAWL_LIMIT_TTMAX=400,
                               IDCRAWL_INCIDENT_RULES="TTmax,errors", LOG_FILE="crawl.log")
    assert SECRET in settings["REDIS_URL"]
    workers = [start_worker(tmp_path / f"w{n}", {"job": job}, {**settings, "USER_AGENT": f"w{n}"}) for n in range(2)]
    deadline = time.monotonic() + 60
    while (len(site.ids()) < 60 or not {"w0", "w1"} <= model.agents) and time.monotonic() < deadline:
        time.sleep(0.005)  # both workers crawling: each sees Redis go away
    locked_redis.restart(downtime=1.0)
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(workers)]
    logs = [(tmp_path / f"w{n}" / "crawl.log").read_text() for n in range(2)]
    for result, log in zip(results, logs, strict=True):
        assert result.returncode == 0, log[-3000:]
        assert result.stats["finish_reason"] == "finished"
        warnings = [line for line in log.splitlines() if "does not answer" in line]
        assert warnings, log[-3000:]  # the blip was seen, and said where Redis is: masked
        assert all(f"REDIS_URL='redis://:***@127.0.0.1:{locked_redis.port}/0'" in line for line in warnings)
    assert {i["target"] for r in results for i in r.items} == {"reg"}  # Scrapy cannot fetch a URL with userinfo

    cli = {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": locked_redis.url, "IDCRAWL_REDIS_JOB": "secret"}
    runs = every_command(tmp_path, cli)
    for name, run in runs.items():
        assert run.returncode == 0, f"{name}: {run.stderr[-3000:]}"
    assert "redis://:***@127.0.0.1" in runs["idplan --json"].stdout  # the state's place, masked
    assert "u:***@127.0.0.1" in runs["idjob push"].stdout
    assert (tmp_path / "incidents.xml").exists() and (tmp_path / "coverage.html").exists()
    clean = command(tmp_path, ["idjob", "clean", "--force"], cli)
    assert clean.returncode == 0, clean.stderr
    outputs = [*(r.stderr for r in results), *(t for r in runs.values() for t in (r.stdout, r.stderr)),
               clean.stdout, clean.stderr]
    assert shown_where(SECRET, tmp_path, *outputs) == []
    # a template's password: masked in every line and page; only the items keep their URL as fetched
    feeds = {tmp_path / f"w{n}" / "items.jsonl" for n in range(2)}
    assert [hit for hit in shown_where(TEMPLATE_SECRET, tmp_path, *outputs)
            if Path(hit) not in feeds and not hit.endswith(("push.json", "job.toml"))] == []


URLS = {
    "wrong password": lambda server: f"redis://:{WRONG}@127.0.0.1:{server.port}/0",
    "TLS against a plain server": lambda server: f"rediss://:{SECRET}@127.0.0.1:{server.port}/0",
}


@pytest.mark.parametrize("case", URLS)
def test_a_refused_connection_is_one_line_without_the_password(
    make_site, locked_redis, tmp_path: Path, case: str
) -> None:
    url = URLS[case](locked_redis)
    secret = WRONG if case == "wrong password" else SECRET
    params = {"socket_timeout": 2, "socket_connect_timeout": 2}  # a TLS handshake the server never answers
    site = make_site(GapModel(0, 50, set()))
    worker = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5},
                       {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": url, "REDIS_PARAMS": params, "LOG_FILE": "crawl.log"})
    log = (tmp_path / "crawl.log").read_text()
    assert worker.returncode != 0
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, log[-3000:]
    scheme = url.split("://")[0]
    assert f"Redis at REDIS_URL='{scheme}://:***@127.0.0.1:{locked_redis.port}/0' is unreachable" in errors[0]
    assert site.log == []
    cli = {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": url, "REDIS_PARAMS": params}
    runs = every_command(tmp_path, cli)
    runs["idjob clean"] = command(tmp_path, ["idjob", "clean", "--force"], cli)
    for name, run in runs.items():
        assert run.returncode != 0, name
        assert run.stderr.splitlines() == [run.stderr.strip()], f"{name}: {run.stderr}"
        assert f"'{scheme}://:***@127.0.0.1:{locked_redis.port}/0' is unreachable" in run.stderr, f"{name}: {run.stderr}"
    outputs = [worker.stderr, *(t for r in runs.values() for t in (r.stdout, r.stderr))]
    assert shown_where(secret, tmp_path, *outputs) == []


def test_idjob_push_refuses_a_name_that_is_not_one_printable_line(locked_redis, tmp_path: Path) -> None:
    pushed = tmp_path / "push.json"
    pushed.write_text(json.dumps({"name": "t\n2026-01-01 00:00:00 [x] INFO: forged\u001b[2J",
                                  "url": "http://127.0.0.1:1/n/{id}", "start": 1}))
    cli = {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": locked_redis.url, "IDCRAWL_REDIS_JOB": "push"}
    run = command(tmp_path, ["idjob", "push", str(pushed)], cli)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"idjob: error: {pushed}: name='t\\n2026-01-01 00:00:00 [x] INFO: forged\\x1b[2J': holds a line break or a "
        "control character (a name is printable text on one line)"
    ]
    assert redis.Redis.from_url(locked_redis.url).llen("idcrawl:{push}:feed") == 0
