"""Sphinx configuration of the idcrawl manual (``make docs``; Read the Docs: ``.readthedocs.yaml``).

The pages are MyST Markdown. ``sphinx-build -W`` (what ``make docs`` and ``make test`` run) turns every
warning into an error, so a broken cross-reference, a page left out of the toctree or a missing
include fails the build.
"""

from __future__ import annotations

import idcrawl

project = "idcrawl"
author = "the idcrawl authors"
copyright = "the idcrawl authors, BSD 3-Clause"
release = idcrawl.__version__  # pyproject.toml's version, as installed (make and Read the Docs install it)
version = ".".join(release.split(".")[:2])

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# `[text](page.md#section)` links reach a section of another page: anchors for headings down to ###
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

html_theme = "furo"
html_title = "idcrawl"
html_static_path = ["_static"]
html_css_files = ["idcrawl.css"]  # reference tables wrap long code values
