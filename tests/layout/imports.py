"""The project's import graph, read from the source (nothing is imported)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mwp"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the installed package by dotted name (the linked folders included)."""
    found: dict[str, Path] = {}
    for path in _python_files(root):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _python_files(folder: Path) -> Iterator[Path]:
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and (entry / "__init__.py").exists():
            yield from _python_files(entry)  # follows mwp/workflows -> ../workflows and the like
        elif entry.suffix == ".py":
            yield entry


def imported_names(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Each absolute import in ``path``: the module and the names taken from it."""
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]


def graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports. ``from P import m`` of a submodule ``m`` is an
    edge to ``P.m`` alone, as Python resolves it."""
    edges: dict[str, set[str]] = {}
    for name, path in found.items():
        targets: set[str] = set()
        for module, names in imported_names(path):
            submodules = {f"{module}.{n}" for n in names} & found.keys()
            if submodules and len(submodules) == len(names):
                targets |= submodules
            elif module in found:
                targets.add(module)
        edges[name] = targets - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def package_of(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth])


def package_graph(edges: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """The graph between packages ``depth`` names deep (``mwp.core``, ``mwp.client``, ...)."""
    folded: dict[str, set[str]] = {}
    for source, targets in edges.items():
        here = package_of(source, depth)
        folded.setdefault(here, set())
        folded[here] |= {package_of(t, depth) for t in targets} - {here}
    return folded
