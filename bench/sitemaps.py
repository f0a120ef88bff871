"""What reading a big sitemap costs, against queuing its URLs alone (issue 30, "Sitemaps as seeds").

``python bench/sitemaps.py`` (``--urls N``, default 50,000: the protocol's cap per file and
``IDCRAWL_SITEMAP_MAX_URLS``; ``--repeat R``) writes a ``<urlset>`` of N URLs on one host with
``lastmod``, ``priority`` and ``changefreq``, gzips it, and times, best of R, in one process:

- **baseline**: ``MemoryUrlQueue.seed`` of the N URLs (canonical), what any way of queuing them costs;
- **read**: ``gunzip`` (``max_size`` = 1 GiB) + Scrapy's ``Sitemap`` + ``sitemap_url`` per entry;
- **order**: ``by_priority``; **seed**: ``idcrawl.sitemaps.seed_urls`` (scope check, canonical URLs, seed);
- **take**: ``MemoryUrlQueue.take`` of every URL queued, all of one priority (as before priorities were
  kept) and with the sitemap's ten priorities (the draw within the group takes the highest first).

Seconds are this process's CPU time (``time.process_time``: a loaded shared machine inflates wall time
unevenly). Figures and ratios to the baseline, not thresholds; results in docs/benchmarks.md ("Sitemaps").
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from scrapy.utils.gz import gunzip  # noqa: E402
from scrapy.utils.sitemap import Sitemap  # noqa: E402

from idcrawl.core.scope import CrawlProfile, JobScope, Seed, canonical  # noqa: E402
from idcrawl.core.sitemaps import by_priority, sitemap_url  # noqa: E402
from idcrawl.core.urlqueue import MemoryUrlQueue  # noqa: E402
from idcrawl.sitemaps import seed_urls  # noqa: E402
from tests.support.sitemap_site import gzipped, urlset  # noqa: E402

FREQS = ("hourly", "daily", "weekly")


def best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.urls
    entries = [{"loc": f"https://news.example/a/{i}?utm_source=x&id={i}", "lastmod": f"2026-11-{1 + i % 28:02d}",
                "priority": f"{(i % 10) / 10:.1f}", "changefreq": FREQS[i % 3]} for i in range(n)]
    body = urlset(entries)
    packed = gzipped(body)
    scope = JobScope({"s": Seed("s", "https://news.example/", ("p",))}, {"p": CrawlProfile("p", 0)}, {},
                     pages=("s",))
    urls = [canonical(e["loc"]) for e in entries]

    def baseline() -> None:
        queue = MemoryUrlQueue()
        queue.start(scope, 0.0)
        for url in urls:
            queue.seed("s", url, 0.0)

    def read() -> list:
        return [u for e in Sitemap(gunzip(packed, max_size=1 << 30)) if (u := sitemap_url(e)) is not None]

    parsed = read()

    def seed() -> None:
        queue = MemoryUrlQueue()
        queue.start(scope, 0.0)
        seed_urls(queue, scope, "s", parsed, 0.0, None)

    def take(priorities: bool) -> Callable[[], None]:
        def run() -> None:
            queue = MemoryUrlQueue()
            queue.start(scope, 0.0)
            for url, entry in zip(urls, parsed, strict=True):
                queue.seed("s", url, 0.0, priority=entry.priority if priorities else None)
            start = time.process_time()
            while queue.take(lambda host: True, 0.0) is not None:
                pass
            timed.append(time.process_time() - start)
        return run

    timed: list[float] = []
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeat):  # interleaved: the two see the same load
        for priorities in (False, True):
            take(priorities)()
            times[priorities].append(timed.pop())
    one, ten = min(times[False]), min(times[True])
    base = best(args.repeat, baseline)
    rows = [("baseline: queue.seed of the URLs", base),
            ("read: gunzip + Sitemap + sitemap_url", best(args.repeat, read)),
            ("order: by_priority", best(args.repeat, lambda: by_priority(parsed))),
            ("seed: seed_urls (order, scope, seed)", best(args.repeat, seed)),
            ("take: every URL, one priority", one),
            ("take: every URL, ten priorities", ten)]
    print(f"{n:,} URLs, sitemap {len(body) / 1e6:.1f} MB ({len(packed) / 1e6:.2f} MB gzip), best of {args.repeat}")
    print(f"{'step':40} {'seconds':>8} {'us/URL':>7} {'x baseline':>10}")
    for name, seconds in rows:
        print(f"{name:40} {seconds:8.3f} {seconds / n * 1e6:7.1f} {seconds / base:10.2f}")


if __name__ == "__main__":
    main()
