"""Spidermon for id crawls (optional: ``pip install idcrawl[spidermon]``).

- :mod:`~idcrawl.spidermon.addon`: ``Monitoring``, turns Spidermon on when ``IDCRAWL_SPIDERMON`` asks for it;
- :mod:`~idcrawl.spidermon.monitors`: ``IdCrawlMonitorSuite`` and its monitors of the ``idcrawl/`` stats.
"""
