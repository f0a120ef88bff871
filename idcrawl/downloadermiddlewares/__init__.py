"""idcrawl's downloader middlewares (``DOWNLOADER_MIDDLEWARES``), wired by the ``idcrawl.addon.IdCrawl`` add-on.

- :mod:`~idcrawl.downloadermiddlewares.attempts`: ``IdAttemptsMiddleware``, a lane request's attempts and cool-downs;
- :mod:`~idcrawl.downloadermiddlewares.robotstxt`: ``IdRobotsTxtMiddleware``: robots.txt, ``disallowed`` outcome;
- :mod:`~idcrawl.downloadermiddlewares.metarefresh`: ``IdMetaRefreshMiddleware``: Scrapy's meta refresh, without
  decoding pages that cannot refresh;
- :mod:`~idcrawl.downloadermiddlewares.redirects`: ``IdRedirectsMiddleware``: an id page redirected to another host
  is not followed.
"""
