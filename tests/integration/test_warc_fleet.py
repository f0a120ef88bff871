"""WARC output of a fleet (issue 33): each worker writes its own files, and a due run's revisit records
refer to the captures other workers made (the page records in Redis keep each capture's URI and date)."""

from __future__ import annotations

import json
import random
import re
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from idcrawl.archive.middleware import NOT_MODIFIED
from tests.crawl.test_recrawl_pages_crawl import T0, ChangingModel
from tests.integration.test_distributed_due import fleet
from tests.integration.test_distributed_pages import DUE_AT, job_file, records
from tests.support.fleet_runs import wait_out_the_runs_grace
from tests.support.states import scrapy
from tests.support.warcs import read_warcs

redis = pytest.importorskip("redis")

NAME = re.compile(r"^due-\d{20}-[^-]+-(\d+)-\d{5}\.warc\.gz$")


def test_fleet_workers_write_their_own_files_and_revisits_refer_to_any_workers_capture(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = ChangingModel()
    site = make_site(model)
    job = job_file(tmp_path, site)
    warc = tmp_path / "warc"
    wait_out_the_runs_grace(redis_server, "due", 1)
    first = fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None, IDCRAWL_WARC_DIR=str(warc))
    assert sorted(item["id"] for r in first for item in r.items) == list(range(1, 101))
    names = sorted(p.name for p in warc.glob("*.warc.gz"))
    assert len(names) == 2 and all(NAME.match(n) for n in names), names
    assert len({NAME.match(n).group(1) for n in names}) == 2, "one file per worker process"
    captures = {}
    for record in read_warcs(warc):
        if record.type == "response" and record.status == 200 and "/robots.txt" not in record.uri:
            captures[record.uri] = record
    assert len(captures) == 100
    assert Counter(r.file for r in captures.values()).keys() == set(names), "both workers captured pages"
    for stored in records(redis_server).values():
        capture = captures[stored.capture_uri]
        assert (stored.capture_date, stored.capture_digest) == (capture.date, capture.headers["WARC-Payload-Digest"])

    # the fleet's state in Redis, read by idwacz through the settings profile as by idplan
    package = tmp_path / "fleet.wacz"
    run = scrapy(tmp_path, "idwacz", str(warc), "-o", str(package), "-s", "IDCRAWL_PROFILE=distributed",
                 "-s", f"REDIS_URL={redis_server.url}", "-s", "IDCRAWL_REDIS_JOB=due")
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip().splitlines()[-1] == f"idwacz: {package}: 2 WARC files, 100 pages"
    with zipfile.ZipFile(package) as wacz:
        listed = [json.loads(line) for line in wacz.read("pages/pages.jsonl").decode().splitlines()[1:]]
    assert sorted(page["url"] for page in listed) == sorted(captures)

    changed = sorted(random.Random(17).sample(range(1, 101), 10))  # seeded
    for id_ in changed:
        model.version[id_] += 1
    wait_out_the_runs_grace(redis_server, "due", 1)
    due = fleet(tmp_path, "due", redis_server, job, DUE_AT, workers=3, IDCRAWL_WARC_DIR=str(warc))
    assert sorted(item["id"] for r in due for item in r.items) == changed
    later = [r for r in read_warcs(warc) if r.file not in names]
    revisits = [r for r in later if r.type == "revisit"]
    assert len(revisits) == 90 and {r.headers["WARC-Profile"] for r in revisits} == {NOT_MODIFIED}
    for revisit in revisits:
        capture = captures[revisit.headers["WARC-Refers-To-Target-URI"]]
        assert revisit.headers["WARC-Refers-To-Date"] == capture.date and capture.file != revisit.file
    assert sum(r.stats.get("idcrawl/warc/revisit/not_modified", 0) for r in due) == 90
