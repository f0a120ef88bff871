"""What a JSON lines feed costs per item: Scrapy's exporter against orjson (the `fast` candidate).

In-process, CPU time (``time.process_time``) of writing ``--items`` copies of an id page's item
into a memory buffer, best of ``--rounds``: Scrapy's ``JsonLinesItemExporter`` (what ``-O
items.jsonl`` uses, ``FEED_EXPORT_ENCODING = "utf-8"``) and ``orjson.dumps`` plus a newline. orjson
is not a dependency of idcrawl: install it to run this (``pip install orjson``).

    .venv/bin/python bench/feed_encoding.py            # --items 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable
from typing import Any

ITEM: dict[str, Any] = {  # the shape of an idseq item on the benchmark site
    "id": 12345, "url": "http://127.0.0.1:8000/notice/12345", "status": 200, "target": "127.0.0.1",
    "fetched_at": "2026-11-27T00:10:33.245685+00:00", "title": "Notice 12345", "body": "x" * 200,
    "checksum": "ab" * 20,
}


def per_item(write: Callable[[dict[str, Any]], object], items: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(items):
            write(ITEM)
        best = min(best, (time.process_time() - started) / items)
    return best * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import orjson
    from scrapy.exporters import JsonLinesItemExporter

    exporter = JsonLinesItemExporter(io.BytesIO(), encoding="utf-8")
    exporter.start_exporting()
    buffer = io.BytesIO()
    scrapy_us = per_item(exporter.export_item, args.items, args.rounds)
    orjson_us = per_item(lambda item: buffer.write(orjson.dumps(item) + b"\n"), args.items, args.rounds)
    print(f"JSON lines per item: Scrapy's exporter {scrapy_us:.1f} us, orjson {orjson_us:.1f} us "
          f"({scrapy_us / orjson_us:.0f}x); {args.items} items, best of {args.rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
