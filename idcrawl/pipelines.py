"""Item pipelines: ``ContentDuplicates`` marks (or drops) items whose page an earlier item already had.

The decisions live in :mod:`idcrawl.core.fingerprints`; this is the Scrapy shell (settings, stats,
item fields). Which duplicate is "first": docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.misc import load_object

from idcrawl.config import config_from
from idcrawl.core.fingerprints import ITEM_SIGNATURE_KEY, ContentIndex
from idcrawl.runtime import STATS_PREFIX

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["ContentDuplicates", "content_settings", "signatures_wanted"]

logger = logging.getLogger(__name__)

MODES = ("mark", "drop", "off")


def content_settings(settings: BaseSettings) -> tuple[str, float]:
    """``(mode, near threshold)`` from the settings; bad values raise :class:`BadInputError` naming the setting."""
    config = config_from(settings)
    return config.content_duplicates, config.content_near_duplicates


def _enabled(settings: BaseSettings) -> bool:
    """Whether ``ContentDuplicates`` (or a subclass) is in ``ITEM_PIPELINES``."""
    for path, order in settings.getwithbase("ITEM_PIPELINES").items():
        if order is None:
            continue
        try:
            cls = load_object(path) if isinstance(path, str) else path
        except (ImportError, NameError, ValueError):
            continue
        if isinstance(cls, type) and issubclass(cls, ContentDuplicates):
            return True
    return False


def signatures_wanted(settings: BaseSettings) -> bool:
    """Whether the spider should attach MinHash signatures to items.

    Only when near-duplicates are on *and* this pipeline is enabled: nobody
    else would remove the private key, and a feed cannot serialise it.
    """
    mode, near = content_settings(settings)
    if mode == "off" or near <= 0:
        return False
    if not _enabled(settings):
        logger.warning(
            "idcrawl: IDCRAWL_CONTENT_NEAR_DUPLICATES=%s has no effect: "
            "idcrawl.pipelines.ContentDuplicates is not in ITEM_PIPELINES", near,
        )
        return False
    return True


class ContentDuplicates:
    """Mark or drop items whose content an earlier item of the crawl had (see the module docstring)."""

    def __init__(self, crawler: Crawler, mode: str, near: float) -> None:
        self.crawler = crawler
        self.mode = mode
        self.index = ContentIndex(near)
        stats = crawler.stats
        assert stats is not None
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentDuplicates:
        mode, near = content_settings(crawler.settings)
        if mode == "off":
            raise NotConfigured("IDCRAWL_CONTENT_DUPLICATES is off")
        return cls(crawler, mode, near)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        # a plain dict reads and writes as its ItemAdapter would (building one per item shows in a fast crawl's profile)
        adapter: Any = item if type(item) is dict else ItemAdapter(item)
        minhash = None
        if ITEM_SIGNATURE_KEY in adapter:
            minhash = adapter[ITEM_SIGNATURE_KEY]
            del adapter[ITEM_SIGNATURE_KEY]
        target, id_, checksum = adapter.get("target"), adapter.get("id"), adapter.get("checksum")
        if not (isinstance(target, str) and isinstance(id_, int) and isinstance(checksum, str)):
            return item
        match = self.index.check(target, id_, checksum, minhash)
        if match is None:
            return item
        if match.kind == "exact":
            self.stats.inc_value(f"{STATS_PREFIX}/content/duplicates")
            adapter["duplicate_of"] = match.id
            if match.target != target:
                adapter["duplicate_of_target"] = match.target
        else:
            self.stats.inc_value(f"{STATS_PREFIX}/content/near_duplicates")
            adapter["near_duplicate_of"] = match.id
            if match.target != target:
                adapter["near_duplicate_of_target"] = match.target
            adapter["near_duplicate_similarity"] = round(match.similarity, 3)
        if self.mode == "drop":
            of = match.id if match.target == target else f"{match.target} {match.id}"
            kind = "duplicate" if match.kind == "exact" else f"near-duplicate ({match.similarity:.3f})"
            raise DropItem(f"{target} {id_}: {kind} of {of}", log_level="DEBUG")
        return item

    def close_spider(self, spider: Any = None) -> None:
        self.stats.set_value(f"{STATS_PREFIX}/content/distinct", len(self.index))
