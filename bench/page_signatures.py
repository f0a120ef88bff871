"""Page signatures (what a revisit compares): CPU per page of each ``signature`` mode, against ``body``.

    .venv/bin/python bench/page_signatures.py [--pages 300] [--rounds 5]

CPU time of this process (``time.process_time``; median of --rounds runs over --pages pages, per page)
for the demo site's notice and a 400- and a 3,000-word article inside a boilerplate header and footer
(bench/content_fingerprints.py's pages), each with a clock and a token:

- body: SHA-1 of the bytes (the default, the baseline of the ratios);
- body + drop: two ``signature_drop`` patterns removed from the decoded body first;
- text, parsed here: lxml parse + visible text + fold + SHA-1 (a spider whose ``parse_found`` never
  parses the page pays the parse);
- text, tree reused: the visible text of a tree already parsed (``parse_found``'s ``response.css``,
  the soft-404 probe or near-duplicates parse it once per response) + fold + SHA-1;
- text + drop: the same with the two patterns.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from idcrawl.core.fingerprints import html_text, visible_text
from idcrawl.core.recrawl import parse_policy, signature_of
from idcrawl.demo.site import DemoModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from content_fingerprints import article, per_page

DROP = [r"Served at \d\d:\d\d:\d\d", r"token=\w+"]


def with_clock(page: bytes, n: int) -> bytes:
    return page.replace(b"</body>", f"<p>Served at 07:{n % 60:02d}:00</p><p>token=t{n}</p></body>".encode())


def parse(body: bytes) -> Any:
    return etree.fromstring(body, parser=lxml_html.HTMLParser(recover=True, huge_tree=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    rng = random.Random(31)  # seeded pages
    demo = DemoModel(1, options.pages)
    kinds = {
        "notice": [with_clock(demo.page(i + 1), i) for i in range(options.pages)],
        "400 words": [with_clock(article(rng, 400), i) for i in range(options.pages)],
        "3,000 words": [with_clock(article(rng, 3000), i) for i in range(options.pages)],
    }
    body, body_drop = parse_policy({}), parse_policy({"signature_drop": DROP})
    text, text_drop = parse_policy({"signature": "text"}), parse_policy({"signature": "text", "signature_drop": DROP})
    print("| page | body | body + drop | text, parsed here | text, tree reused | text + drop, tree reused |")
    print("|---|---|---|---|---|---|")
    for name, pages in kinds.items():
        trees = {id(page): parse(page) for page in pages}
        steps = {
            "body": lambda p: signature_of(p, body),
            "body + drop": lambda p: signature_of(p, body_drop, decoded=lambda: p.decode()),
            "text, parsed here": lambda p: signature_of(p, text, text=lambda: html_text(p)),
            "text, tree reused": lambda p, trees=trees: signature_of(
                p, text, text=lambda: visible_text(trees[id(p)])),
            "text + drop": lambda p, trees=trees: signature_of(
                p, text_drop, text=lambda: visible_text(trees[id(p)])),
        }
        times = {step: per_page(fn, pages, options.rounds) for step, fn in steps.items()}
        base = times["body"]
        cells = [f"{t:,.1f} µs ({t / base:.1f}x)" if step != "body" else f"{t:,.1f} µs" for step, t in times.items()]
        print(f"| {name} ({len(pages[0]):,} B) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
