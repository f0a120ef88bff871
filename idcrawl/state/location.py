"""Where a crawl keeps its state file.

The crawl (spider) and the commands that read its state (``scrapy idplan``,
``scrapy idcoverage``) resolve the path the same way, from the same settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

__all__ = ["STATE_FILENAME", "state_path"]

#: The state file's name inside ``JOBDIR``.
STATE_FILENAME = "idcrawl-state.sqlite"


class _Settings(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def state_path(settings: _Settings, spider_name: str) -> Path:
    """The state file of a crawl of ``spider_name`` with these settings.

    1. ``IDCRAWL_STATE_PATH`` if set (not empty);
    2. else ``<JOBDIR>/idcrawl-state.sqlite`` if ``JOBDIR`` is set;
    3. else ``.scrapy/idcrawl/<spider_name>.sqlite``, relative to the current directory.
    """
    explicit = settings.get("IDCRAWL_STATE_PATH")
    if explicit:
        return Path(explicit)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return Path(jobdir) / STATE_FILENAME
    return Path(".scrapy") / "idcrawl" / f"{spider_name}.sqlite"
