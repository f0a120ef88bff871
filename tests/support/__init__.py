"""Helpers for behaviour tests: real ``scrapy crawl`` runs against local sites."""
