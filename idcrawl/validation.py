"""Settings checked once, before any request: the Scrapy side of :mod:`idcrawl.core.setting_specs`.

Every ``IDCRAWL_*`` value's type and range, and what a setting points at (a folder that is a file,
the ``distributed`` extra a Redis crawl needs), without creating anything. docs/reference/settings.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from idcrawl.config import IdConfig, config_from
from idcrawl.errors import BadInputError

__all__ = ["validate_settings"]


def validate_settings(settings: Any) -> IdConfig:
    """Every ``IDCRAWL_*`` setting against its spec; the first bad one is a one-line :class:`BadInputError`.
    Returns the typed config of ``settings`` as they are now.

    Called once where the settings are final, before the engine starts: for an
    id crawl by the idseq spider's ``from_crawler`` (after ``IDCRAWL_PROFILE``
    is applied; the ``IdCrawl`` add-on then leaves it to the spider), for other
    spiders by the ``IdCrawl`` add-on; and again by the ``JobProfile`` add-on
    only when a job file's profile changed settings.
    """
    config = config_from(settings)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        problem = _folder_problem(Path(str(jobdir)))
        if problem:
            raise BadInputError(f"bad setting: JOBDIR={jobdir!r}: {problem}")
    files = {"IDCRAWL_STATE_PATH": config.state_path, "IDCRAWL_DUPEFILTER_PATH": config.dupefilter_path,
             "IDCRAWL_INCIDENT_LOG": config.incident_log}
    for name, value in files.items():
        if value:
            problem = _file_problem(Path(str(value)))
            if problem:
                raise BadInputError(f"bad setting: {name}={value!r}: {problem}")
    _check_extras(settings)
    return config


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` (or ``path`` itself) if it is not a folder."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be (made) a folder to write in, or None."""
    blocker = _blocking_file(path)
    if blocker == path:
        return "is a file, not a folder"
    if blocker is not None:
        return f"is under {str(blocker)!r}, which is a file, not a folder"
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        return "is a folder this user cannot write in"
    return None


def _file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a file idcrawl writes, or None."""
    if path.is_dir():
        return "is a directory; give a file path"
    blocker = _blocking_file(path.parent)
    if blocker is not None:
        return f"is under {str(blocker)!r}, which is a file, not a folder"
    return None


def _check_extras(settings: Any) -> None:
    """A crawl that needs Redis without the ``distributed`` extra: one line, before anything imports redis."""
    from idcrawl.distributed.connection import needs_redis

    needed = needs_redis(settings)
    if needed is None:
        return
    name, value = needed
    try:
        import redis  # noqa: F401
        import scrapy_redis  # noqa: F401
    except ImportError as exc:
        missing = exc.name or "redis"
        raise BadInputError(
            f"bad setting: {name}={value}: needs the 'distributed' extra ({missing} is not installed): "
            "pip install 'idcrawl[distributed]'"
        ) from None
