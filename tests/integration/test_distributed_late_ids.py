"""Late ids in a distributed job (issue 31, finding 5): the fleet re-probes the ids missing below a tail's
last found id as one process does (tests/crawl/test_late_ids_crawl.py): planned once for the fleet, each
id fetched once, the re-probe kept in the tail's schedule in Redis so the next one waits ``late_every``."""

from __future__ import annotations

from pathlib import Path

import pytest

from idcrawl.core.recrawl import DAY
from tests.conftest import GapModel
from tests.integration.test_distributed_due import T0, fleet, items, requests, tails
from tests.support.reference import late_passes_truth

redis = pytest.importorskip("redis")

HOUR = 3600.0


def job_file(workdir: Path, site) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "job.toml"
    path.write_text('[defaults]\nstart = 1000\nmargin = 3\nwindow = 1\nlate_every = "6h"\nlate_max = 3\n'
                    f'recrawl_initial = "{10 * DAY:.0f}"\n'  # the found pages and the tails stay not due
                    f'[[targets]]\nname = "a"\nurl = "{site.url()}"\n'
                    f'[[targets]]\nname = "b"\nurl = "{site.url("localhost")}"\n')
    return path


def test_a_fleet_re_probes_late_ids_once_per_interval_with_the_single_process_rotation(
    make_site, redis_server, tmp_path: Path
) -> None:
    gaps = {1002, 1005, 1007, 1010, 1013}
    model = GapModel(1000, 1019, set(gaps))
    site = make_site(model)
    job = job_file(tmp_path, site)
    fleet(tmp_path, "first", redis_server, job, T0, workers=2, resume=None)
    model.gaps -= {1007, 1013}  # published late
    passes = late_passes_truth(sorted(gaps), set(range(1000, 1020)) - gaps, 3, model.exists, 3)
    site.log.clear()
    late = fleet(tmp_path, "late", redis_server, job, T0 + HOUR, workers=3)
    assert requests(site) == {name: sorted(passes[0]) for name in "ab"}, "each late id once across the fleet"
    assert items(late) == [(name, i) for name in "ab" for i in (1007, 1013)]
    assert sum(r.stats.get("idcrawl/late/planned", 0) for r in late) == 6
    assert sum(r.stats.get("idcrawl/late/found", 0) for r in late) == 4
    assert {(s.late_at, s.late_below) for s in tails(redis_server).values()} == {(T0 + HOUR, passes[0][-1])}
    site.log.clear()
    fleet(tmp_path, "quiet", redis_server, job, T0 + 7 * HOUR, workers=2)  # within late_every: nothing
    assert requests(site) == {"a": [], "b": []}
    site.log.clear()
    fleet(tmp_path, "again", redis_server, job, T0 + 7 * HOUR + 1, workers=2)
    assert requests(site) == {name: sorted(passes[1]) for name in "ab"}
    assert {s.late_below for s in tails(redis_server).values()} == {passes[1][-1]}
