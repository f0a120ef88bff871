"""The rules, sequentially: the ground truth every crawl must equal (the margin rule; hops of a scope;
the recrawl rule with signatures, Last-Modified sync and forced refetches)."""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable, Container, Mapping, Sequence
from html.parser import HTMLParser


def lane_truth(
    exists: Callable[[int], bool], start: int, step: int, stop: int | None, margin: int, reach: int | None = None
) -> tuple[list[int], int | None]:
    """Found ids of one lane in lane order, and the id where the margin cut it. ``reach``: misses at
    or before it (in lane order) do not count: the cut is counted from the later of the last found id
    and the reach."""
    found: list[int] = []
    run = 0
    id_ = start
    while id_ >= 0 and (stop is None or (id_ <= stop if step > 0 else id_ >= stop)):
        if exists(id_):
            found.append(id_)
            run = 0
        elif reach is None or (id_ - reach) * step > 0:
            run += 1
            if margin and run >= margin:
                return found, id_
        id_ += step
    return found, None


def shared_emitter_truth(
    lanes: Sequence[tuple[str, int, int, int | None, int]], exists: Callable[[int], bool]
) -> dict[int, str]:
    """Which lane emits each found id of lanes (key, start, step, stop, margin) that walk one id
    space: of the lanes whose found ids (``lane_truth``) hold it, the one with the fewest steps
    from its start to it, ties by the smaller key."""
    best: dict[int, tuple[int, str]] = {}
    for key, start, step, stop, margin in lanes:
        for id_ in lane_truth(exists, start, step, stop, margin)[0]:
            rank = ((id_ - start) * step, key)
            if id_ not in best or rank < best[id_]:
                best[id_] = rank
    return {id_: key for id_, (_, key) in best.items()}


def earliest_cut_truth(
    known: Mapping[int, str], start: int, step: int, margin: int, neutral: Container[str] = (),
    reach: int | None = None,
) -> tuple[int | None, int]:
    """Where the margin would cut a lane from ``start`` if every id without a known outcome
    (``known``: id -> "found", "missing", ...) were a miss; and the window base: the id just
    after the last found id before that cut (``start`` when none). Without a margin: (None, start).
    ``reach``: as :func:`lane_truth`'s."""
    if not margin:
        return None, start
    run, base, id_ = 0, start, start
    while True:
        outcome = known.get(id_)
        if outcome == "found":
            run, base = 0, id_ + step
        elif outcome not in neutral and (reach is None or (id_ - reach) * step > 0):
            run += 1
            if run >= margin:
                return id_, base
        id_ += step


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


def revisit_truth(
    hops: Mapping[str, int], max_hops: Sequence[int], runs: Sequence[tuple[float, Sequence[float | None]]]
) -> list[set[str]]:
    """The pages each run fetches when every run finishes its walk: ``hops`` the pages of the walk
    (page -> hops from the seed), ``max_hops`` and, per run, ``(time, revisit)`` of each crawl
    profile (None: no revisit frequency). A page is fetched by the first run, then by a run at a
    time at least its last fetch + the shortest revisit among the crawl profiles whose max_hops
    reach it (none: never again)."""
    last: dict[str, float] = {}
    fetched_by_run: list[set[str]] = []
    for now, revisits in runs:
        fetched: set[str] = set()
        for page, h in hops.items():
            freqs = [r for m, r in zip(max_hops, revisits, strict=True) if m >= h and r is not None]
            if page not in last or (freqs and last[page] + min(freqs) <= now):
                fetched.add(page)
                last[page] = now
        fetched_by_run.append(fetched)
    return fetched_by_run


def watch_visits_truth(
    things: Mapping[str, tuple[int, Sequence[int]]], start: int, horizon: int,
    harvests: Mapping[str, tuple[int, Sequence[int]]] | None = None,
) -> list[tuple[int, str]]:
    """Watch mode as a timer that fires every tick (a millisecond of the real watch): ``things`` maps
    a name to its last crawl time and the durations its visits set in turn (in ticks; the last one
    repeats). At each tick from ``start`` to ``horizon`` every thing due then (``now - last >
    duration``) is visited: ``(time, name)`` in time order, then by name. ``harvests``: crawl scope's
    URLs the same way (their last harvest, their revisit frequencies), due from their next harvest
    on (``now - last >= revisit``); names apart from ``things``'."""
    harvests = harvests or {}
    last = {name: first for name, (first, _) in (*things.items(), *harvests.items())}
    duration = {name: durations[0] for name, (_, durations) in (*things.items(), *harvests.items())}
    visits_of = dict.fromkeys([*things, *harvests], 0)
    visits: list[tuple[int, str]] = []
    for now in range(start, horizon + 1):
        for name in sorted([*things, *harvests]):
            if now - last[name] > duration[name] or (name in harvests and now - last[name] >= duration[name]):
                visits.append((now, name))
                visits_of[name] += 1
                durations = (harvests[name] if name in harvests else things[name])[1]
                last[name] = now
                duration[name] = durations[min(visits_of[name], len(durations) - 1)]
    return visits


