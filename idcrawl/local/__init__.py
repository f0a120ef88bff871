"""One process: the worker that keeps the lanes in this process and the state in a store.

:mod:`idcrawl.distributed` is the fleet's side of the same seam (:mod:`idcrawl.worker`).
"""
