"""idcrawl's Scrapy extensions (``EXTENSIONS``), wired by the ``idcrawl.addon.IdCrawl`` add-on.

- :mod:`~idcrawl.extensions.progress`: ``IdProgress``, the plan, progress and summary lines;
- :mod:`~idcrawl.extensions.state`: ``IdStateLoader``, builds the runtime's worker (reads the durable state)
  once the other extensions are built;
- :mod:`~idcrawl.extensions.politeness`: ``IdPoliteness``, per-host gaps, ``Retry-After`` and backoff;
- :mod:`~idcrawl.extensions.limits`: ``IdLimits``, the job limits (LT, Imax, PLmax, TTmax, TDL, TAC, TST);
- :mod:`~idcrawl.extensions.incidents`: the XML incident log those limits write.
"""
