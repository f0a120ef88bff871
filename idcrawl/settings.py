"""Scrapy settings of the idcrawl project (``scrapy crawl idseq`` in this repo,
scrapyd and Zyte deploys). idcrawl's own defaults live in
``idcrawl.default_settings``; this module only sets what a project decides.
"""

from idcrawl.default_settings import *  # noqa: F403 - documented defaults, overridable below

BOT_NAME = "idcrawl"
SPIDER_MODULES = ["idcrawl.spiders"]
NEWSPIDER_MODULE = "idcrawl.spiders"

SCHEDULER = "idcrawl.scheduler.IdScheduler"
EXTENSIONS = {"idcrawl.extensions.IdProgress": 500}

ROBOTSTXT_OBEY = True
USER_AGENT = "idcrawl (+https://github.com/idcrawl/idcrawl)"
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
FEED_EXPORT_ENCODING = "utf-8"
