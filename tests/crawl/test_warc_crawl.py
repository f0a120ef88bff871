"""WARC output in real crawls (issue 33): request/response records as received, revisit records of a
recrawl (304 -> server-not-modified, same body -> identical-payload-digest) referring to the stored
capture, and a run killed mid-write whose cut last record the next run repairs.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from idcrawl.archive.middleware import IDENTICAL, NOT_MODIFIED
from idcrawl.state import SqliteStateStore
from tests.crawl.test_recrawl_pages_crawl import DAY, T0, ChangingModel, SlowChangingModel, at
from tests.support.crawl import run_crawl
from tests.support.warcs import read_warcs

ARGS = {"start": 1, "margin": 5, "name": "reg"}
NAME = re.compile(r"^idseq-\d{20}-[^-]+-\d+-\d{5}\.warc\.gz$")


def crawl(site, workdir: Path, now: float, output: str, **extra: object):
    settings = {"IDCRAWL_NOW": at(now), "IDCRAWL_WARC_DIR": str(workdir / "warc")}
    result = run_crawl(workdir, {**ARGS, "url": site.url(), **extra}, settings, output=output)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def pages(workdir: Path):
    return SqliteStateStore(workdir / ".scrapy" / "idcrawl" / "idseq.sqlite").load_pages("reg")


@pytest.mark.parametrize("validators", [True, False], ids=["validators", "checksums"])
def test_a_crawl_writes_its_fetches_and_a_recrawl_writes_revisits_of_the_stored_captures(
    make_site, tmp_path: Path, validators: bool
) -> None:
    model = ChangingModel(validators=validators)
    site = make_site(model)
    first = crawl(site, tmp_path, T0, "run1.jsonl")
    assert first.ids == list(range(1, 101))
    warc = tmp_path / "warc"
    files = sorted(p.name for p in warc.glob("*.warc.gz"))
    assert len(files) == 1 and NAME.match(files[0]), files
    assert (warc / (files[0] + ".cdxj")).stat().st_size > 0
    assert not list(warc.glob("*.open"))
    records = read_warcs(warc)
    assert records[0].type == "warcinfo" and b"isPartOf: idseq" in records[0].body
    responses = {r.uri: r for r in records if r.type == "response"}
    requests = [r for r in records if r.type == "request"]
    assert any(uri.endswith("/robots.txt") for uri in responses)  # robots.txt is archived too
    assert len(requests) == len(responses) == len(site.log)
    page7 = responses[{item["id"]: item["url"] for item in first.items}[7]]
    assert page7.status == 200 and page7.body == model.page(7)
    assert page7.headers["WARC-IP-Address"] == "127.0.0.1"
    # the page records keep the capture a revisit refers to
    stored = pages(tmp_path)
    assert stored[7].capture_uri == page7.uri and stored[7].capture_date == page7.date
    assert stored[7].capture_digest == page7.headers["WARC-Payload-Digest"]

    changed = sorted(random.Random(17).sample(range(1, 101), 10))  # seeded
    for id_ in changed:
        model.version[id_] += 1
    second = crawl(site, tmp_path, T0 + 2 * DAY, "run2.jsonl", resume="due")
    assert second.ids == changed
    later = [r for r in read_warcs(warc) if r.file not in files]
    revisits = [r for r in later if r.type == "revisit"]
    assert len(revisits) == 90
    profile = NOT_MODIFIED if validators else IDENTICAL
    assert {r.headers["WARC-Profile"] for r in revisits} == {profile}
    for revisit in revisits:
        first_capture = responses[revisit.uri]
        assert revisit.headers["WARC-Refers-To-Target-URI"] == first_capture.uri
        assert revisit.headers["WARC-Refers-To-Date"] == first_capture.date
        assert revisit.headers["WARC-Payload-Digest"] == first_capture.headers["WARC-Payload-Digest"]
        # a 304's revisit carries no HTTP block (a wayback would replay its status line as an empty 304)
        assert revisit.status == (None if validators else 200) and revisit.body == b""
    full = {r.uri for r in later if r.type == "response" and r.status == 200 and "/robots.txt" not in r.uri}
    assert len(full) == 10
    assert second.stats["idcrawl/warc/response"] >= 10 and second.stats["idcrawl/warc/revisit/"
                                                                        + ("not_modified" if validators
                                                                           else "identical")] == 90
    # a changed page's record now points at its new capture; an unchanged one's still at the first
    now = pages(tmp_path)
    new_dates = {r.uri: r.date for r in later if r.type == "response"}
    for id_, record in now.items():
        assert record.capture_date == (new_dates[record.capture_uri] if id_ in changed
                                       else responses[record.capture_uri].date)


def test_a_run_killed_mid_write_leaves_a_cut_record_the_next_run_repairs(make_site, tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    from tests.support.crawl import crawl_command

    model = SlowChangingModel()
    site = make_site(model)
    warc = tmp_path / "warc"
    command, env = crawl_command(tmp_path, {**ARGS, "url": site.url()},
                                 {"IDCRAWL_NOW": at(T0), "IDCRAWL_WARC_DIR": str(warc),
                                  "IDCRAWL_STATE_COMMIT_ITEMS": 5},
                                 spider="idseq", output="run1.jsonl", overwrite=False)
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(site.ids()) < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # waits for the crawl process, not for simulated time
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run ended before the kill"
    [open_file] = warc.glob("*.warc.gz.open")
    whole = open_file.stat().st_size
    with open(open_file, "ab") as file:  # the kill cut the last record short
        file.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + bytes(random.Random(3).randbytes(40)))
    committed = pages(tmp_path)
    assert committed  # some were committed before the kill

    second = crawl(site, tmp_path, T0, "run2.jsonl")
    assert "ended with a record cut short" in second.stderr
    assert not list(warc.glob("*.open"))
    repaired = warc / open_file.name.removesuffix(".open")
    assert repaired.stat().st_size >= whole - 1 and (warc / (repaired.name + ".cdxj")).exists()
    records = read_warcs(warc)  # every file reads to its end, digests checked
    captures = {(r.uri, r.date) for r in records if r.type == "response"}
    # nothing in the state points at a capture that is not on disk
    for record in pages(tmp_path).values():
        assert (record.capture_uri, record.capture_date) in captures
    for record in committed.values():
        assert (record.capture_uri, record.capture_date) in captures
    assert second.stats["idcrawl/warc/repaired"] == 1


def test_a_job_files_warc_dir_turns_warc_output_on(make_site, tmp_path: Path) -> None:
    site = make_site(ChangingModel())
    job = tmp_path / "job.toml"
    job.write_text(f'warc_dir = "arch"\n[[targets]]\nname = "reg"\nurl = "{site.url()}"\nstart = 1\nmargin = 5\n')
    result = run_crawl(tmp_path, {"job": job}, {"IDCRAWL_NOW": at(T0)}, output="items.jsonl")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(result.items) == 100
    assert len(list((tmp_path / "arch").glob("*.warc.gz"))) == 1
    assert sum(r.type == "response" for r in read_warcs(tmp_path / "arch")) == result.stats["idcrawl/warc/response"]
