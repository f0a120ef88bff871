"""``HoldItem``: an item pipeline that never lets the item of one page through (a kill test's gate).

The item whose ``url`` ends with ``HOLD_ITEM_PATH`` (and has no ``id``: a page of the crawl scope)
is held in the pipeline for good (a Deferred that never fires) by the first process to see it:
that process creates ``HOLD_ITEM_MARK`` (a file; exclusively, with its pid in it) when the item
arrives: its response was parsed, its item is not written, and the rest of the crawl goes on. A
test then kills that process at a moment it chose, without timing. Any later item of that page (a
rerun's, another worker's of a fleet sharing the mark) passes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from itemadapter import ItemAdapter
from twisted.internet.defer import Deferred


class HoldItem:
    def __init__(self, path: str, mark: str) -> None:
        self.path = path
        self.mark = Path(mark)

    @classmethod
    def from_crawler(cls, crawler: Any) -> HoldItem:
        return cls(crawler.settings.get("HOLD_ITEM_PATH"), crawler.settings.get("HOLD_ITEM_MARK"))

    def process_item(self, item: Any, spider: Any = None) -> Any:
        adapter = ItemAdapter(item)
        if "id" not in adapter and str(adapter.get("url", "")).endswith(self.path):
            try:
                with self.mark.open("x") as mark:
                    mark.write(str(os.getpid()))
            except FileExistsError:  # held once already (by this process or another)
                return item
            return Deferred()  # never fires: the item is not written
        return item
