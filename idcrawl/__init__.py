"""idcrawl: Scrapy crawls of numeric-id URL spaces (the manual: docs/index.md).

``idcrawl.__version__`` is the installed package's version (``pyproject.toml`` is its one source),
read on first use so that importing idcrawl costs no scan of the installed distributions.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        version = importlib.metadata.version("idcrawl")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a copy that was never installed
        version = "0+unknown"
    globals()["__version__"] = version  # computed once
    return version
