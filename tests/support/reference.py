"""The rules, sequentially: the ground truth every crawl must equal (the margin rule; hops of a scope)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence


def lane_truth(
    exists: Callable[[int], bool], start: int, step: int, stop: int | None, margin: int
) -> tuple[list[int], int | None]:
    """Found ids of one lane in lane order, and the id where the margin cut it."""
    found: list[int] = []
    run = 0
    id_ = start
    while id_ >= 0 and (stop is None or (id_ <= stop if step > 0 else id_ >= stop)):
        if exists(id_):
            found.append(id_)
            run = 0
        else:
            run += 1
            if margin and run >= margin:
                return found, id_
        id_ += step
    return found, None


def target_truth(
    exists: Callable[[int], bool],
    start: int,
    direction: str,
    margin: int,
    lo: int | None = None,
    hi: int | None = None,
) -> list[int]:
    """Sorted found ids of a whole target (both = asc from start + desc from start-1)."""
    ids: list[int] = []
    if direction in ("asc", "both"):
        ids += lane_truth(exists, start, 1, hi, margin)[0]
    if direction == "desc":
        ids += lane_truth(exists, start, -1, lo, margin)[0]
    if direction == "both":
        ids += lane_truth(exists, start - 1, -1, lo, margin)[0]
    return sorted(ids)


def scope_truth(
    links: Mapping[str, Sequence[str]], seed: str, max_hops: int, on_site: Callable[[str], bool]
) -> dict[str, int]:
    """The pages a crawl of one seed fetches: a breadth-first walk of the link graph ``links`` from
    ``seed`` (hop 0) through pages ``on_site`` accepts, to ``max_hops`` links; each page's hops."""
    hops = {seed: 0}
    queue = deque([seed])
    while queue:
        page = queue.popleft()
        if hops[page] == max_hops:
            continue
        for link in links.get(page, ()):
            if link not in hops and on_site(link):
                hops[link] = hops[page] + 1
                queue.append(link)
    return hops


def scope_states_truth(
    links: Mapping[str, Sequence[str]], seed: str, accept: Callable[[str, int, int], bool]
) -> set[str]:
    """The pages reached from ``seed`` when a link is followed if ``accept(url, hops, offsite_hops)``:
    a breadth-first walk of (page, hops, off-site hops) states, the off-site counter as seed 003's
    last section says (0 while each link stays on its referrer's host, then +1 per link)."""
    from urllib.parse import urlsplit

    start = (seed, 0, 0)
    seen = {start}
    queue = deque([start])
    while queue:
        page, hops, offsite = queue.popleft()
        for link in links.get(page, ()):
            leaves = offsite > 0 or urlsplit(link).hostname != urlsplit(page).hostname
            state = (link, hops + 1, offsite + 1 if leaves else 0)
            if state not in seen and accept(*state):
                seen.add(state)
                queue.append(state)
    return {page for page, _, _ in seen}


def recrawl_durations_truth(
    initial: float, news: Sequence[bool], inc_rate: float, dec_rate: float, lo: float, hi: float
) -> list[float]:
    """The seed's rule, one visit at a time: every duration after each visit (motivate on news, else
    penalise, then clamp to [lo, hi] with explicit comparisons)."""
    d = initial if lo <= initial <= hi else (lo if initial < lo else hi)
    out: list[float] = []
    for found in news:
        d = d * (1 - dec_rate) if found else d * (1 + inc_rate)
        if d < lo:
            d = lo
        if d > hi:
            d = hi
        out.append(d)
    return out


def due_order_truth(things: Sequence[tuple[str, str, float, float]], now: float) -> list[str]:
    """Keys of (kind, key, last_crawled, duration) things due at ``now`` in fetch order: all due tails,
    then all due pages; within each, most overdue first by pairwise comparison (insertion sort on
    (now - last) / duration), ties by key."""
    order: list[str] = []
    for kind in ("tail", "page"):
        picked: list[tuple[float, str]] = []
        for k, key, last, duration in things:
            if k != kind or not now - last > duration:
                continue
            ratio = (now - last - duration) / duration
            i = 0
            while i < len(picked) and (picked[i][0] > ratio or (picked[i][0] == ratio and picked[i][1] < key)):
                i += 1
            picked.insert(i, (ratio, key))
        order += [key for _, key in picked]
    return order


def yield_shares_truth(
    urls: Sequence[tuple[str, str]], collection_yields: Mapping[str, float], profile_yields: Mapping[str, float]
) -> dict[tuple[str, str], float]:
    """The chance that each (collection, crawl profile) gets a host slot when ``urls`` (one pair per
    ready URL) contend for it, by the seed's rule taken literally, URL by URL: draw one of the URLs
    left uniformly; while another collection is left, the drawn URL's collection gives way with its
    yield probability (all its URLs leave the draw); then the same among the crawl profiles of the
    collection that kept the slot. Enumerated exactly (small inputs only)."""
    shares: dict[tuple[str, str], float] = {}

    def level(left: tuple[tuple[str, str], ...], key: int, yields: Mapping[str, float], weight: float,
              then: Callable[[tuple[tuple[str, str], ...], float], None]) -> None:
        if len({url[key] for url in left}) == 1:
            then(left, weight)
            return
        for url in left:
            drawn = weight / len(left)
            group = url[key]
            then(tuple(u for u in left if u[key] == group), drawn * (1 - yields[group]))
            if yields[group]:
                level(tuple(u for u in left if u[key] != group), key, yields, drawn * yields[group], then)

    def keep(left: tuple[tuple[str, str], ...], weight: float) -> None:
        if weight:
            shares[left[0]] = shares.get(left[0], 0.0) + weight

    level(tuple(urls), 0, collection_yields, 1.0,
          lambda left, weight: level(left, 1, profile_yields, weight, keep))
    return shares
