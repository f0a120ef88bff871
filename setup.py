"""Shim for the egg builders of scrapyd-deploy and ``shub deploy``.

Both run ``python setup.py bdist_egg`` and, when no ``setup.py`` exists, write
one of their own into the project folder and leave it there (named
``project``, every package found). With this file they build the package as
``pyproject.toml`` describes it (name, packages, package data such as the
settings profiles, the ``scrapy`` settings entry point), and a deploy leaves
only ``build/`` and ``*.egg-info/`` behind, which ``.gitignore`` covers.

They build with the setuptools of the environment they run in, not the one
``[build-system]`` asks for: ``pyproject.toml``'s ``[project]`` table needs
setuptools 61 or later, and an older one would build an egg with no package
in it, so this stops with one line naming the fix (scrapyd-deploy shows it
with ``--debug``; docs/deployment.md).
"""

import sys

import setuptools

if int(setuptools.__version__.split(".")[0]) < 61:
    sys.exit(
        f"idcrawl's build needs setuptools>=61 (pyproject.toml's [project]), this Python has "
        f"{setuptools.__version__}: pip install 'setuptools>=61,<81'"
    )

setuptools.setup()
