"""Settings profiles: named sets of settings a job picks with ``IDCRAWL_PROFILE``.

A profile is a small TOML file in ``settings_profiles/`` (one ``NAME = value``
per setting, each with a comment). It is applied at Scrapy's ``spider``
priority: above the project's settings and the add-on, below anything given
explicitly with ``-s`` (``cmdline`` priority), so an explicit setting always
wins. This is the minimal form; the add-on and deployment work extends it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from scrapy.settings import BaseSettings

from idcrawl.errors import BadInputError

__all__ = ["PROFILE_PRIORITY", "apply_profile", "known_profiles", "load_profile", "profile_dirs"]

PROFILE_PRIORITY = "spider"


def profile_dirs(settings: BaseSettings | None = None) -> list[Path]:
    """Where profiles are looked up: ``IDCRAWL_PROFILES_DIR`` if set, then the project's folder."""
    dirs = []
    extra = settings.get("IDCRAWL_PROFILES_DIR") if settings is not None else None
    if extra:
        dirs.append(Path(extra))
    dirs.append(Path(__file__).resolve().parents[1] / "settings_profiles")
    return dirs


def known_profiles(settings: BaseSettings | None = None) -> list[str]:
    return sorted({p.stem for d in profile_dirs(settings) if d.is_dir() for p in d.glob("*.toml")})


def load_profile(name: str, settings: BaseSettings | None = None) -> dict[str, Any]:
    for folder in profile_dirs(settings):
        path = folder / f"{name}.toml"
        if path.is_file():
            try:
                with path.open("rb") as fh:
                    return tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise BadInputError(f"IDCRAWL_PROFILE={name!r}: {path} is not valid TOML ({exc})") from None
    known = ", ".join(known_profiles(settings)) or "none"
    raise BadInputError(f"IDCRAWL_PROFILE={name!r}: unknown profile (known: {known})")


def apply_profile(settings: BaseSettings) -> str | None:
    """Apply the profile ``IDCRAWL_PROFILE`` names, if any; returns its name."""
    name = settings.get("IDCRAWL_PROFILE")
    if not name:
        return None
    for key, value in load_profile(str(name), settings).items():
        settings.set(key, value, priority=PROFILE_PRIORITY)
    return str(name)
