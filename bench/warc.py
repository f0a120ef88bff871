"""What WARC output costs (issue 33): bytes and CPU per page with ``IDCRAWL_WARC_DIR`` on against off, and
the bytes an unchanged recrawl writes with revisit records against a full recrawl.

``python bench/warc.py`` (``--pages N``, default 2,000; ``--body B`` bytes of HTML per page, default
8,000; ``--repeat R``, default 3) serves N found pages from a local demo site (ETag and Last-Modified;
the body padded to B bytes) and runs real ``scrapy crawl`` processes, best of R each:

- **off** / **on**: a first crawl of the N pages without / with WARC output, in fresh folders: CPU seconds
  of the crawl process (user + system, ``RUSAGE_CHILDREN``) per page, WARC bytes per page;
- **recrawl 304** (validators: every revisit answers 304) and **recrawl same body** (the site ignores
  validators: 200 with the same body) two days later, ``resume=due``: WARC bytes per page, against the
  first crawl's (**full**: what a recrawl writing every body costs).

Figures and ratios against the baseline of the same run, not thresholds; results in docs/benchmarks.md
("WARC output").
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from idcrawl.demo.site import IdSite  # noqa: E402
from tests.crawl.test_recrawl_pages_crawl import DAY, T0, ChangingModel, at  # noqa: E402
from tests.support.crawl import run_crawl  # noqa: E402

WORDS = [f"{a}{b}{c}" for a in "bcdfglmnprst" for b in "aeiou" for c in ("", "n", "r", "st", "l")]


class PaddedModel(ChangingModel):
    """``ChangingModel`` with N pages of about ``body`` bytes each."""

    def __init__(self, pages: int, body: int, *, validators: bool) -> None:
        super().__init__(validators=validators)
        self.last = pages
        self.version = dict.fromkeys(range(1, pages + 1), 1)
        self.body = body

    def exists(self, id_: int) -> bool:
        return 1 <= id_ <= self.last and id_ not in self.gone

    def page(self, id_: int) -> bytes:
        page = super().page(id_)
        pad = max(0, self.body - len(page))
        rng = random.Random(id_)  # seeded: the same body at each fetch; words compress about as prose does
        filler = " ".join(rng.choice(WORDS) for _ in range(pad // 4)).encode()[:pad]
        return page.replace(b"</body>", filler + b"</body>")


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def warc_bytes(folder: Path, before: set[Path] = frozenset()) -> int:  # type: ignore[assignment]
    return sum(p.stat().st_size for p in folder.glob("*.warc.gz") if p not in before)


def crawl(site: IdSite, workdir: Path, now: float, warc: bool, **args: object) -> float:
    settings = {"IDCRAWL_NOW": at(now), "LOG_LEVEL": "WARNING", "IDCRAWL_STATE_COMMIT_ITEMS": 1000}
    if warc:
        settings["IDCRAWL_WARC_DIR"] = str(workdir / "warc")
    start = cpu()
    result = run_crawl(workdir, {"start": 1, "margin": 5, "name": "reg", "url": site.url(), **args}, settings,
                       output="items.jsonl", timeout=1800)
    spent = cpu() - start
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--body", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.pages
    cpu_off, cpu_on, full, recrawl = [], [], [], {True: [], False: []}
    for _ in range(args.repeat):
        for validators in (True, False):
            site = IdSite(PaddedModel(n, args.body, validators=validators)).start()
            try:
                with tempfile.TemporaryDirectory() as off_dir, tempfile.TemporaryDirectory() as on_dir:
                    cpu_off.append(crawl(site, Path(off_dir), T0, warc=False))
                    cpu_on.append(crawl(site, Path(on_dir), T0, warc=True))
                    folder = Path(on_dir) / "warc"
                    first = set(folder.glob("*.warc.gz"))
                    full.append(warc_bytes(folder))
                    crawl(site, Path(on_dir), T0 + 2 * DAY, warc=True, resume="due")
                    recrawl[validators].append(warc_bytes(folder, first))
                    shutil.rmtree(folder)
            finally:
                site.stop()
    off, on = min(cpu_off), min(cpu_on)
    print(f"pages {n}, body {args.body} bytes, best of {2 * args.repeat} (off/on), {args.repeat} (recrawls)")
    print(f"CPU per page: off {off / n * 1e6:.0f} us, on {on / n * 1e6:.0f} us (x{on / off:.3f})")
    print(f"WARC bytes per page, first crawl (full): {min(full) / n:.0f}")
    for validators, label in ((True, "recrawl 304 (server-not-modified)"),
                              (False, "recrawl same body (identical-payload-digest)")):
        size = min(recrawl[validators])
        print(f"WARC bytes per page, {label}: {size / n:.0f} ({size / min(full):.3f} of full)")


if __name__ == "__main__":
    main()
