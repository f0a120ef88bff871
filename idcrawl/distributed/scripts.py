"""The Lua scripts that make a job's lanes shared and atomic in Redis, loaded from ``idcrawl/distributed/lua/``.

Each ``.lua`` file (package data) has ``common.lua``'s helpers put in front of it; its header gives its
``KEYS``, ``ARGV`` and reply. Callers go through :class:`idcrawl.distributed.job.RedisJob`; the replies are
parsed in :mod:`idcrawl.distributed.replies`. Why and the key layout: docs/architecture.md, "The fleet's protocol".
"""

from __future__ import annotations

import hashlib
from importlib import resources

__all__ = [
    "ADOPT", "BLOOM", "CLAIM", "DELAY", "GIVE_BACK", "LEAVE", "LIMITS", "NAMES", "PACKAGE", "POLITE", "POP_DELAYED",
    "RECORD", "REGISTER", "RESUME", "RUN", "RUN_REFUSED", "STATUS", "TARGETS", "URL_DUE", "URL_HARVEST", "URL_OFFER",
    "URL_PUT", "URL_STATUS", "URL_TAKE", "load",
]

#: The package whose ``*.lua`` files are the scripts.
PACKAGE = "idcrawl.distributed.lua"


def _read(name: str) -> str:
    return resources.files(PACKAGE).joinpath(name).read_text(encoding="utf-8")


#: Script name by the SHA-1 of its source (what ``EVALSHA`` names it by), for every script loaded:
#: how calls are counted (:func:`idcrawl.distributed.connection.count_calls`).
NAMES: dict[str, str] = {}


def load(name: str, *preludes: str) -> str:
    """The source of script ``name`` (``claim``: ``claim.lua``), ``common.lua`` in front, then
    the helper files ``preludes`` (``urls_common``: ``urls_common.lua``)."""
    helpers = "".join(f"\n-- {prelude}.lua\n{_read(prelude + '.lua')}" for prelude in preludes)
    source = f"{_read('common.lua')}{helpers}\n-- {name}.lua\n{_read(name + '.lua')}"
    NAMES[hashlib.sha1(source.encode()).hexdigest()] = name  # noqa: S324 - Redis's own script hash
    return source


REGISTER = load("register")
CLAIM = load("claim")
RECORD = load("record", "page_record")  # a found page's record with its outcome
STATUS = load("status")
TARGETS = load("targets")
ADOPT = load("adopt")
LEAVE = load("leave")
GIVE_BACK = load("give_back")
DELAY = load("delay")
POP_DELAYED = load("pop_delayed")
POLITE = load("polite")
BLOOM = load("bloom")
LIMITS = load("limits")
RESUME = load("resume")
RUN = load("run")
RUN_REFUSED = load("run_refused")
# the shared URL queue of crawl scope (idcrawl.distributed.urlqueue): helpers in urls_common.lua
URL_OFFER = load("url_offer", "urls_common")
URL_TAKE = load("url_take", "urls_common")
URL_HARVEST = load("url_harvest", "urls_common")
URL_PUT = load("url_put", "urls_common")
URL_STATUS = load("url_status", "urls_common")
URL_DUE = load("url_due", "urls_common")