def page_revisits_truth(
    fetches: Sequence[tuple[int, str, str | None, float]], gone_limit: int, initial: float,
    inc_rate: float, dec_rate: float, lo: float, hi: float,
) -> tuple[list[tuple[str, int]], dict[int, tuple[str | None, int, float, int]]]:
    """Fetches of found pages in time order, ``(id, answer, checksum, at)`` with answer ``200``, ``304``,
    ``missing`` or ``failed``: what each meant (event, item revision or 0) and the record of every page
    on the schedule at the end (checksum, revision, duration, gone count), kept in plain dicts.

    A page first answering 200 is new (revision 1); a 200 with another checksum than the stored one
    is a change (revision + 1), whatever the last answer was; a 200 with the same checksum is
    unchanged; a 304 is not modified; missing is gone, and the ``gone_limit``-th gone in a row leaves the schedule (the
    record stays, off the schedule: a later answer applies to it as to any record);
    failed, a fetch at or before the last applied one, or a 304/missing of a page without a record,
    is nothing. Motivate on a change, penalise otherwise, clamp to [lo, hi]."""
    records: dict[int, dict[str, object]] = {}
    events: list[tuple[str, int]] = []
    for id_, answer, checksum, at in fetches:
        page = records.get(id_)
        if page is None:
            if answer == "200":
                records[id_] = {"checksum": checksum, "revision": 0, "d": min(hi, max(lo, initial)), "gone": 0,
                                "last": at, "status": 200}
                events.append(("new", 1))
            else:
                events.append(("none", 0))
            continue
        if answer == "failed" or at <= page["last"]:  # type: ignore[operator]
            events.append(("none", 0))
            continue
        news = answer == "200" and checksum != page["checksum"]
        d = float(page["d"])  # type: ignore[arg-type]
        d = d * (1 - dec_rate) if news else d * (1 + inc_rate)
        d = lo if d < lo else hi if d > hi else d
        if answer == "missing":
            gone = int(page["gone"]) + 1  # type: ignore[call-overload]
            if gone >= gone_limit:  # kept, off the schedule, its duration as it was
                page.update(gone=gone, last=at)
                events.append(("left_schedule", 0))
                continue
            page.update(gone=gone, d=d, last=at)
            events.append(("gone", 0))
            continue
        page.update(gone=0, d=d, last=at)
        if answer == "304":
            page["status"] = 304
            events.append(("not_modified", 0))
            continue
        page.update(status=200, checksum=checksum)
        if news:
            page["revision"] = int(page["revision"]) + 1  # type: ignore[call-overload]
            events.append(("changed", int(page["revision"]) + 1))  # type: ignore[call-overload]
        else:
            events.append(("unchanged", 0))
    left = {i: (p["checksum"], p["revision"], p["d"], p["gone"]) for i, p in records.items()
            if int(p["gone"]) < gone_limit}  # type: ignore[call-overload]
    return events, left  # type: ignore[return-value]



def page_due_truth(
    records: Mapping[int, tuple[float, float, int]], found: Sequence[int], now: float, gone_limit: int, target: str
) -> tuple[list[int], float | None]:
    """Found pages of ``target`` by id -> (last_crawled, duration, gone): the ids a due run at ``now`` fetches
    (found ids without a record first, in id order; then the due pages on the schedule, ``gone <
    gone_limit``, by :func:`due_order_truth`), and the earliest due time not before ``now`` of a page on
    the schedule (None: none)."""
    unknown = sorted(i for i in set(found) if i not in records)
    scheduled = {i: r for i, r in records.items() if r[2] < gone_limit}
    order = due_order_truth([("page", f"{target}/{i}", r[0], r[1]) for i, r in scheduled.items()], now)
    by_key = {f"{target}/{i}": i for i in scheduled}
    later = [r[0] + r[1] for r in scheduled.values() if r[0] + r[1] >= now]
    return unknown + [by_key[key] for key in order], min(later) if later else None


