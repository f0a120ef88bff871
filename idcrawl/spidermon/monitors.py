"""Spidermon monitors over idcrawl's stats (optional: ``pip install 'idcrawl[monitoring]'``).

:class:`IdCrawlMonitorSuite` checks a crawl when the spider closes; each verdict also goes into the
stats. The checks: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from idcrawl.config import IdConfig, config_of
from idcrawl.core.exits import normal_reasons
from idcrawl.runtime import STATS_PREFIX

try:
    from spidermon import Action, Monitor, MonitorSuite, monitors
except ImportError as exc:  # an optional extra
    raise ImportError(f"idcrawl.spidermon.monitors needs spidermon: pip install 'idcrawl[monitoring]' ({exc})") from exc

__all__ = ["IdCrawlMonitor", "IdCrawlMonitorSuite", "VerdictsToStats"]

PREFIX = f"{STATS_PREFIX}/monitors"
_F = TypeVar("_F", bound=Callable[..., Any])


def _named(name: str) -> Callable[[_F], _F]:
    """Spidermon's ``monitors.name``, typed: the check's name in logs and in ``idcrawl/monitors/<name>``."""
    decorator: Callable[[_F], _F] = monitors.name(name)
    return decorator


class _StatsMonitor(Monitor):  # type: ignore[misc]  # spidermon is untyped
    """Base: idcrawl stats and settings of the crawl being monitored."""

    def stat(self, name: str) -> int:
        value = self.data.stats.get(f"{STATS_PREFIX}/{name}", 0)
        return int(value or 0)

    @property
    def config(self) -> IdConfig:
        return config_of(self.data.crawler)


@monitors.name("idcrawl")
class IdCrawlMonitor(_StatsMonitor):
    """idcrawl: failed ids, finish reason, incidents, overshoot, lost ids."""

    @_named("failed_ratio")
    def test_failed_ratio(self) -> None:
        """Failed ids per decided id at most IDCRAWL_MONITOR_MAX_FAILED_RATIO."""
        limit = self.config.monitor_max_failed_ratio
        failed = self.stat("failed")
        decided = sum(self.stat(name) for name in ("found", "missing", "disallowed")) + failed
        ratio = failed / decided if decided else 0.0
        self.assertLessEqual(
            ratio, limit, msg=f"{failed} of {decided} decided ids failed ({ratio:.1%} > {limit:.1%})"
        )

    @_named("finish_reason")
    def test_finish_reason(self) -> None:
        """The finish reason is one of IDCRAWL_MONITOR_FINISH_REASONS (unset: a normal completion, exit status 0)."""
        listed = self.config.monitor_finish_reasons
        expected = normal_reasons(watching=self.config.watch) if listed is None else list(listed)
        reason = self.data.stats.get("finish_reason")
        good = isinstance(reason, str) and any(
            reason.startswith(name[:-1]) if name.endswith("*") else reason == name for name in expected
        )
        self.assertTrue(good, msg=f"finish reason {reason!r} is not one of {expected}")

    @_named("incidents")
    def test_incidents(self) -> None:
        """At most IDCRAWL_MONITOR_MAX_INCIDENTS incidents were written this run."""
        limit = self.config.monitor_max_incidents
        count = self.stat("incidents")
        self.assertLessEqual(count, limit, msg=f"{count} incidents written (at most {limit} expected)")

    @_named("overshoot_ratio")
    def test_overshoot_ratio(self) -> None:
        """Found ids past a cut per found id at most IDCRAWL_MONITOR_MAX_OVERSHOOT_RATIO."""
        limit = self.config.monitor_max_overshoot_ratio
        overshoot, found = self.stat("overshoot"), self.stat("found")
        ratio = overshoot / found if found else float(overshoot > 0)
        self.assertLessEqual(
            ratio, limit,
            msg=f"{overshoot} found ids past a margin cut for {found} found ({ratio:.1%} > {limit:.1%}): "
                "the margin is too small for this site",
        )

    @_named("lost")
    def test_lost(self) -> None:
        """No id lost its request without a response or an error."""
        lost = self.stat("lost")
        self.assertEqual(lost, 0, msg=f"{lost} ids lost their request (counted as failed)")


class VerdictsToStats(Action):  # type: ignore[misc]
    """Each check's status into ``idcrawl/monitors/<check>``, plus the passed and failed counts."""

    def run_action(self) -> None:
        stats = self.data.crawler.stats
        passed = failed = 0
        for result in self.result.monitor_results:
            name = str(result.monitor.method_name)
            stats.set_value(f"{PREFIX}/{name}", result.status)
            if result.status in ("FAIL", "ERROR"):
                failed += 1
            else:
                passed += 1
        stats.set_value(f"{PREFIX}/passed", passed)
        stats.set_value(f"{PREFIX}/failed", failed)


class IdCrawlMonitorSuite(MonitorSuite):  # type: ignore[misc]
    """idcrawl's close monitors; subclass to add actions."""

    monitors: list[Any] = [IdCrawlMonitor]
    monitors_finished_actions: list[Any] = [VerdictsToStats]
