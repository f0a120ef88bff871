"""The functional core: plain data and rules, no Scrapy imports.

Everything here is driven by ids, outcomes and times passed in, so tests can
exercise any completion order without a reactor.
"""
