"""``UnwrittenItems``: found ids and found pages of crawl scope are done once their items are written."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import scrapy
from itemadapter import ItemAdapter

from idcrawl.feeds import UnwrittenItems, item_key, page_key


class Notice(scrapy.Item):
    target = scrapy.Field()
    id = scrapy.Field()
    url = scrapy.Field()


@dataclass
class Page:
    target: str
    url: str


def test_item_and_page_keys_tell_an_id_item_from_a_page_item() -> None:
    assert item_key({"target": "t", "id": 3, "url": "http://a/3"}) == ("t", 3)
    assert page_key({"target": "t", "id": 3, "url": "http://a/3"}) is None  # an id's item
    assert page_key({"target": "t", "url": "http://a/x"}) == ("t", "http://a/x")
    assert item_key({"target": "t", "url": "http://a/x"}) is None
    assert page_key({"url": "http://a/x"}) is None and page_key("not an item") is None


def test_every_kind_of_item_is_read_as_itemadapter_reads_it() -> None:
    # a plain dict is read directly (the hot path), every other item through ItemAdapter: the same keys
    items = [
        {"target": "t", "id": 3, "url": "http://a/3"}, {"target": "t", "url": "http://a/x"}, {"target": 1, "id": 3},
        {"target": "t", "id": "3"}, {}, OrderedDict(target="t", id=4), Notice(target="t", id=5, url="http://a/5"),
        Notice(target="t", url="http://a/y"), Page("t", "http://a/z"), "not an item", None, ["t", 3],
    ]
    for item in items:
        try:
            adapter = ItemAdapter(item)
        except TypeError:
            assert item_key(item) is None and page_key(item) is None
            continue
        target, id_, url = adapter.get("target"), adapter.get("id"), adapter.get("url")
        by_adapter = (target, id_) if isinstance(target, str) and isinstance(id_, int) else None
        assert item_key(item) == by_adapter
        page = (target, url) if isinstance(target, str) and isinstance(url, str) and "id" not in adapter else None
        assert page_key(item) == page


def test_a_page_is_done_once_its_last_own_item_is_written() -> None:
    pages = UnwrittenItems(page_key)
    own = [{"target": "t", "url": "http://a/x", "n": n} for n in range(2)]
    other = {"target": "t", "url": "http://a/y"}
    outputs = [*own, other, {"title": "no target"}, {"target": "t", "id": 1, "url": "http://a/x"}]
    assert pages.expect("t", "http://a/x", outputs, "token") == 2
    assert pages.expect("t", "http://a/z", [other], "none") == 0  # nothing of its own: not waited for
    assert pages.written(other) is None and pages.written({"title": "no target"}) is None
    assert pages.written(own[0]) is None
    assert pages.pending() == [(("t", "http://a/x"), "token")]
    assert pages.written(own[1]) == (("t", "http://a/x"), "token")
    assert pages.pending() == []
    ids = UnwrittenItems()  # the default: found ids, as before
    assert ids.expect("t", 1, outputs, "lane") == 1
    assert ids.written(own[0]) is None and ids.written(outputs[-1]) == (("t", 1), "lane")
