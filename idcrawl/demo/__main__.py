"""Run the demo job: start the demo site on 127.0.0.1, crawl it, report.

``python -m idcrawl.demo`` (what ``make demo`` runs) crawls both directions
from a start id with a margin and writes JSON lines; ``python -m idcrawl.demo
serve --port 8000`` only serves the site, for trying ``scrapy crawl`` by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from idcrawl.demo.site import DemoModel, IdSite

START = 12_345
MARGIN = 10
#: The demo site is our own, on 127.0.0.1: the ``fast`` profile turns politeness off (on by default, it
#: would ask the site about once a second: 4,600 pages in over an hour instead of about a minute).
OWN_SITE = ["-s", "IDCRAWL_PROFILE=fast"]


def run(output: Path, extra: list[str]) -> int:
    model = DemoModel()
    # each demo crawls a new site (a new port): its own state, beside its items, starts over each time
    state = output.parent / "demo-state.sqlite"
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{state}{suffix}").unlink(missing_ok=True)
    with IdSite(model) as site:
        output.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "scrapy", "crawl", "demo",
            "-a", f"url={site.url()}", "-a", f"start={START}", "-a", "direction=both",
            "-a", f"margin={MARGIN}", "-a", "name=demo",
            *OWN_SITE, "-s", "IDCRAWL_PROGRESS_INTERVAL=2", "-s", "LOG_LEVEL=INFO",
            "-s", f"IDCRAWL_STATE_PATH={state}", "-O", f"{output}:jsonlines", *extra,
        ]
        env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings"}
        print("demo: site at", site.url(), flush=True)
        print("demo: running", " ".join(command[1:]), flush=True)
        print("demo: IDCRAWL_PROFILE=fast turns politeness off, for this site of our own; leave it out for a site "
              "you do not own (one request at a time per host, a second or more apart: docs/politeness.md)", flush=True)
        status = subprocess.call(command, env=env)
        requests = len(site.ids())
    if status != 0:
        print(f"demo: scrapy crawl exited with status {status}", file=sys.stderr)
        return status
    ids = sorted(json.loads(line)["id"] for line in output.read_text().splitlines() if line.strip())
    expected = [i for i in range(model.low, model.high + 1) if model.exists(i)]
    print(f"demo: {len(ids)} items written to {output.resolve()}")
    print(f"demo: {requests} page requests; the site has {len(expected)} pages in {model.low}..{model.high}")
    if ids != expected:
        print("demo: the items differ from the site's pages", file=sys.stderr)
        return 1
    print("demo: every page of the site was found, nothing else")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idcrawl.demo", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    crawl = sub.add_parser("crawl", help="run the demo job (the default)")
    crawl.add_argument("-o", "--output", default="demo-output/items.jsonl")
    serve = sub.add_parser("serve", help="only serve the demo site")
    serve.add_argument("--port", type=int, default=8000)
    args, extra = parser.parse_known_args(argv)
    if args.command == "serve":
        site = IdSite(port=args.port)
        print(f"serving {site.url()} (ids {site.model.low}..{site.model.high} with gaps; 404 for the gaps) and "
              f"{site.soft_url()} (the same, a soft 404 for the gaps); Ctrl-C stops", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            site.serve_forever()
        return 0
    return run(Path(getattr(args, "output", "demo-output/items.jsonl")), extra)


if __name__ == "__main__":
    sys.exit(main())
