"""What a recrawl of unchanged crawl-scope pages writes (issues 31, 33): items and WARC bytes per page of
a first harvest, a revisit answered 304 (the site sends ETags), and a revisit answered 200 with the same
bodies (a backend that ignores validators), one process, SQLite state.

``python bench/url_revisits.py`` (``--pages N``, default 300; ``--links L`` links per page, default 20)
serves N pages on one host of a link-graph site, each linking to L others, under a crawl profile with
``revisit = "1d"``; three real ``scrapy crawl`` runs a day apart. Before URL records kept signatures
and captures every revisit wrote every page as an item and a full response record (the first run's
figures). Figures and ratios against the first run of the same run; results in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tests.crawl.test_urlqueue_crawl import at, crawl  # noqa: E402
from tests.support.linkgraph import LinkGraphSite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--links", type=int, default=20)
    options = parser.parse_args()
    rng = random.Random(31)
    pages = ["http://a.test/"] + [f"http://a.test/{n}" for n in range(1, options.pages)]
    graph = {page: [pages[(i + 1) % len(pages)], *rng.sample(pages, options.links - 1)]
             for i, page in enumerate(pages)}
    site = LinkGraphSite(graph, etags=set(pages)).start()
    job = f"""
[[crawl_profiles]]
name = "daily"
max_hops = {options.pages}
revisit = "1d"

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["daily"]
"""
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            warc = workdir / "warc"
            before: set[Path] = set()
            for n, label in enumerate(("first harvest", "revisit, 304s", "revisit, same bodies")):
                if n == 2:
                    site.etags.clear()
                result = crawl(workdir, job, {**at(25 * n), "IDCRAWL_WARC_DIR": str(warc), "LOG_LEVEL": "INFO"})
                files = set(warc.glob("*.warc.gz"))
                written = sum(path.stat().st_size for path in files - before)
                before = files
                fetched = sum(1 for _, path in site.log if path != "/robots.txt")
                site.log.clear()
                rows.append((label, fetched, len(result.items), written))
    finally:
        site.stop()
    full = rows[0][3] / rows[0][1]
    print("| run | pages fetched | items | WARC bytes per page | of the first |")
    print("|---|---|---|---|---|")
    for label, fetched, items, written in rows:
        print(f"| {label} | {fetched} | {items} | {written / fetched:,.0f} | {written / fetched / full:.2f} |")


if __name__ == "__main__":
    main()
