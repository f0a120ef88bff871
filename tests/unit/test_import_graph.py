"""The package's import graph, read from the source: no import circles, no private name across modules.

Every ``import``/``from ... import`` of an ``idcrawl`` module counts, at module level or inside a
function; imports under ``if TYPE_CHECKING:`` do not (they never run). ``python -m
tests.unit.test_import_graph`` prints the circles and the private names found.
(The layers, core without Scrapy and so on, are import-linter's contracts: ``lint-imports``, ``make lint``.)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "idcrawl"

#: Circles through files other helpers of issue 28 own, listed for the lead (each a sorted tuple of modules).
KNOWN_CIRCLES: set[tuple[str, ...]] = set()
#: Private names used across modules in those files: (module, "module.name" imported, or the expression).
KNOWN_PRIVATE: set[tuple[str, str]] = set()
#: Modules allowed to use other packages' private names: Scrapy's internals are fenced in ``_scrapy.py``.
PRIVATE_ALLOWED = {"idcrawl._scrapy"}
#: Third-party private names that are those packages' public typing (lxml's element class).
PUBLIC_ELSEWHERE = {"_Element"}


def module_names() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run: every one but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """The edges (module -> the idcrawl modules it imports) and the private names used across modules:
    (importing module, "module.name") for ``from m import _x`` and ``m._x`` on an imported module."""
    names = module_names()
    graph: dict[str, set[str]] = {name: set() for name in names}
    private: list[tuple[str, str]] = []
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}  # a local name bound to an idcrawl module
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in names:
                        graph[name].add(alias.name)
                        aliases[alias.asname or alias.name] = alias.name
                continue
            base = _base(name, path, node)
            if base not in names:
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in names:  # a submodule: its package's __init__ runs first, as for every import
                    graph[name].add(target)
                    aliases[alias.asname or alias.name] = target
                    continue
                graph[name].add(base)
                if _private(alias.name) and base != name:
                    private.append((name, f"{base.rpartition('.')[2]}.{alias.name}"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and aliases[node.value.id] != name):
                private.append((name, f"{aliases[node.value.id].rpartition('.')[2]}.{node.attr}"))
        if name not in PRIVATE_ALLOWED:
            private.extend((name, expression) for expression in _foreign_attributes(tree))
        graph[name].discard(name)
    return graph, sorted(set(private))


def _foreign_attributes(tree: ast.AST) -> set[str]:
    """``x._y`` where nothing in the module defines ``_y`` (no def, class, assignment or slot of that name):
    another module's private member (a method of its class, a base class's attribute)."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.alias):
            defined.add(node.asname or node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            defined.add(node.value)  # __slots__ entries
    return {
        ast.unparse(node) for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in defined | PUBLIC_ELSEWHERE
    }


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_walk_finds_the_package_and_its_imports() -> None:
    graph, _ = import_graph()
    assert len(graph) > 60
    assert "idcrawl.core.lanes" in graph["idcrawl.core.frontier"]


def test_the_graph_counts_function_level_imports_and_skips_type_checking_ones() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\n"
        "def f():\n    import c\n"
    )
    assert [alias.name for node in _imports(tree) for alias in node.names] == ["TYPE_CHECKING", "b", "c"]


def test_the_package_has_no_import_circles() -> None:
    graph, _ = import_graph()
    assert set(circles(graph)) <= KNOWN_CIRCLES


def test_the_core_imports_only_the_core() -> None:
    graph, _ = import_graph()
    shell = {(core, other) for core, imported in graph.items() if core.startswith("idcrawl.core.")
             for other in imported if not other.startswith("idcrawl.core")}
    assert shell == set()


def test_no_module_uses_another_modules_private_names() -> None:
    _, private = import_graph()
    assert set(private) <= KNOWN_PRIVATE


def test_a_private_member_of_another_modules_class_is_found() -> None:
    tree = ast.parse("class A:\n    def _own(self):\n        self._x = 1\n        return self._own(), self._x, b._theirs()\n")
    assert _foreign_attributes(tree) == {"b._theirs"}


if __name__ == "__main__":
    graph, private = import_graph()
    found = circles(graph)
    print(f"{len(found)} circles")
    for component in found:
        print("  " + " <-> ".join(component))
    print(f"{len(private)} private names used across modules")
    for where, what in private:
        print(f"  {where}: {what}")
