"""Watch mode's rule: when the next wave of a watching crawl starts, what it takes, how long it sleeps until then.

No Scrapy here: the shell is ``idcrawl.extensions.watch.IdWatch``. The rule: docs/recrawl.md,
"Watch mode", and docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from idcrawl.core.inputs import TargetError
from idcrawl.core.recrawl import Schedule, due
from idcrawl.core.targets import RESET_MODES, Target

__all__ = [
    "NO_COALESCING", "TICK", "Coalescing", "late_times", "next_wave_at", "parse_watch", "real_sleep", "watch_targets",
    "wave_key",
]

#: Seconds after a schedule's ``due_at()`` at which a wave starts: due is strict (``>``), and the
#: recorded times have millisecond precision.
TICK = 0.001


@dataclass(frozen=True, slots=True)
class Coalescing:
    """A watch wave's coalescing window (issue 31, finding 2): a wave starting at ``now`` takes every
    schedule due by ``now + window(its duration)``, so that pages falling due close together share one
    wave (and, visited at the wave's time, stay together) instead of waking one wave each.

    ``window(d) = max(floor, min(share * d, cap))``: a minute at least, and a page is fetched at most a
    ``share`` of its duration early (5% by default), never more than ``cap`` early. docs/recrawl.md,
    "Coalescing waves"."""

    floor: float = 60.0
    share: float = 0.05
    cap: float = 3600.0

    def window(self, duration: float) -> float:
        """How far ahead of its due time a schedule of ``duration`` seconds joins a wave."""
        return max(self.floor, min(self.share * duration, self.cap))

    @property
    def widest(self) -> float:
        """The widest window of any schedule (an index read of due times reaches this far)."""
        return max(self.floor, self.cap if self.share > 0 else 0.0)

    def due(self, schedule: Schedule, now: float) -> bool:
        """Whether a wave starting at ``now`` takes ``schedule`` (due, or due within its window)."""
        return due(schedule, now + self.window(schedule.update_duration))


#: No coalescing: a wave takes what is due at its start, as a run without watch mode does.
NO_COALESCING = Coalescing(0.0, 0.0, 0.0)



def wave_key(wave_at: float) -> int:
    """The key of a watching fleet's wave: its time in whole milliseconds (the precision of the
    recorded times). Every worker computes the wave's time from the same schedules in Redis
    (:func:`next_wave_at`), so the workers awake for one wave name it alike and join one plan."""
    return round(wave_at * 1000)


def next_wave_at(
    schedules: Iterable[Schedule], now: float, tick: float = TICK, *,
    pages: Iterable[float | None] = (), harvests: Iterable[float | None] = (),
) -> float | None:
    """The time of the next wave after one that ended at ``now``: the earliest moment something
    falls due. ``schedules`` (the tails) and ``pages`` (the ``due_at()`` of found pages' schedules:
    the earliest of each target's is enough) are due strictly after their due time: a tick after
    the earliest not due at ``now``; one still due after the wave is not waited for (the wave did
    not walk it to its end: a limit stopped it, or it has nothing left to walk), the next wave walks
    it if it can. ``harvests``: next harvest times of crawl scope's URLs (a crawl profile's
    ``revisit``), due from that moment on (:meth:`idcrawl.core.urlqueue.MemoryUrlQueue.take`), at it;
    one that came while the wave had no more turns to take it (only the real clock moves during a
    wave) a tick after ``now``. None stands for nothing. None: nothing will fall due, the watch is
    over. ``tick``: a test's unit of time (1 with integer times: exact arithmetic)."""
    moments = [at + tick for at in (*(schedule.due_at() for schedule in schedules), *pages)
               if at is not None and at >= now]
    moments += [max(at, now + tick) for at in harvests if at is not None]
    return min(moments, default=None)


def late_times(targets: Iterable[Target], schedules: Iterable[Schedule]) -> list[float]:
    """When each target's next re-probe of its late ids falls due (``late_every`` after the last one,
    :func:`idcrawl.core.resume.late_due`; a tail's schedule keeps ``late_at``), so that a watch wakes a
    wave for it (as :func:`next_wave_at`'s ``pages``: due strictly after). A tail never re-probed has
    none: its first re-probe rides with the next wave that its tail or a page wakes."""
    every = {t.name: t.policy.late_every for t in targets if t.resume == "due" and t.policy.late_every > 0}
    return [schedule.late_at + every[schedule.key] for schedule in schedules
            if schedule.key in every and schedule.late_at is not None and schedule.last_found is not None]


def real_sleep(wave_at: float, now: float, speed: float = 1.0) -> float:
    """Real seconds to sleep from ``now`` to ``wave_at`` (simulated seconds) at ``speed`` simulated
    seconds per real second (> 0); 0 when the wave is due already."""
    if speed <= 0:
        raise ValueError(f"speed must be > 0 ({speed})")
    return max(0.0, wave_at - now) / speed


def parse_watch(value: Any) -> bool:
    """The ``watch`` spider argument: true or false (also yes/no, 1/0); anything else is one line,
    ``watch='maybe': must be true or false``."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0", ""):
        return False
    raise TargetError("watch", value, "must be true or false")


def watch_targets(targets: Sequence[Target]) -> list[Target]:
    """The targets of a watching crawl: every wave is a ``resume=due`` run, so a target's ``resume``
    becomes ``due`` when it is ``auto`` (the default) or ``due``; another mode is refused in one line
    (a wave of ``bound`` or ``holes`` would walk the same lanes again and again, one of ``reset`` would
    forget the last wave)."""
    watched: list[Target] = []
    for target in targets:
        if target.resume not in ("auto", "due"):
            raise TargetError(
                "resume", target.resume,
                "watch=true runs resume=due waves (leave resume unset or give due"
                + ("; to start over, run once with resume=reset and without watch first)"
                   if target.resume in RESET_MODES else ")"),
                where=f"target {target.name!r}",
            )
        watched.append(target if target.resume == "due" else target.with_resume("due"))
    return watched
