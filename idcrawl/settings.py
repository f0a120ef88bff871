"""Scrapy settings of the idcrawl project (``scrapy crawl idseq`` in this repo,
scrapyd and Zyte deploys). idcrawl's own defaults live in
``idcrawl.default_settings``; this module only sets what a project decides.
"""

from idcrawl.default_settings import *  # noqa: F403 - documented defaults, overridable below

BOT_NAME = "idcrawl"
SPIDER_MODULES = ["idcrawl.spiders"]
NEWSPIDER_MODULE = "idcrawl.spiders"
COMMANDS_MODULE = "idcrawl.commands"  # scrapy idplan, scrapy idcoverage

SCHEDULER = "idcrawl.scheduler.IdScheduler"
EXTENSIONS = {
    "idcrawl.extensions.IdProgress": 500,
    "idcrawl.politeness.IdPoliteness": 100,
    "idcrawl.limits.IdLimits": 200,
}

ROBOTSTXT_OBEY = True
# Scrapy's, except that requests waiting for a host's robots.txt are checked too (see idcrawl/robots.py)
DOWNLOADER_MIDDLEWARES = {
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "idcrawl.robots.IdRobotsTxtMiddleware": 100,
}
USER_AGENT = "idcrawl (+https://github.com/idcrawl/idcrawl)"
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
FEED_EXPORT_ENCODING = "utf-8"
