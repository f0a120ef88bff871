"""What sitemaps as evidence cost an id target's run (issue 31): the stored page records it reads and moves.

``python bench/sitemap_evidence.py`` (``--pages N`` found pages stored, default 100,000; ``--listed L`` ids a
sitemap lists, default 1,000 and 50,000; ``--repeat R``) writes N page records to a SQLite state and
times, best of R, in one process:

- **baseline**: ``load_pages`` (every record of the target decoded), what reading the records without
  an index by id costs;
- **ids**: ``load_page_ids`` of the L listed ids (the primary key), what ``LocalWorker.sitemap_evidence`` reads;
- **rules**: ``pages_by_sitemap`` of L entries (one in ten with a newer ``lastmod``).

Seconds are this process's CPU time (``time.process_time``). Figures and ratios to the baseline, not
thresholds; results in docs/benchmarks.md ("Sitemaps as evidence").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from sitemaps import best  # noqa: E402  (bench/sitemaps.py: best of R, CPU seconds)

from idcrawl.core.recrawl import Policy, page_schedule  # noqa: E402
from idcrawl.core.sitemaps import SitemapUrl, pages_by_sitemap  # noqa: E402
from idcrawl.state import SqliteStateStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--listed", type=int, nargs="+", default=[1_000, 50_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    policy = Policy()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state.sqlite"
        store = SqliteStateStore(path)
        records = {i: page_schedule(f"t/{i}", 1000.0, f"{i:040d}", policy=policy) for i in range(1, args.pages + 1)}
        store.commit({"t": {}}, {}, {}, pages={"t": records})
        store.close()
        store = SqliteStateStore(path, read_only=True)
        base = best(args.repeat, lambda: store.load_pages("t"))
        rows = [("baseline: `load_pages` of every record", args.pages, base)]
        for listed in args.listed:
            ids = list(range(1, listed + 1))
            entries = {i: SitemapUrl(f"u{i}", lastmod=2000.0 if i % 10 == 0 else 500.0) for i in ids}
            stored = store.load_page_ids("t", ids)
            rows.append((f"ids: `load_page_ids` of {listed:,} listed", listed,
                         best(args.repeat, lambda ids=ids: store.load_page_ids("t", ids))))
            rows.append((f"rules: `pages_by_sitemap` of {listed:,} entries", listed,
                         best(args.repeat, lambda e=entries, s=stored: pages_by_sitemap(s, e, 5000.0, policy))))
        store.close()
    print(f"{args.pages:,} page records stored, best of {args.repeat} (CPU seconds)")
    print("| step | seconds | µs per record | x baseline |")
    print("|---|---:|---:|---:|")
    for name, count, seconds in rows:
        print(f"| {name} | {seconds:.3f} | {seconds / count * 1e6:.1f} | {seconds / base:.2f} |")


if __name__ == "__main__":
    main()
