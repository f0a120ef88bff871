"""Distributed crawls: many workers, one job, shared through Redis.

- :mod:`idcrawl.distributed.scripts`: the Lua scripts (claims, outcomes and
  cuts, leases, retries, politeness; the ``.lua`` files of
  ``idcrawl/distributed/lua/``) and the job's key layout;
- :mod:`idcrawl.distributed.frontier`: ``RedisFrontier``, the core frontier
  interface (``IdFrontier``) over those scripts;
- :mod:`idcrawl.distributed.worker`: ``RedisWorker``, the runtime's plug-in for
  one worker (poll, heartbeat, outages, pushed targets, adoption, shared
  retries, item acknowledgements);
- :mod:`idcrawl.distributed.addon`: ``Distributed``, the add-on that swaps
  these in (worker, scheduler, fleet politeness, fleet limits);
- :mod:`idcrawl.distributed.connection`: scrapy-redis's connection settings
  (``REDIS_URL``, ``REDIS_PARAMS``) and the job's key prefix.

Turn it on with ``IDCRAWL_DISTRIBUTED = True`` (or the ``distributed``
settings profile): the add-on reads it; docs/distributed.md.
"""
