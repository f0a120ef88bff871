"""idcrawl's spider middlewares (``SPIDER_MIDDLEWARES``), wired by the ``idcrawl.addon.IdCrawl`` add-on.

- :mod:`~idcrawl.spidermiddlewares.soft404`: ``IdSoft404Middleware``, the soft-404 probe: learns a target's
  "not found" page before any of its ids is judged.
"""
