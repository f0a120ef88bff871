"""How long a WARC rotation holds the crawl's thread (issue 33): the CDXJ index of a finished file is made
by a thread of its own (``idcrawl.archive.files.WarcFiles``) instead of inline, as before.

``python bench/warc_index.py`` (``--files F``, default 6; ``--size MB``, default 8; ``--body B``, default
8,000) writes F files of about MB megabytes of HTML response records (seeded words) through ``WarcFiles``
with that rotation size, and times, on the writing thread, each ``write`` that rotates (finish: fsync,
rename, the index handed over) against ``write_index`` of the same file (what the inline index added to
it). ``close`` (which waits for the indexes) is timed too. Figures of one run, compared within it;
results in docs/benchmarks.md ("WARC output").
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from warcio.statusandheaders import StatusAndHeaders  # noqa: E402

from idcrawl.archive.files import WarcFiles, write_index  # noqa: E402

WORDS = [f"{a}{b}{c}" for a in "bcdfglmnprst" for b in "aeiou" for c in ("", "n", "r", "st", "l")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--size", type=float, default=8.0, help="rotation size, MB")
    parser.add_argument("--body", type=int, default=8000)
    args = parser.parse_args()
    rng = random.Random(33)
    with tempfile.TemporaryDirectory() as folder:
        files = WarcFiles(folder, "bench", {"software": "bench"}, int(args.size * 1_000_000))
        files.open()
        rotations: list[float] = []
        writes: list[float] = []
        n = 0
        while len(files.finished) < args.files:
            body = " ".join(rng.choice(WORDS) for _ in range(args.body // 4)).encode()[: args.body]
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            record = files.current().create_warc_record(f"http://bench.test/{n}", "response",
                                                        payload=BytesIO(body), length=len(body), http_headers=http)
            before = len(files.finished)
            start = time.perf_counter()
            files.write(record)
            took = time.perf_counter() - start
            (rotations if len(files.finished) > before else writes).append(took)
            n += 1
        start = time.perf_counter()
        files.close()
        closing = time.perf_counter() - start
        inline = []
        for path in files.finished:
            start = time.perf_counter()
            write_index(path)
            inline.append(time.perf_counter() - start)
    pages = n / args.files
    print(f"{args.files} files of ~{args.size:g} MB, {pages:.0f} records each")
    print(f"plain write (median):                 {statistics.median(writes) * 1000:8.3f} ms")
    print(f"rotating write, index in a thread:    {statistics.median(rotations) * 1000:8.3f} ms (median)")
    print(f"the inline index it no longer waits:  {statistics.median(inline) * 1000:8.3f} ms (median), "
          f"x{statistics.median(inline) / statistics.median(rotations):.1f}")
    print(f"close (waits for the indexes left):   {closing * 1000:8.3f} ms")


if __name__ == "__main__":
    main()
