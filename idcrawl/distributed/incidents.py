"""Incidents of a distributed job: every worker pushes to one Redis list; one command writes the XML.

:class:`RedisIncidentLog` pushes each incident onto the job's ``incidents`` list;
``scrapy idjob incidents -o FILE`` drains it into one XML log. docs/distributed.md; why a list, and
how a drain loses none: docs/architecture.md ("Module notes").
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from idcrawl.extensions.incidents import Incident, IncidentLog
from idcrawl.state.keys import JobKeys

__all__ = ["RedisIncidentLog", "drain_incidents", "incident_log"]

logger = logging.getLogger(__name__)


class RedisIncidentLog(IncidentLog):
    """An :class:`IncidentLog` whose ``append`` pushes onto ``<job prefix>incidents`` (no file).

    During a Redis outage incidents wait in memory and go with the next push; any
    still unsent when the worker closes are written to the local XML log at
    ``fallback`` (the single-process path), so none is lost with the worker.
    """

    def __init__(self, client: Any, prefix: str, fallback: Path | None = None) -> None:
        # no super().__init__(): there is no file to load
        self.client = client
        self.key = JobKeys(prefix).incidents
        self.path = Path(f"redis-{self.key}")
        self.fallback = fallback
        self._unsent: list[Incident] = []

    def __len__(self) -> int:
        try:
            return int(self.client.llen(self.key)) + len(self._unsent)
        except RedisError:
            return len(self._unsent)

    def append(self, incident: Incident) -> None:
        self._unsent.append(incident)
        self._push()

    def _push(self) -> bool:
        """Push what waits, oldest first; False if Redis did not answer (they keep waiting)."""
        while self._unsent:
            try:
                self.client.rpush(self.key, pickle.dumps(self._unsent[0], protocol=pickle.HIGHEST_PROTOCOL))
            except RedisError as exc:
                logger.warning("idcrawl: %d incidents wait for Redis (%s)", len(self._unsent), exc)
                return False
            self._unsent.pop(0)
        return True

    def close(self) -> None:
        """Push what waits; if Redis still does not answer, write it to the local fallback log."""
        if self._push() or self.fallback is None:
            if self._unsent:
                logger.error("idcrawl: %d incidents could not be sent to Redis and are lost", len(self._unsent))
            return
        log = IncidentLog(self.fallback)
        for incident in self._unsent:
            log.append(incident)
        logger.error("idcrawl: Redis did not answer at close: %d incidents written to %s instead (merge them "
                     "with scrapy idjob incidents' output)", len(self._unsent), self.fallback)
        self._unsent = []


def drain_incidents(client: Any, prefix: str, path: str | Path) -> int:
    """Move the job's incidents into the XML log at ``path`` (created if missing); returns how many."""
    log = IncidentLog(path)
    key = JobKeys(prefix).incidents
    moved = 0
    while True:
        raw = client.lindex(key, 0)
        if raw is None:
            return moved
        log.append(pickle.loads(raw))  # noqa: S301 - written by this job's own workers
        client.lpop(key)
        moved += 1


def incident_log(
    settings: Any, spider_name: str, fallback: Path | None = None, stats: Any = None,
) -> RedisIncidentLog:
    """The incident log of a distributed worker (RedisUnavailable if Redis cannot be reached); ``stats``
    counts its calls to Redis."""
    from idcrawl.distributed.connection import connect, job_prefix

    return RedisIncidentLog(connect(settings, stats=stats), job_prefix(settings, spider_name), fallback)
