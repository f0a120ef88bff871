"""``IdStateLoader``: builds an id crawl's runtime worker (reads its state) after every other extension."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from idcrawl.runtime import start_runtime

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["STATE_LOADER_ORDER", "IdStateLoader"]


class IdStateLoader:
    """Reads an id crawl's durable state once every other extension is built.

    The idseq spider is created before the extensions, but an extension may
    bring the state file in when it is built (Zyte's DotScrapy Persistence
    downloads ``.scrapy`` then). Built last (the spider adds it at order
    ``STATE_LOADER_ORDER``), this one asks for the runtime
    and starts it (:func:`idcrawl.runtime.start_runtime`), which builds its worker and
    reads the state, after them and still before the engine exists, so a
    corrupt, locked or foreign state stops the crawl with one line and a
    non-zero exit, like a bad argument. Without it, the next component that
    asks for the runtime does (the attempts middleware, else the scheduler).
    """

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdStateLoader:
        if start_runtime(crawler) is None:
            raise NotConfigured
        return cls()


#: ``EXTENSIONS`` order of :class:`IdStateLoader`: after every usual extension.
STATE_LOADER_ORDER = 10_000
