"""Sphinx configuration of the idcrawl manual (``make docs``; Read the Docs: ``.readthedocs.yaml``).

The pages are MyST Markdown. ``sphinx-build -W`` (what ``make docs`` and ``make test`` run) turns every
warning into an error, so a broken cross-reference, a page left out of the toctree or a missing
include fails the build.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

import idcrawl

if TYPE_CHECKING:
    from sphinx.application import Sphinx

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


# -- one anchor per setting --------------------------------------------------------------------------
# docs/reference/settings.md keeps its settings in plain Markdown tables (a row each: the tests read them,
# and a new setting is one line). Each `IDCRAWL_*` name in a row's first cell becomes a `setting` object of
# Sphinx's standard domain with the anchor `setting-IDCRAWL_X`: the search lists it as an object that opens
# the page at its row, the general index has it, and {setting}`IDCRAWL_X` links to it from any page.
SETTINGS_DOC = "reference/settings"
SETTING_NAME = re.compile(r"IDCRAWL_[A-Z0-9_]+")


class SettingAnchors(SphinxTransform):
    """Before the domains collect the page's objects (SphinxDomains, priority 850) and index entries."""

    default_priority = 840

    def apply(self, **kwargs: object) -> None:
        if self.env.docname != SETTINGS_DOC:
            return
        std = self.env.domains.standard_domain
        for row in self.document.findall(nodes.row):
            first = next(row.findall(nodes.entry), None)
            if first is None or isinstance(row.parent, nodes.thead):
                continue
            for literal in list(first.findall(nodes.literal)):
                name = literal.astext()
                if not SETTING_NAME.fullmatch(name):
                    continue
                anchor = f"setting-{name}"
                literal["ids"].append(anchor)
                std.note_object("setting", name, anchor, location=literal)
                index = addnodes.index(entries=[("single", f"{name} (setting)", anchor, "", None)])
                literal.parent.insert(literal.parent.index(literal), index)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_object_type("setting", "setting", objname="setting")
    app.add_transform(SettingAnchors)
    return {"parallel_read_safe": True}
