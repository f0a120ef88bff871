"""The dupefilter's backends on 1,000,000 fingerprints: memory, checks/s, adds/s, false positives.

    .venv/bin/python bench/dedup.py [--n 1000000] [--error-rate 0.001] [--only NAME ...] [--json out.json]

Each backend of ``idcrawl.core.seen`` runs in a fresh process (so its RSS
growth is its own) and, like the dupefilter, through the backend API (the
hex key of pybloom-live, rbloom's stable hash included):

1. ``n`` deterministic 20-byte fingerprints (SHA-1 of a counter, like Scrapy's)
   and ``n`` others never added are made first;
2. adds/s: add the ``n`` fingerprints; memory: the process's RSS growth over
   those adds, per fingerprint. A set keeps the fingerprint objects alive (53
   bytes each, made before the RSS reading), so for ``set`` they are added in;
   a Bloom filter keeps none. ``file`` is the size of the saved filter;
3. checks/s of fingerprints that were added (every one must be found: no
   false negatives) and of ones that were not; the share of those found is
   the measured false-positive rate;
4. what one new request costs the dupefilter in a crawl: the question
   (``Seen.seen_or_add``: pending set, then backend) and the record once
   answered (``Seen.fetched``), on a fresh filter of the variant (a scalable one
   at 1,000,000 checks up to three layers: see its checks/s); beside it, what
   Scrapy's fingerprint of the same new request costs (every dupefilter pays it).

Times are CPU time of the worker process (``time.process_time``), so that other
work on a shared machine does not count. Ratios are against the ``set``
baseline of the same run.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scrapy import Request  # noqa: E402
from scrapy.utils.request import RequestFingerprinter  # noqa: E402

from idcrawl.core.seen import FingerprintSet, PyBloomSeen, Seen, dump, make_backend  # noqa: E402

#: New requests per variant for the per-request cost.
REQUESTS = 20_000

#: name -> (backend, capacity as a multiple of n: 1 = known, 0 = unknown), shown in this order
VARIANTS: dict[str, tuple[str, int]] = {
    "set": ("set", 0),
    "pybloom fixed": ("pybloom", 1),
    "pybloom scalable": ("pybloom", 0),
    "pybloom scalable (library defaults)": ("pybloom", 0),
    "rbloom fixed": ("rbloom", 1),
    "rbloom scalable": ("rbloom", 0),
}


def fingerprints(count: int, salt: bytes) -> list[bytes]:
    return [hashlib.sha1(salt + i.to_bytes(8, "big")).digest() for i in range(count)]


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def build(variant: str, n: int, error_rate: float) -> FingerprintSet:
    backend, capacity = VARIANTS[variant]
    made = make_backend(backend, error_rate, capacity * n)
    if variant.endswith("(library defaults)"):
        import pybloom_live

        assert isinstance(made, PyBloomSeen)
        # pybloom-live's own ScalableBloomFilter(error_rate=p): 100 items first, rates p*0.9**(i+1)
        made._scalable = pybloom_live.ScalableBloomFilter(error_rate=error_rate)
    return made


def worker(variant: str, n: int, error_rate: float) -> dict[str, Any]:
    seen, unseen = fingerprints(n, b"seen"), fingerprints(n, b"unseen")
    gc.collect()
    before = rss()
    backend = build(variant, n, error_rate)
    started = time.process_time()
    for fp in seen:
        backend.add(fp)
    add_s = time.process_time() - started
    grown = rss() - before
    if VARIANTS[variant][0] == "set":
        grown += n * sys.getsizeof(seen[0])

    started = time.process_time()
    found = sum(fp in backend for fp in seen)
    seen_s = time.process_time() - started
    assert found == n, f"{variant}: {n - found} false negatives"
    started = time.process_time()
    false_positives = sum(fp in backend for fp in unseen)
    unseen_s = time.process_time() - started

    # what a request pays in a crawl: Scrapy's fingerprint of a new request, the question
    # (pending set + backend) and, once answered, the record
    fingerprinter = RequestFingerprinter()
    requests = [Request(f"https://register.example/notice/{i}?lang=en") for i in range(REQUESTS)]
    started = time.process_time()
    new = [fingerprinter.fingerprint(request) for request in requests]
    fingerprint_s = (time.process_time() - started) / REQUESTS
    tracker = Seen(build(variant, REQUESTS, error_rate))  # fresh: a full fixed filter would chain a layer
    started = time.process_time()
    for fp in new:
        if not tracker.seen_or_add(fp):
            tracker.fetched(fp)
    request_s = (time.process_time() - started) / REQUESTS

    path = Path(f"/tmp/idcrawl-bench-dedup-{os.getpid()}")
    try:
        started = time.process_time()
        file_bytes = dump(backend, path)
        save_s = time.process_time() - started
    finally:
        path.unlink(missing_ok=True)
    return {
        "variant": variant,
        "n": n,
        "configured": error_rate,
        "count": len(backend),
        "capacity": backend.capacity,
        "rss_bytes_per_fp": grown / n,
        "file_bytes_per_fp": file_bytes / n,
        "adds_per_s": n / add_s,
        "seen_checks_per_s": n / seen_s,
        "unseen_checks_per_s": n / unseen_s,
        "fp_rate": false_positives / n,
        "estimated_fp_rate": backend.estimated_error_rate(),
        "save_s": save_s,
        "fingerprint_us": fingerprint_s * 1e6,
        "request_us": request_s * 1e6,
    }


def table(rows: list[dict[str, Any]]) -> str:
    base = next((r for r in rows if r["variant"] == "set"), None)
    lines = [
        "| backend | bytes/fp (RSS) | bytes/fp (file) | adds/s | checks/s seen | checks/s unseen "
        "| FP rate measured (configured) | estimated | µs per new request (+ Scrapy's fingerprint) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        def rel(key: str, r: dict[str, Any] = r, better: str = "x") -> str:
            if base is None or r is base:
                return ""
            return f" ({r[key] / base[key]:.2g}{better})"

        fp_rate = f"{r['fp_rate']:.4%} ({r['fp_rate'] / r['configured']:.2f}x of {r['configured']:.1%})"
        if r["variant"] == "set":
            fp_rate = "0 (exact)"
        lines.append(
            f"| {r['variant']} | {r['rss_bytes_per_fp']:.2f}{rel('rss_bytes_per_fp')} "
            f"| {r['file_bytes_per_fp']:.2f} "
            f"| {r['adds_per_s']:,.0f}{rel('adds_per_s')} | {r['seen_checks_per_s']:,.0f}{rel('seen_checks_per_s')} "
            f"| {r['unseen_checks_per_s']:,.0f}{rel('unseen_checks_per_s')} | {fp_rate} "
            f"| {r['estimated_fp_rate']:.4%} | {r['request_us']:.1f} (+ {r['fingerprint_us']:.0f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--error-rate", type=float, default=0.001)
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), help="variants to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--worker", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.error_rate)))
        return
    rows = []
    for variant in args.only or list(VARIANTS):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", variant, "--n", str(args.n), "--error-rate", str(args.error_rate)],
            check=True, capture_output=True, text=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{variant}: {row['adds_per_s']:,.0f} adds/s, {row['seen_checks_per_s']:,.0f} checks/s, "
              f"{row['rss_bytes_per_fp']:.2f} bytes/fp, FP {row['fp_rate']:.4%}", file=sys.stderr)
    print(f"{args.n:,} fingerprints, configured false-positive rate {args.error_rate}; ratios against set")
    print(table(rows))
    failing = [r["variant"] for r in rows if r["fp_rate"] > 2 * r["configured"]
               and not r["variant"].endswith("(library defaults)")]
    if failing:
        print(f"measured false-positive rate above 2x the configured one: {', '.join(failing)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
