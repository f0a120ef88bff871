"""Simulated pages with a known change interval T, revisited by the core's rule (issue 17, "Convergence").

Each page changes periodically (every T, a random phase) or as a Poisson process
(mean gap T); a visit happens one second after the page falls due and finds news
when the page changed since the last visit. Seeded: the figures are the same on
every run. ``python -m tests.support.recrawl_sim`` prints the table of docs/recrawl.md.
"""

from __future__ import annotations

import bisect
import random

from idcrawl.core.recrawl import DEFAULT_POLICY, Fetch, Outcome, Policy, page_schedule, visit_page

HOUR = 3600.0
DAY = 86_400.0
INTERVALS = (("1 h", HOUR), ("6 h", 6 * HOUR), ("1 d", DAY), ("7 d", 7 * DAY))


def learned_duration(t: float, poisson: bool, seed: int, visits: int = 30, policy: Policy = DEFAULT_POLICY) -> float:
    """The update duration of one page with change interval ``t`` after ``visits`` revisits."""
    rng = random.Random(seed)
    changes: list[float] = []
    moment = rng.expovariate(1 / t) if poisson else rng.uniform(0, t)
    schedule = page_schedule("page", 0.0, "v0", policy=policy)
    for _ in range(visits):
        now = schedule.due_at() + 1.0
        while moment <= now:
            changes.append(moment)
            moment += rng.expovariate(1 / t) if poisson else t
        version = bisect.bisect_right(changes, now)
        visit = visit_page(schedule, Fetch(Outcome.OK, checksum=f"v{version}"), now, policy)
        assert visit.schedule is not None
        schedule = visit.schedule
    return schedule.update_duration


def within_factor_2(policy: Policy = DEFAULT_POLICY, pages: int = 200, visits: int = 30) -> dict[tuple[str, str], float]:
    """Share of ``pages`` pages (seeds 0..pages-1) per (process, T) whose learned duration is in [T/2, 2T]."""
    shares: dict[tuple[str, str], float] = {}
    for process in ("periodic", "poisson"):
        for label, t in INTERVALS:
            ok = 0
            for seed in range(pages):
                d = learned_duration(t, process == "poisson", seed, visits, policy)
                ok += t / 2 <= d <= 2 * t
            shares[(process, label)] = ok / pages
    return shares


def main() -> None:
    for name, policy in (("Nutch's numbers (inc 0.4, dec 0.2)", Policy(inc_rate=0.4, dec_rate=0.2)),
                         ("the defaults (inc 0.8, dec 0.2)", DEFAULT_POLICY)):
        shares = within_factor_2(policy)
        print(name, " ".join(f"{p}/{t}={s:.3f}" for (p, t), s in shares.items()),
              f"all={sum(shares.values()) / len(shares):.3f}")


if __name__ == "__main__":
    main()
