"""The job limits' parts in one process: counters in memory, incidents in an XML file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from idcrawl.core.limits import DomainLimits, JobLimits, Limits
from idcrawl.extensions.incidents import IncidentLog
from idcrawl.state.location import job_file

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from idcrawl.extensions.limits import LimitParts

__all__ = ["INCIDENT_FILENAME", "LocalLimitParts", "incident_log_path"]

#: The incident log's name inside ``JOBDIR``.
INCIDENT_FILENAME = "idcrawl-incidents.xml"


def incident_log_path(settings: BaseSettings, spider_name: str) -> Path:
    """``IDCRAWL_INCIDENT_LOG``, else ``<JOBDIR>/idcrawl-incidents.xml``, else
    ``.scrapy/idcrawl/<spider>-incidents.xml`` in the current directory."""
    return job_file(settings, "IDCRAWL_INCIDENT_LOG", INCIDENT_FILENAME, f"{spider_name}-incidents.xml")


class LocalLimitParts:
    """Trackers that count this process's events; incidents appended to the XML log file."""

    def __init__(self, settings: BaseSettings, spider_name: str) -> None:
        self.settings = settings
        self.spider_name = spider_name

    def domain_tracker(self, limits: Limits, key: str) -> DomainLimits:
        return DomainLimits(limits, key)

    def job_tracker(self, limits: Limits) -> JobLimits:
        return JobLimits(limits)

    def incident_log(self) -> IncidentLog:
        """The XML log (``IncidentLogError`` if its path cannot be used)."""
        return IncidentLog(incident_log_path(self.settings, self.spider_name))


if TYPE_CHECKING:  # mypy checks that the in-process parts are LimitParts

    def _are_limit_parts(parts: LocalLimitParts) -> LimitParts:
        return parts
