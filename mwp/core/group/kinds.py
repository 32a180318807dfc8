"""The two tables: one ``decide`` rule per Command kind, one ``evolve`` per Event kind, keyed
by the enumeration of :mod:`mwp.core.kinds` (``tests/unit/group/test_kinds.py`` checks both
cover it exactly)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mwp.core.group import (
    approval,
    archive,
    artifact,
    child_mission,
    context_package,
    conversation,
    coordinator_lease,
    delegation,
    execution_lease,
    knowledge,
    membership,
    mission,
    override_grant,
    resource_usage,
    runaway,
    schedule,
    work_dependency,
    work_item,
)
from mwp.core.group.rules import CommandRule, never
from mwp.core.group.state import GroupState

Evolve = Callable[[GroupState, dict[str, Any]], None]

_MODULES = (
    mission,
    coordinator_lease,
    membership,
    delegation,
    conversation,
    work_item,
    approval,
    execution_lease,
    artifact,
    child_mission,
    schedule,
    work_dependency,
    archive,
    context_package,
    resource_usage,
    knowledge,
    override_grant,
    runaway,
)

RULES: dict[str, CommandRule] = {rule.kind: rule for m in _MODULES for rule in m.RULES}
EVOLVERS: dict[str, Evolve] = {kind: f for m in _MODULES for kind, f in m.EVOLVERS.items()}

# Kinds an agent may send as the Coordinator (their rule can exercise the Coordinator lease):
# the Coordinator Epoch they carry is checked, so a client includes it whenever the signer holds
# the lease. A carried current epoch never harms a kind that does not exercise it.
COORDINATOR_KINDS: frozenset[str] = frozenset(
    kind for kind, rule in RULES.items() if rule.coordinator is not never
)


def evolve(state: GroupState, event: dict[str, Any]) -> None:
    """Apply one accepted Event. Total on Events the Authority itself produced."""
    EVOLVERS[event["kind"]](state, event)
    runaway.count(state, event)
    state.sequence = event["sequence"]
    state.clock = event["occurredAt"]
