"""A test-only stand-in for Zyte's DotScrapy Persistence add-on, with a local folder for its S3 bucket.

It does what scrapy-dotpersistence's ``DotScrapyPersistence`` extension does,
at the same moments: when the extension is built it syncs the bucket down into
``./.scrapy`` (``$DOTSCRAPY_DIR``, else the working directory's ``.scrapy``),
and on ``engine_stopped`` it syncs ``./.scrapy`` back up, deleting what is
gone. ``DOTSCRAPY_STANDIN_BUCKET`` is the folder that plays the bucket.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured


class DotScrapyStandIn:
    def __init__(self, bucket: Path, local: Path) -> None:
        self.bucket, self.local = bucket, local

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DotScrapyStandIn:
        if not crawler.settings.getbool("DOTSCRAPY_ENABLED"):
            raise NotConfigured
        local = Path(os.environ.get("DOTSCRAPY_DIR", Path.cwd() / ".scrapy"))
        ext = cls(Path(crawler.settings["DOTSCRAPY_STANDIN_BUCKET"]), local)
        ext.load()  # like DotScrapyPersistence.__init__: at extension build time
        crawler.signals.connect(ext.store, signal=signals.engine_stopped)
        return ext

    def load(self) -> None:
        self.local.mkdir(parents=True, exist_ok=True)
        if self.bucket.is_dir():
            shutil.copytree(self.bucket, self.local, dirs_exist_ok=True)

    def store(self) -> None:
        shutil.rmtree(self.bucket, ignore_errors=True)
        shutil.copytree(self.local, self.bucket)
