"""Distributed crawls: many workers, one job, shared through Redis.

- :mod:`idcrawl.distributed.scripts`: the Lua scripts (claims, outcomes and
  cuts, leases, retries, politeness; the ``.lua`` files of
  ``idcrawl/distributed/lua/``) and the job's key layout;
- :mod:`idcrawl.distributed.frontier`: ``RedisFrontier``, the core frontier's
  interface over those scripts;
- :mod:`idcrawl.distributed.runtime`: ``RedisRuntime``, the worker's runtime
  (poll, heartbeat, pushed targets, item acknowledgements);
- :mod:`idcrawl.distributed.connection`: scrapy-redis's connection settings
  (``REDIS_URL``, ``REDIS_PARAMS``) and the job's key prefix.

Turn it on with ``IDCRAWL_DISTRIBUTED = True`` (or the ``distributed``
settings profile); README "Distributed runs".
"""
