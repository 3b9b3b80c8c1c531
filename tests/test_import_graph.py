"""No import circle in pylog: between packages or between modules, the imports
under ``if TYPE_CHECKING:`` and those inside functions included (the
project's rule; a circle is a layering mistake even where Python copes)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pylog"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    rel = PACKAGE.parent / name.replace(".", "/")
    return rel.with_suffix(".py").exists() or (rel / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.split(".")[0] == "pylog":
                # ``from pkg import submodule`` depends on the submodule alone
                subs = [f"{node.module}.{a.name}" for a in node.names]
                found = [s for s in subs if _exists(s)]
                deps.update(found)
                if len(found) < len(subs):
                    deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == "pylog")
        graph[_module(path)] = {d for d in deps if _exists(d)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back() -> None:
    graph = _graph()
    assert len(graph) > 100  # the walk found the package
    assert _cycles({m: {d for d in deps if d != m} for m, deps in graph.items()}) == []


def test_no_package_imports_itself_back() -> None:
    def package(name: str) -> str:
        return ".".join(name.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for m, deps in _graph().items():
        packages.setdefault(package(m), set()).update(
            package(d) for d in deps if package(d) != package(m))
    assert _cycles(packages) == []
