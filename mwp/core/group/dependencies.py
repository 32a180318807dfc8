"""The WorkItem dependency graph: a DAG that gates eligibility (MWP-WRK-007).

Dependencies must name existing WorkItems, so a new item cannot close a cycle except by naming
itself; a revised contract can, and is checked by searching for a path back to the item.
Default dependency policy: every dependency must be ``verified`` before the item may start.
"""

from __future__ import annotations

from mwp.core.group.rejection import invalid
from mwp.core.group.state import GroupState, WorkItem

CLAUSES: tuple[str, ...] = ("MWP-WRK-007",)


def check_dependencies(state: GroupState, work_item_id: str, dependencies: list[str]) -> None:
    if work_item_id in dependencies:
        invalid("a WorkItem cannot depend on itself", cycle=[work_item_id, work_item_id])
    missing = [d for d in dependencies if not state.has_item(d)]
    if missing:
        invalid("dependencies must name existing WorkItems", missingWorkItemIds=missing)
    if work_item_id not in state.work_items:
        return  # nothing can depend on an item that does not exist yet: no search needed
    path = _path_back(state, dependencies, work_item_id)
    if path is not None:
        invalid("the dependencies would form a cycle", cycle=[work_item_id, *path])


def _path_back(state: GroupState, starts: list[str], goal: str) -> list[str] | None:
    """A dependency path from one of ``starts`` to ``goal``, if any (iterative DFS)."""
    parent: dict[str, str | None] = {}
    stack = []
    for start in starts:
        if start not in parent:
            parent[start] = None
            stack.append(start)
    while stack:
        node = stack.pop()
        if node == goal:
            path = [node]
            while (previous := parent[path[-1]]) is not None:
                path.append(previous)
            return list(reversed(path))
        item = state.item_record(node)
        for dependency in item.dependencies if item else ():
            if dependency not in parent:
                parent[dependency] = node
                stack.append(dependency)
    return None


def unsatisfied(state: GroupState, item: WorkItem) -> list[str]:
    """Dependencies that do not yet satisfy the policy (all must be verified)."""
    return [d for d in item.dependencies if state.item_state(d) != "verified"]
