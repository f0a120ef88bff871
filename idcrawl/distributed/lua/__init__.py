"""The job's Lua scripts as package data, one ``.lua`` file each; loaded by :mod:`idcrawl.distributed.scripts`."""
