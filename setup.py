"""Shim for the egg builders of scrapyd-deploy and ``shub deploy``.

Both run ``python setup.py bdist_egg`` and, when no ``setup.py`` exists, write
one of their own into the project folder and leave it there (named
``project``, every package found). With this file they build the package as
``pyproject.toml`` describes it (name, packages, package data such as the
settings profiles, the ``scrapy`` settings entry point), and a deploy leaves
only ``build/`` and ``*.egg-info/`` behind, which ``.gitignore`` covers.
"""

from setuptools import setup

setup()
