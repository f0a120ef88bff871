"""Scrapy commands of idcrawl: ``scrapy idplan`` (the resume plan of a job's
state) and ``scrapy idcoverage`` (a picture of it).

Registered by ``COMMANDS_MODULE = "idcrawl.commands"`` in this project and by
the ``scrapy.commands`` entry points for projects that use idcrawl as a
library. Scrapy registers every command class found in this package under its
module's name, so shared code here is plain functions (``_common``).
"""
