"""The parts of an id crawl that run in this one process (the fleet's are in :mod:`idcrawl.distributed`)."""
