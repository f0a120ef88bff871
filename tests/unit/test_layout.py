"""The layout the manual promises, and the boundaries issue 13 drew (checked on the source, so they stay drawn).

- the module map of the manual (``docs/architecture.md``, "Module map") names every module of the package (a newcomer finds any of them from it);
- the distributed layer is a layer: only ``idcrawl/distributed/``, its settings profile, the defaults and
  the setting specs mention ``IDCRAWL_DISTRIBUTED`` or ``distributed(...)``;
- components find the runtime with ``runtime_of(crawler)``, never as a spider attribute.
(Scrapy's private names outside ``idcrawl/_scrapy.py`` are checked by ``test_scrapy_adapter.py``.)
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "idcrawl"


def modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts or (path.name == "__init__.py" and path.parent != PACKAGE / "settings_profiles"):
            continue
        found.append(path.relative_to(REPO).as_posix())
    return found


def layout_section() -> str:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = page.index("\n## Module map\n")
    end = page.find("\n## ", start + 1)
    return page[start:] if end < 0 else page[start:end]


def test_the_module_map_names_every_module() -> None:
    layout = layout_section()
    missing = [path for path in modules() if path.removesuffix("__init__.py") not in layout]
    assert missing == []
    assert len(modules()) > 60  # the walk found the package


def test_the_module_map_says_where_the_margin_is_decided() -> None:
    layout = layout_section()
    assert "idcrawl/core/lanes.py" in layout and "idcrawl/distributed/lua/record.lua" in layout
    assert (PACKAGE / "distributed" / "lua" / "record.lua").is_file()


def test_only_the_distributed_layer_tests_for_distributed_mode() -> None:
    allowed = {"idcrawl/default_settings.py", "idcrawl/core/setting_specs.py", "idcrawl/settings_profiles/__init__.py",
               "idcrawl/backends.py"}  # the one place that chooses one process or the fleet
    mention = re.compile(r"IDCRAWL_DISTRIBUTED|\bdistributed\(")
    offending = [
        path for path in modules()
        if not path.startswith("idcrawl/distributed/") and path not in allowed
        and mention.search((REPO / path).read_text(encoding="utf-8"))
    ]
    assert offending == []


def test_no_component_reads_the_runtime_off_the_spider() -> None:
    attribute = re.compile(r"""getattr\(\s*(?:self\.)?(?:crawler\.)?spider,\s*["']idcrawl["']|spider\.idcrawl\b""")
    offending = [path for path in modules() if attribute.search((REPO / path).read_text(encoding="utf-8"))]
    assert offending == []
