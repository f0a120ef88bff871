"""The settings profiles shipped with idcrawl, one ``NAME.toml`` file each.

A package (not a top-level folder) so that the files travel inside every
build: wheels, sdists and the eggs that ``scrapyd-deploy`` and ``shub deploy``
upload. :mod:`idcrawl.profiles` reads them with :mod:`importlib.resources`, so
they load from a zipped egg too.
"""
