"""Incidents of a distributed job: every worker pushes to one Redis list; one command writes the XML.

Workers cannot share one XML file (they may run on different machines, and
the file is rewritten whole on each append so that it is valid at every
moment). So a worker's incident log is :class:`RedisIncidentLog`: ``append``
pushes the incident (pickled plain data) onto the job's ``incidents`` list.
``scrapy idjob incidents -o FILE`` drains it into one
:class:`idcrawl.incidents.IncidentLog`, in the order the workers pushed them:
each incident is appended to the file (which is valid after every append)
before it is removed from the list, so a drain that is killed midway repeats
at most one incident next time and loses none.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from idcrawl.incidents import Incident, IncidentLog

__all__ = ["RedisIncidentLog", "drain_incidents", "incident_log"]


class RedisIncidentLog(IncidentLog):
    """An :class:`IncidentLog` whose ``append`` pushes onto ``<job prefix>incidents`` (no file)."""

    def __init__(self, client: Any, prefix: str) -> None:  # no super().__init__(): there is no file to load
        self.client = client
        self.key = prefix + "incidents"
        self.path = Path(f"redis-{self.key}")

    def __len__(self) -> int:
        return int(self.client.llen(self.key))

    def append(self, incident: Incident) -> None:
        self.client.rpush(self.key, pickle.dumps(incident, protocol=pickle.HIGHEST_PROTOCOL))


def drain_incidents(client: Any, prefix: str, path: str | Path) -> int:
    """Move the job's incidents into the XML log at ``path`` (created if missing); returns how many."""
    log = IncidentLog(path)
    key = prefix + "incidents"
    moved = 0
    while True:
        raw = client.lindex(key, 0)
        if raw is None:
            return moved
        log.append(pickle.loads(raw))  # noqa: S301 - written by this job's own workers
        client.lpop(key)
        moved += 1


def incident_log(settings: Any, spider_name: str) -> RedisIncidentLog:
    """The incident log of a distributed worker (RedisUnavailable if Redis cannot be reached)."""
    from idcrawl.distributed.connection import connect, job_prefix

    return RedisIncidentLog(connect(settings), job_prefix(settings, spider_name))
