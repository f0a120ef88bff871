"""Where a crawl keeps its state file.

The crawl (spider) and the commands that read its state (``scrapy idplan``,
``scrapy idcoverage``) resolve the path the same way, from the same settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

__all__ = ["STATE_FILENAME", "job_file", "state_path"]

#: The state file's name inside ``JOBDIR``.
STATE_FILENAME = "idcrawl-state.sqlite"


class _Settings(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def job_file(settings: _Settings, setting: str, filename: str, fallback: str) -> Path:
    """A job's file: the ``setting`` if set (not empty); else ``<JOBDIR>/<filename>``
    if ``JOBDIR`` is set; else ``.scrapy/idcrawl/<fallback>`` relative to the current directory."""
    explicit = settings.get(setting)
    if explicit:
        return Path(explicit)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return Path(jobdir) / filename
    return Path(".scrapy") / "idcrawl" / fallback


def state_path(settings: _Settings, spider_name: str) -> Path:
    """The state file of a crawl of ``spider_name`` with these settings.

    1. ``IDCRAWL_STATE_PATH`` if set (not empty);
    2. else ``<JOBDIR>/idcrawl-state.sqlite`` if ``JOBDIR`` is set;
    3. else ``.scrapy/idcrawl/<spider_name>.sqlite``, relative to the current directory.
    """
    return job_file(settings, "IDCRAWL_STATE_PATH", STATE_FILENAME, f"{spider_name}.sqlite")
