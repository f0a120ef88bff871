"""Overlapping targets in real crawls: each URL fetched once, each target's result as if alone."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.reference import lane_truth, target_truth

# margin 4: ascending runs end at 1183; below 1000 nothing exists, so a descending run ends at 996
GAPS = {1105, 1130, 1131, 1140, 1152, 1160, 1161, 1162, 1180, 1181, 1182, 1183}


def job_file(path: Path, url: str, *targets: dict[str, object]) -> Path:
    blocks = []
    for target in targets:
        lines = ["[[targets]]", f'url = "{url}"'] + [
            f"{key} = {value!r}".replace("'", '"') for key, value in target.items()
        ]
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n")
    return path


@pytest.mark.parametrize("concurrency", [1, 16])
def test_overlapping_targets_fetch_each_url_once(make_site, tmp_path: Path, concurrency: int) -> None:
    model = GapModel(1000, 1299, GAPS)
    site = make_site(model)
    a = {"name": "a", "start": 1150, "direction": "both", "margin": 4}
    b = {"name": "b", "start": 1100, "direction": "asc", "margin": 4}  # walks into a's span
    job = job_file(tmp_path / "job.toml", site.url(), a, b)
    result = run_crawl(tmp_path, {"job": job},
                       {"CONCURRENT_REQUESTS": concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency})
    assert result.returncode == 0, result.stderr[-3000:]

    requested = site.ids()
    assert max(Counter(requested).values()) == 1, "a URL was fetched twice"
    truth_a = target_truth(model.exists, 1150, "both", 4)
    truth_b = target_truth(model.exists, 1100, "asc", 4)
    assert result.ids == sorted(set(truth_a) | set(truth_b)), "one item per found URL"
    # each lane decided exactly as it would alone
    assert result.stats["idcrawl/lanes/a:asc/cut_at"] == lane_truth(model.exists, 1150, 1, None, 4)[1]
    assert result.stats["idcrawl/lanes/a:desc/cut_at"] == lane_truth(model.exists, 1149, -1, None, 4)[1]
    assert result.stats["idcrawl/lanes/b:asc/cut_at"] == lane_truth(model.exists, 1100, 1, None, 4)[1]
    assert result.stats["idcrawl/lanes/b:asc/found"] == len(truth_b)
    assert result.stats["idcrawl/lanes/a:asc/found"] + result.stats["idcrawl/lanes/a:desc/found"] == len(truth_a)
    # a walks 996..1149 (desc) and 1150..1183 (asc), b walks 1100..1183: 1100..1183 is shared
    assert (result.stats["idcrawl/lanes/a:desc/cut_at"], result.stats["idcrawl/lanes/b:asc/cut_at"]) == (996, 1183)
    shared = set(range(1100, 1184))
    deduplicated = result.stats["dupefilter/filtered"]
    assert deduplicated == result.stats["idcrawl/deduplicated"]
    assert deduplicated >= len(shared)
    assert set(requested) >= set(range(996, 1184))
    assert len(requested) <= len(range(996, 1184)) + 2 * 128  # plus at most a window past each cut
    # the summary tells found (each target's walks, the shared ids in both) from emitted (the items)
    messages = [line.split("] INFO: ", 1)[1] for line in result.stderr.splitlines() if "] INFO: summary" in line]
    summary = {message.split(":", 1)[0]: message for message in messages}
    assert f"(found {len(truth_a) + len(truth_b):,}, " in summary["summary"]
    assert f"; {len(result.items):,} emitted)" in summary["summary"]
    assert result.stats["idcrawl/found"] == len(truth_a) + len(truth_b) > len(result.items)
    emitted = {name: int(re.search(r", ([\d,]+) emitted, ", summary[f"summary {name}"]).group(1))  # type: ignore[union-attr]
               for name in ("a", "b")}
    assert sum(emitted.values()) == len(result.items) == result.stats["idcrawl/emitted"]
    assert emitted == dict(Counter(item["target"] for item in result.items))


def test_a_shared_ids_items_name_the_target_that_emits_them_whichever_lane_fetched_it(
    make_site, tmp_path: Path
) -> None:
    # b is the nearest lane to ids 130..160 (the rule), but a, twenty times b's rate, reaches and
    # fetches most of them first: their items are b's all the same, as the docs promise
    site = make_site(GapModel(100, 199, set()))
    a = {"name": "a", "start": 100, "max": 160, "margin": 4, "rate": 20}
    b = {"name": "b", "start": 130, "max": 170, "margin": 4, "rate": 1}
    job = job_file(tmp_path / "job.toml", site.url(), a, b)
    result = run_crawl(tmp_path, {"job": job}, {"CONCURRENT_REQUESTS": 1, "CONCURRENT_REQUESTS_PER_DOMAIN": 1})
    assert result.returncode == 0, result.stderr[-3000:]
    assert max(Counter(site.ids()).values()) == 1, "a URL was fetched twice"
    labels = {item["id"]: item["target"] for item in result.items}
    assert labels == {i: "a" if i < 130 else "b" for i in range(100, 171)}
    assert result.stats["idcrawl/lanes/b:asc/emitted"] == 41
