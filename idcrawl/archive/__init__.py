"""WARC output of a crawl (issue 33): the files in ``IDCRAWL_WARC_DIR`` and their records.

:mod:`~idcrawl.archive.files` writes, rotates, repairs and indexes the ``.warc.gz`` files (warcio,
cdxj-indexer; no Scrapy); :mod:`~idcrawl.archive.middleware` turns each fetch into its records.
docs/recrawl.md ("WARC output") has the record layout and the durability rule.
"""
