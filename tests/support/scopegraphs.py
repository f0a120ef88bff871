"""Multi-seed link graphs for crawl-scope order tests in real crawls: a job file for one, and the
reference walk (:func:`tests.support.reference.scope_walk_truth`) in the addresses a crawl requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from idcrawl.core.scope import ScopeKind, canonical
from tests.support.linkgraph import LinkGraphSite
from tests.support.reference import scope_walk_truth

__all__ = ["FINDING_1", "on_site", "write_job"]

#: Issue 30, finding 1: seeds A (max_hops 1) and B (max_hops 3), scope any, both link to gamma/x -> /y -> /z.
FINDING_1: dict[str, Any] = {
    "links": {"http://alpha.test/": ["http://gamma.test/x"], "http://beta.test/": ["http://gamma.test/x"],
              "http://gamma.test/x": ["http://gamma.test/y"], "http://gamma.test/y": ["http://gamma.test/z"]},
    "seeds": {"A": "http://alpha.test/", "B": "http://beta.test/"},
    "profiles": {"A": [("one", 1, None, ScopeKind.ANY)], "B": [("three", 3, None, ScopeKind.ANY)]},
}


def write_job(path: Path, site: LinkGraphSite, seeds: dict[str, str],
              profiles: dict[str, list[tuple[str, int, int | None, ScopeKind]]]) -> Path:
    """A job file: each seed a page target on ``site`` with its crawl profiles (name, max hops, max
    off-site hops, scope)."""
    lines: list[str] = []
    for listed in profiles.values():
        for name, hops, offsite, kind in listed:
            lines += ["[[crawl_profiles]]", f'name = "{name}"', f"max_hops = {hops}", f'scope = "{kind.value}"']
            if offsite is not None:
                lines.append(f"max_offsite_hops = {offsite}")
    for seed, page in seeds.items():
        lines += ["[[targets]]", f'name = "{seed}"', f'url = "{site.url(page)}"',
                  f"crawl_profiles = {json.dumps([p[0] for p in profiles[seed]])}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def on_site(site: LinkGraphSite, links: dict[str, list[str]], seeds: dict[str, str],
            admits: Any) -> dict[str, tuple[str, tuple[int, int]]]:
    """The reference walk of the graph as ``site`` serves it: canonical URL (with the port) -> (owner,
    (hops, off-site hops)). ``admits(seed, url, hops, offsite)`` as the seed's crawl profiles."""
    def at(page: str) -> str:
        return canonical(site.url(page))

    return scope_walk_truth({at(page): [at(link) for link in targets] for page, targets in links.items()},
                            {name: at(page) for name, page in seeds.items()}, admits)
