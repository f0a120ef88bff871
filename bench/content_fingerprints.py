"""Content fingerprints: time per page of each step, and memory per distinct page of the duplicate index.

    .venv/bin/python bench/content_fingerprints.py [--pages 300] [--exact 1000000] [--near 20000]

CPU time of this process (``time.process_time``: the machine may be shared;
median of --rounds runs over --pages pages, per page) for three page
sizes: the demo site's notice (~30 words), a 400-word and a 3,000-word
article inside a boilerplate header and footer:

- visible text: lxml parse + text extraction (the spider reuses Scrapy's
  parse, so only the extraction is new work for it);
- shingles: words and 3-word shingle hashes;
- MinHash: the 128-permutation signature of the shingles (``datasketch``);
- near check: one ``ContentIndex.check`` with a signature (LSH query +
  insert) against an index already holding the other pages;
- probe check: one learned soft-404 comparison (exact Jaccard of shingle sets).

Memory (``tracemalloc``, per distinct page): the exact index holding --exact
checksums, and the near index holding --near signatures.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from idcrawl.core.fingerprints import ContentIndex, SoftPage, html_text, shingles, signature, words
from idcrawl.demo.site import DemoModel

CHROME = (
    "<html><head><title>Register</title><script>var t = {a: 1};</script></head><body>"
    "<header><nav>Home | Search | Agencies | Help | Contact</nav><p>Welcome to the register of the region</p></header>"
    "<main>{content}</main><footer>Register office, all rights reserved; terms, privacy, accessibility</footer>"
    "</body></html>"
)


def article(rng: random.Random, length: int) -> bytes:
    vocabulary = [f"w{i}" for i in range(20_000)]
    paragraphs = []
    for start in range(0, length, 50):
        paragraphs.append("<p>" + " ".join(rng.choice(vocabulary) for _ in range(min(50, length - start))) + "</p>")
    return CHROME.replace("{content}", "".join(paragraphs)).encode()


def per_page(fn: Callable[[Any], Any], inputs: list[Any], rounds: int) -> float:
    """Median over rounds of the time per input, in microseconds."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for value in inputs:
            fn(value)
        times.append((time.process_time() - start) / len(inputs))
    return statistics.median(times) * 1e6


def time_pages(name: str, bodies: list[bytes], rounds: int) -> None:
    texts = [html_text(body) for body in bodies]
    sets = [shingles(words(text)) for text in texts]
    sigs = [signature(s) for s in sets]
    probe = SoftPage.learn(texts[0])
    assert probe is not None
    t_text = per_page(html_text, bodies, rounds)
    t_shingles = per_page(lambda text: shingles(words(text)), texts, rounds)
    t_minhash = per_page(signature, sets, rounds)
    t_probe = per_page(probe.similarity, texts, rounds)
    checks = []
    for _ in range(rounds):
        index = ContentIndex(0.9)
        for i, s in enumerate(sigs):
            index.check("t", i, f"{i:040x}", s)  # warm: the index holds every page
        start = time.process_time()
        for i, s in enumerate(sigs):
            index.check("t", len(sigs) + i, f"{len(sigs) + i:040x}", s)
        checks.append((time.process_time() - start) / len(sigs))
    t_near = statistics.median(checks) * 1e6
    words_per_page = statistics.median(len(words(t)) for t in texts)
    print(f"| {name} | {words_per_page:.0f} | {t_text:.0f} | {t_shingles:.0f} | {t_minhash:.0f} | {t_near:.0f} "
          f"| {t_probe:.0f} |")


def memory(build: Callable[[], Any]) -> tuple[int, Any]:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--exact", type=int, default=1_000_000)
    parser.add_argument("--near", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(42)
    demo = DemoModel()
    signature(frozenset({1}))  # import datasketch and build the permutations outside the timings

    print("| page | words | visible text (us) | shingles (us) | MinHash (us) | near check (us) | probe check (us) |")
    print("|---|---|---|---|---|---|---|")
    time_pages("demo notice", [demo.page(10_000 + i) for i in range(args.pages)], args.rounds)
    time_pages("400-word article", [article(rng, 400) for _ in range(args.pages)], args.rounds)
    time_pages("3,000-word article", [article(rng, 3000) for _ in range(args.pages // 3)], args.rounds)

    checksums = [hashlib.sha1(i.to_bytes(8, "little")).hexdigest() for i in range(args.exact)]

    def exact() -> ContentIndex:
        index = ContentIndex()
        for i, checksum in enumerate(checksums):
            index.check("target", 38_000_000 + i, checksum)
        return index

    used, _ = memory(exact)
    print(f"\nexact index: {args.exact:,} distinct pages, {used / 2**20:.1f} MiB, "
          f"{used / args.exact:.0f} bytes per page")
    sigs = [signature(shingles(words(" ".join(f"w{rng.randrange(10**6)}" for _ in range(60)))))
            for _ in range(args.near)]

    def near() -> ContentIndex:
        index = ContentIndex(0.9)
        for i, s in enumerate(sigs):
            index.check("target", i, f"{i:040x}", s)
        return index

    used, _ = memory(near)
    print(f"near index (0.9): {args.near:,} distinct pages, {used / 2**20:.1f} MiB, "
          f"{used / args.near:.0f} bytes per page (signatures made before, not counted)")


if __name__ == "__main__":
    main()
