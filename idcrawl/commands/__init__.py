"""Scrapy commands of idcrawl: ``idplan``, ``idcoverage``, ``idjob``, ``iddue``, and ``crawl`` with exit statuses.

Registered by ``COMMANDS_MODULE = "idcrawl.commands"`` and the ``scrapy.commands`` entry points (all but
``crawl``). Scrapy registers every command class of this package, so shared code is plain functions
(``_common``). Why: docs/architecture.md, "Module notes".
"""
