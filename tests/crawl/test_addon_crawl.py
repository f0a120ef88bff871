"""A fresh ``scrapy startproject`` project that adopts idcrawl with one ADDONS line (and one without it)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import GapModel
from tests.support.crawl import read_items

NOTICES_SPIDER = '''\
from idcrawl.spiders.idseq import IdSeqSpider


class NoticesSpider(IdSeqSpider):
    name = "notices"

    def parse_found(self, response, item):
        item["title"] = response.css("h1::text").get()
        yield item
'''


def startproject(tmp_path: Path, addon: bool) -> tuple[Path, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "PYTHONPATH")}
    subprocess.run([sys.executable, "-m", "scrapy", "startproject", "shop"], cwd=tmp_path, env=env,
                   check=True, capture_output=True)
    project = tmp_path / "shop"
    (project / "shop" / "spiders" / "notices.py").write_text(NOTICES_SPIDER)
    if addon:
        with (project / "shop" / "settings.py").open("a") as fh:
            fh.write('\nADDONS = {"idcrawl.addon.IdCrawl": 0}\n')
    return project, env


def crawl_notices(project: Path, env: dict[str, str], url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "notices", "-a", f"url={url}", "-a", "start=100",
         "-a", "margin=5", "-O", "items.jsonl", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "LOG_LEVEL=INFO",
         # the startproject template's DOWNLOAD_DELAY = 1 and the add-on's politeness (on by default: one
         # request a second or more) would only slow the test down: a site of the test's own
         "-s", "DOWNLOAD_DELAY=0", "-s", "IDCRAWL_POLITENESS_FACTOR=0"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def test_a_fresh_startproject_project_with_one_addons_line_runs_an_id_crawl(make_site, tmp_path: Path) -> None:
    gaps = {103, 110, 111, 150}
    site = make_site(GapModel(100, 160, gaps))
    project, env = startproject(tmp_path, addon=True)
    result = crawl_notices(project, env, site.url())
    assert result.returncode == 0, result.stderr[-3000:]
    items = read_items(project / "items.jsonl")
    assert sorted(item["id"] for item in items) == [i for i in range(100, 161) if i not in gaps]
    assert all(item["title"] and item["checksum"] for item in items)
    assert "idcrawl.addon.IdCrawl" in result.stderr  # "Enabled addons"
    assert "idcrawl.extensions.progress.IdProgress" in result.stderr  # "Enabled extensions": wired by the add-on
    assert "idcrawl.pipelines.ContentDuplicates" in result.stderr  # "Enabled item pipelines"
    assert "'DUPEFILTER_CLASS': 'idcrawl.dupefilters.IdDupeFilter'" in result.stderr  # "Overridden settings"
    assert not any("duplicate_of" in item for item in items)  # every notice page differs
    # the commands reach the project through idcrawl's entry points (no COMMANDS_MODULE)
    plan = subprocess.run([sys.executable, "-m", "scrapy", "idplan", "--spider", "notices", "--json"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert plan.returncode == 0, plan.stderr
    lane = json.loads(plan.stdout)["targets"][0]["lanes"][0]
    assert lane["cut_reason"] == "margin" and lane["content"]["count"] == len(items)


def test_a_fresh_project_without_the_addon_still_runs_idseq_spiders(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(100, 120, {105}))
    project, env = startproject(tmp_path, addon=False)
    result = crawl_notices(project, env, site.url())
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(item["id"] for item in read_items(project / "items.jsonl")) == [
        i for i in range(100, 121) if i != 105
    ]
    assert "idcrawl.scheduler.IdScheduler" in result.stderr  # forced by the spider: Scrapy's would dispense nothing
    assert "idcrawl.addon.IdCrawl" not in result.stderr


def test_an_idseq_spider_without_the_addon_is_polite_by_default(make_site, tmp_path: Path) -> None:
    """Without the add-on the spider still lists the politeness extension: the seed's gaps (1 s at least,
    IDCRAWL_POLITENESS_MIN_DELAY) between requests to the host."""
    site = make_site(GapModel(100, 102, set()))
    project, env = startproject(tmp_path, addon=False)
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "notices", "-a", f"url={site.url()}", "-a", "start=100",
         "-a", "max=102", "-a", "margin=1", "-O", "items.jsonl", "-s", "TELNETCONSOLE_ENABLED=False",
         "-s", "LOG_LEVEL=INFO", "-s", "DOWNLOAD_DELAY=0", "-s", "IDCRAWL_POLITENESS_MIN_DELAY=0.3"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "idcrawl.extensions.politeness.IdPoliteness" in result.stderr  # "Enabled extensions"
    assert "idcrawl.addon.IdCrawl" not in result.stderr
    times = sorted(entry.at for entry in site.log if entry.id is not None)
    # Scrapy's RANDOMIZE_DOWNLOAD_DELAY draws each gap in 0.5x-1.5x of the slot's delay
    assert len(times) == 3 and min(b - a for a, b in itertools.pairwise(times)) >= 0.3 * 0.5 * 0.9


def test_a_profile_in_a_startproject_project_says_what_it_comes_to(make_site, tmp_path: Path) -> None:
    """startproject writes CONCURRENT_REQUESTS_PER_DOMAIN = 1 and DOWNLOAD_DELAY = 1: under fast they gave way
    silently or not at all; now the start line says what the crawl runs with, and a setting of the project
    that undoes the profile is a WARNING. The add-ons have names, LogStats's line gives way to progress lines,
    a refusal is idcrawl's line."""
    site = make_site(GapModel(100, 140, {110}))
    project, env = startproject(tmp_path, addon=True)
    base = [sys.executable, "-m", "scrapy", "crawl", "notices", "-a", f"url={site.url()}", "-a", "start=100",
            "-a", "margin=3", "-O", "items.jsonl", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "IDCRAWL_PROFILE=fast",
            "-s", "LOGSTATS_INTERVAL=0.2", "-s", "IDCRAWL_PROGRESS_FIRST=0.2"]
    result = subprocess.run(base, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("INFO: idcrawl: settings profile 'fast': CONCURRENT_REQUESTS=32, 32 per host, DOWNLOAD_DELAY=0 s, "
            "politeness off, robots.txt obeyed") in result.stderr
    assert "WARNING: idcrawl: profile" not in result.stderr
    assert " object at 0x" not in result.stderr  # "Enabled addons" by name
    assert "Crawled " not in result.stderr  # no LogStats line beside the progress lines
    items = read_items(project / "items.jsonl")
    summary = next(line for line in result.stderr.splitlines() if "INFO: summary: " in line)
    assert f"; {len(items)} emitted)" in summary
    with (project / "shop" / "settings.py").open("a") as fh:
        fh.write("AUTOTHROTTLE_ENABLED = True\n")
    warned = subprocess.run([*base, "-a", "margin=-1"], cwd=project, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert warned.returncode != 0
    assert "[idcrawl] ERROR: notices: bad input: margin='-1': must be an integer >= 0" in warned.stderr
    assert "[asyncio] ERROR" not in warned.stderr
    throttled = subprocess.run(base, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert throttled.returncode == 0, throttled.stderr[-3000:]
    assert ("WARNING: idcrawl: profile 'fast' turns politeness off, but AUTOTHROTTLE_ENABLED=True from the "
            "project's settings slows each host down") in throttled.stderr
