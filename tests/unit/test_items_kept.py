"""``items_kept``: whether a crawl's items reach something that keeps them (else a crawl with state is refused)."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.settings import Settings

from idcrawl.addon import CONTENT_PIPELINE
from idcrawl.runtime import items_kept


@pytest.mark.parametrize(
    ("values", "environ", "kept"),
    [
        ({}, {}, False),
        ({"ITEM_PIPELINES": {CONTENT_PIPELINE: 100}}, {}, False),  # idcrawl's own pipeline keeps nothing
        ({"FEEDS": {"items.jsonl": {"format": "jsonlines"}}}, {}, True),
        ({"FEEDS": '{"file:///tmp/j1.jl": {"format": "jsonlines"}}'}, {}, True),  # scrapyd's -s FEEDS=<json>
        ({"ITEM_PIPELINES": {CONTENT_PIPELINE: 100, "tests.support.hold_item.HoldItem": 300}}, {}, True),
        ({"ITEM_PIPELINES": {"tests.support.hold_item.HoldItem": None}}, {}, False),  # switched off
        ({"ITEM_PIPELINES": {"no.such.Pipeline": 300}}, {}, True),  # Scrapy says why it cannot load it
        ({}, {"SHUB_JOBKEY": "1/2/3"}, True),  # Zyte Scrapy Cloud keeps the items of its jobs
        ({"EXTENSIONS": {"sh_scrapy.extension.HubstorageExtension": 100}}, {}, True),
    ],
)
def test_where_items_go(values: dict[str, Any], environ: dict[str, str], kept: bool) -> None:
    assert items_kept(Settings(values), environ) is kept
