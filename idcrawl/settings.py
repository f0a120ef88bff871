"""Scrapy settings of the idcrawl project (``scrapy crawl idseq`` in this repo,
scrapyd and Zyte deploys). idcrawl's own defaults live in
``idcrawl.default_settings``; this module only sets what a project decides.
"""

from idcrawl.default_settings import *  # noqa: F403 - documented defaults, overridable below

BOT_NAME = "idcrawl"
SPIDER_MODULES = ["idcrawl.spiders"]
NEWSPIDER_MODULE = "idcrawl.spiders"
COMMANDS_MODULE = "idcrawl.commands"  # scrapy idplan, scrapy idcoverage

# the idcrawl add-on wires the scheduler, middlewares, extensions and the rest at add-on priority
# (see idcrawl/addon.py); a setting below, or -s, overrides any single piece
ADDONS = {"idcrawl.addon.IdCrawl": 0}

# Scrapy's default is DEBUG (a line per request and item); at INFO an id crawl logs its plan,
# progress and summary (idcrawl.extensions.progress.IdProgress). -L DEBUG or -s LOG_LEVEL=DEBUG for more.
LOG_LEVEL = "INFO"
ROBOTSTXT_OBEY = True
USER_AGENT = "idcrawl (+https://github.com/idcrawl/idcrawl)"
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
FEED_EXPORT_ENCODING = "utf-8"
