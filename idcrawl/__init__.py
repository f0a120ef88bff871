"""idcrawl: Scrapy crawls of numeric-id URL spaces (the manual: docs/index.md).

``__version__`` is the installed package's version; ``pyproject.toml`` is its one source.
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("idcrawl")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a copy that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
