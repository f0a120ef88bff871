"""A test-only spider that writes chosen settings, as Scrapy finally resolved them, to a JSON file.

``scrapy runspider tests/support/settings_spider.py -s DUMP_PATH=out.json -s DUMP_NAMES=A,B``: the
settings are read in ``start()``, after every hook (spider ``update_settings``, add-ons) ran and
the settings were frozen, so the file shows what the crawl really used, with each one's priority.
It fetches nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from scrapy import Spider
from scrapy.settings import BaseSettings


class SettingsDumpSpider(Spider):
    name = "settingsdump"
    custom_settings = {"PREC_SPIDER": "spider", "PREC_SPIDER_PROFILE": "spider"}

    async def start(self) -> AsyncIterator[Any]:
        out: dict[str, Any] = {}
        for name in self.settings.getlist("DUMP_NAMES"):
            value = self.settings.get(name)
            if isinstance(value, BaseSettings):
                value = {str(k): v for k, v in value.copy_to_dict().items()}
            out[name] = {"value": value, "priority": self.settings.getpriority(name)}
        with open(self.settings["DUMP_PATH"], "w") as fh:
            json.dump(out, fh, default=str, indent=1, sort_keys=True)
        return
        yield  # pragma: no cover
