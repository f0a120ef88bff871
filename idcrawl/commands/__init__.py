"""Scrapy commands of idcrawl: ``scrapy idplan`` (the resume plan of a job's
state), ``scrapy idcoverage`` (a picture of it), ``scrapy idjob`` (a
distributed job in Redis), ``scrapy iddue`` (what is due for a recrawl), and ``scrapy crawl`` (Scrapy's, exiting
with the status of its finish reason: :mod:`idcrawl.core.exits`).

Registered by ``COMMANDS_MODULE = "idcrawl.commands"`` in this project and by
the ``scrapy.commands`` entry points for projects that use idcrawl as a
library (all but ``crawl``: an entry point would replace Scrapy's ``crawl`` in
every project of the environment). Scrapy registers every command class found in this package under its
module's name, so shared code here is plain functions (``_common``).
"""
