"""Distributed crawls: many workers, one job, shared through Redis.

Turned on by ``IDCRAWL_DISTRIBUTED = True`` (or the ``distributed`` settings profile), which
:mod:`idcrawl.distributed.addon` reads. docs/distributed.md; the modules: docs/architecture.md
("Module map", "The fleet's protocol").
"""