class _Visible(HTMLParser):
    """The text of an HTML page outside script, style, noscript and template elements (stdlib parser)."""

    HIDDEN = frozenset({"script", "style", "noscript", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.HIDDEN:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN and self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.parts.append(data)


def signature_truth(content: str, mode: str, drop: Sequence[str]) -> str:
    """A page's signature by the documented rule: ``body``: sha1 of the content (each ``drop`` pattern
    removed in turn, when there are any); ``text``: sha1 of its visible text, whitespace folded to
    single spaces, each pattern removed in turn, folded again."""
    if mode == "text":
        parser = _Visible()
        parser.feed(content)
        parser.close()
        text = " ".join(" ".join(parser.parts).split())
        for pattern in drop:
            text = re.sub(pattern, "", text)
        content = " ".join(text.split())
    else:
        for pattern in drop:
            content = re.sub(pattern, "", content)
    return hashlib.sha1(content.encode()).hexdigest()


def page_signals_truth(
    fetches: Sequence[tuple[int, str, str | None, float | None, float]], *, mode: str, drop: Sequence[str],
    sync: bool, refetch_after: float, gone_limit: int, initial: float, inc_rate: float, dec_rate: float,
    lo: float, hi: float,
) -> tuple[list[tuple[str, int]], list[bool], dict[int, tuple[float, int]]]:
    """Fetches of found pages in time order, ``(id, answer, content, last_modified, at)``: answer
    ``200`` (``content`` the body, ``last_modified`` the server's Last-Modified in epoch seconds or
    None), ``304`` (its ``last_modified`` likewise) or ``missing``. Returns what each meant
    (event, item revision or 0), whether each fetch of a page with a record was a forced
    unconditional one (its last 200 more than ``refetch_after`` before, ``refetch_after`` > 0),
    and each page's (duration, revision) at the end.

    News = a signature (:func:`signature_truth`) other than the stored one. ``modified``: the latest
    known change, the Last-Modified (no later than the fetch) of the first 200, raised by every later
    answer's, set to the fetch time by news. With ``sync`` an answer without news sets the duration
    to at least ``at - modified`` before clamping. Motivate on news, else penalise, clamp."""
    pages: dict[int, dict[str, float | int | str | None]] = {}
    events: list[tuple[str, int]] = []
    forced: list[bool] = []
    for id_, answer, content, last_modified, at in fetches:
        seen = None if last_modified is None else min(last_modified, at)
        page = pages.get(id_)
        if page is None:
            forced.append(False)
            if answer == "200":
                assert content is not None
                pages[id_] = {"sig": signature_truth(content, mode, drop), "d": min(hi, max(lo, initial)),
                              "rev": 0, "gone": 0, "last": at, "body": at, "modified": seen}
                events.append(("new", 1))
            else:
                events.append(("none", 0))
            continue
        forced.append(refetch_after > 0 and at - float(page["body"]) > refetch_after)  # type: ignore[arg-type]
        if at <= float(page["last"]):  # type: ignore[arg-type]
            events.append(("none", 0))  # a replay
            continue
        d = float(page["d"])  # type: ignore[arg-type]
        if answer == "missing":  # the gone_limit-th gone in a row: off the schedule, its duration as it was
            page["gone"] = int(page["gone"]) + 1  # type: ignore[call-overload]
            page["last"] = at
            if int(page["gone"]) < gone_limit:  # type: ignore[call-overload]
                page["d"] = min(hi, max(lo, d * (1 + inc_rate)))
                events.append(("gone", 0))
            else:
                events.append(("left_schedule", 0))
            continue
        page["gone"], page["last"] = 0, at
        news = False
        if answer == "200":
            assert content is not None
            sig = signature_truth(content, mode, drop)
            news = sig != page["sig"]
            page["sig"], page["body"] = sig, at
        if news:
            page["modified"] = at
            page["d"] = min(hi, max(lo, d * (1 - dec_rate)))
            page["rev"] = int(page["rev"]) + 1  # type: ignore[call-overload]
            events.append(("changed", int(page["rev"]) + 1))  # type: ignore[call-overload]
            continue
        old = page["modified"]
        if seen is not None:
            page["modified"] = seen if old is None else max(float(old), seen)  # type: ignore[arg-type]
        longer = d * (1 + inc_rate)
        if sync and page["modified"] is not None and at - float(page["modified"]) > longer:  # type: ignore[arg-type]
            longer = at - float(page["modified"])  # type: ignore[arg-type]
        page["d"] = min(hi, max(lo, longer))
        events.append(("not_modified", 0) if answer == "304" else ("unchanged", 0))
    return events, forced, {i: (float(p["d"]), int(p["rev"])) for i, p in pages.items()}  # type: ignore[arg-type, call-overload]
def _segments(url: str) -> tuple[str, tuple[str, ...]]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return (parts.hostname or "").lower(), tuple(s for s in parts.path.split("/") if s)


def scope_claims_truth(
    links: Mapping[str, Sequence[str]], seeds: Mapping[str, str], admits: Callable[[str, str, int, int], bool]
) -> dict[str, dict[str, set[tuple[int, int]]]]:
    """Every seed's walk on its own, to a fixpoint, in no order: page -> seed -> the (hops, off-site
    hops) of every path of that seed's walk to it. ``seeds``: name -> its hop-0 page; a link is
    followed by seed ``name`` when ``admits(name, url, hops, offsite)`` (its crawl profiles' rules)."""
    from urllib.parse import urlsplit

    claims: dict[str, dict[str, set[tuple[int, int]]]] = {}
    for name, start in seeds.items():
        seen = {(start, 0, 0)}
        queue = deque(seen)
        while queue:
            page, hops, offsite = queue.popleft()
            for link in links.get(page, ()):
                leaves = offsite > 0 or urlsplit(link).hostname != urlsplit(page).hostname
                state = (link, hops + 1, offsite + 1 if leaves else 0)
                if state not in seen and admits(name, *state):
                    seen.add(state)
                    queue.append(state)
        for page, hops, offsite in seen:
            claims.setdefault(page, {}).setdefault(name, set()).add((hops, offsite))
    return claims


def scope_owner_truth(url: str, claimants: Mapping[str, str], hop0: Container[str] = ()) -> str:
    """docs/scope.md's owner of ``url`` among ``claimants`` (name -> seed URL; ``hop0``: those whose
    hop-0 page it is), no revisits (every next harvest time alike): a claimant whose seed URL it is
    first; then, when two or more share its host (its registered domain, for the .test hosts of the
    tests), the one whose seed path begins the URL's with the most segments; then the smallest name."""
    host, path = _segments(url)
    shared = [name for name, seed in claimants.items() if _segments(seed)[0] == host]

    def rank(name: str) -> tuple[bool, int, str]:
        seed_host, seed_path = _segments(claimants[name])
        first = name in hop0 or (seed_host, seed_path) == (host, path)
        spec = -1
        if len(shared) >= 2 and name in shared and path[: len(seed_path)] == seed_path:
            spec = 1 + len(seed_path)
        return (not first, -spec, name)

    return min(claimants, key=rank)


def scope_walk_truth(
    links: Mapping[str, Sequence[str]], seeds: Mapping[str, str], admits: Callable[[str, str, int, int], bool]
) -> dict[str, tuple[str, tuple[int, int]]]:
    """What a multi-seed scope crawl fetches, whatever the order: page -> (its owner, the owner's
    fewest (hops, off-site hops)); every page some seed's walk (:func:`scope_claims_truth`) reaches."""
    truth: dict[str, tuple[str, tuple[int, int]]] = {}
    for page, by_seed in scope_claims_truth(links, seeds, admits).items():
        hop0 = {name for name, paths in by_seed.items() if (0, 0) in paths}
        owner = scope_owner_truth(page, {name: seeds[name] for name in by_seed}, hop0)
        truth[page] = (owner, min(by_seed[owner]))
    return truth


def late_passes_truth(
    missing: Sequence[int], found: set[int], cap: int, exists: Callable[[int], bool], times: int
) -> list[list[int]]:
    """The ids of ``times`` re-probes of late ids in a row (ids that exist by then are found by the
    first re-probe that takes them): each takes the late ids (missing, below the highest found id) in
    descending order, going on from just below the last id the one before took and, at the bottom,
    from the top again, never one id twice, at most ``cap``."""
    found, missing_now = set(found), set(missing)
    passes: list[list[int]] = []
    below: int | None = None
    for _ in range(times):
        top = max(found)
        late = sorted((i for i in missing_now if i < top), reverse=True)
        if not late:
            passes.append([])
            below = None
            continue
        under = [i for i in late if below is None or i < below]
        over = [i for i in late if below is not None and i >= below]
        taken = (under + over)[:cap]
        passes.append(taken)
        below = taken[-1]
        for id_ in taken:
            if exists(id_):
                found.add(id_)
                missing_now.discard(id_)
    return passes



def url_news_truth(
    answers: Sequence[tuple[str, str | None, str | None]],
) -> tuple[list[bool], str | None, str | None, int | None]:
    """A crawl-scope page's answers in turn, ``(answer, checksum, capture)`` with answer ``200``, ``304``,
    ``404`` or ``error`` (``capture``: the WARC response record a 200 wrote, None: none written): whether
    each gives an item, then the signature and capture kept at the end, and the position of the answer
    whose body was read last (the forced refetch's clock), in plain variables.

    A 200 gives an item when its checksum is not the one kept (none kept yet: always), and keeps its
    checksum, its capture if it wrote one, and its position; a 304, a 404 and an error give none and keep all."""
    kept: str | None = None
    capture: str | None = None
    last_read: int | None = None
    items: list[bool] = []
    for position, (answer, checksum, written) in enumerate(answers):
        if answer != "200":
            items.append(False)
            continue
        items.append(kept is None or checksum != kept)
        kept = checksum
        last_read = position
        if written is not None:
            capture = written
    return items, kept, capture, last_read
