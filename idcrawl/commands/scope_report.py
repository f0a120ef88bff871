"""The URL queue of crawl scope in ``scrapy idplan``: per target, crawl profile and collection, the
queued, postponed and harvested URLs by hops (a table, and the ``scope`` part of ``--json``).

Read from the state store's URL queue (:meth:`idcrawl.state.base.StateStore.load_urls`), only read:
a SQLite file's ``urls`` table, or a distributed job's shared queue in Redis
(:class:`idcrawl.distributed.state.JobStateStore`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from idcrawl.core.safetext import safe
from idcrawl.core.urlqueue import QueueState, UrlCount, count_urls
from idcrawl.state.base import StateStore

__all__ = ["STATES", "last_refusals", "render_refusals", "render_scope", "scope_document", "scope_table",
           "url_counts"]

#: The states shown, in order (a URL taken and never answered counts as queued).
STATES = (QueueState.QUEUED, QueueState.POSTPONED, QueueState.HARVESTED)

Key = tuple[str, str, str]  # target, crawl profile, collection


def url_counts(store: StateStore, targets: Sequence[str] = ()) -> tuple[list[UrlCount], list[str]]:
    """The URL counts of the state ``store`` (of ``targets`` only, when named), and which of ``targets``
    have URLs but no lanes (page targets: the resume plan does not know them)."""
    counts = count_urls(store.load_urls())
    with_lanes = set(store.targets())
    with_urls = {c.target for c in counts}
    pages_only = [name for name in targets if name in with_urls and name not in with_lanes]
    return [c for c in counts if not targets or c.target in targets], pages_only


def last_refusals(store: StateStore) -> dict[str, int]:
    """What the last run's crawl scope refused and how its redirects went (its record's
    ``scope/traps/<rule>`` and ``scope/redirects/<what>`` counts, docs/scope.md "Traps", "Redirects")."""
    runs = store.runs()
    counts = runs[-1].counts if runs else {}
    return {key: n for key, n in sorted(counts.items()) if key.startswith(("scope/traps/", "scope/redirects/")) and n}


def render_refusals(refusals: dict[str, int], console: Console) -> None:
    """One line per kind: ``last run: links refused by traps: repeated_segment 3; redirects: known 1``."""
    for kind, words in (("traps", "links refused by traps"), ("redirects", "redirects")):
        parts = [f"{key.rsplit('/', 1)[1].replace('_', ' ')} {n:,}" for key, n in refusals.items()
                 if key.startswith(f"scope/{kind}/")]
        if parts:
            console.print(Text(f"last run: {words}: {', '.join(parts)}"))


def _grouped(counts: Iterable[UrlCount]) -> dict[Key, dict[int, dict[QueueState, int]]]:
    groups: dict[Key, dict[int, dict[QueueState, int]]] = {}
    for c in counts:
        by_hops = groups.setdefault((c.target, c.crawl_profile, c.collection), {})
        states = by_hops.setdefault(c.hops, dict.fromkeys(STATES, 0))
        states[c.state] += c.count
    return groups


def render_scope(counts: Sequence[UrlCount], console: Console) -> None:
    """One table: a row per target, crawl profile, collection and hops (nothing without URLs)."""
    if not counts:
        return
    console.print()
    console.print(scope_table(counts))
    console.print(Text("queued: waiting (or taken, no answer yet); postponed: kept for a run that finds its "
                       "target, crawl profile and collection active; harvested: answered"))


def scope_table(counts: Sequence[UrlCount]) -> Table:
    """The crawl scope's URLs: a row per target, crawl profile, collection and hops."""
    table = Table(title="crawl scope: URLs by hops", title_justify="left")
    for column in ("target", "crawl profile", "collection", "hops"):
        table.add_column(column)
    for state in STATES:
        table.add_column(state.value, justify="right")
    for (target, crawl_profile, collection), by_hops in sorted(_grouped(counts).items()):
        for hops, states in sorted(by_hops.items()):
            table.add_row(Text(safe(target)), Text(safe(crawl_profile)), Text(safe(collection or "-")), str(hops),
                          *(str(states[state]) for state in STATES))
    return table


def scope_document(counts: Sequence[UrlCount]) -> list[dict[str, Any]]:
    """The ``scope`` list of ``idplan --json`` (docs/reference/idplan-json.md)."""
    document = []
    for (target, crawl_profile, collection), by_hops in sorted(_grouped(counts).items()):
        totals = {state.value: sum(states[state] for states in by_hops.values()) for state in STATES}
        document.append({
            "target": target, "crawl_profile": crawl_profile, "collection": collection or None, **totals,
            "by_hops": [{"hops": hops, **{state.value: states[state] for state in STATES}}
                        for hops, states in sorted(by_hops.items())],
        })
    return document
