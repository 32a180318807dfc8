"""Dependency insertion (spec 10.4, MWP-WRK-007): the Coordinator adds edges to the WorkItem
graph as it discovers them, without re-offering the item.

``ext.missionweaveprotocol.core.work_dependency_add`` is the Organization-owned Command spec 15.1
names for it; the bundle defines no payload, so this core's is ``dependencyWorkItemIds``. The
dependencies are part of the Work Contract, so the fact is the core ``work.contract.revised``
(spec 15.2 names it as this Command's Event): the next ``contractVersion`` with the edges merged
in. An item that has not started then waits exactly as for the dependencies it was authorized
with: it may still be offered and accepted (naming the new contract version), and ``work.start``
is refused until every dependency is ``verified``.

Adding an edge that already exists changes nothing: when every named edge exists the Command is
refused with ``INVALID_COMMAND`` (``details.reason: dependencies_present``), as other Commands
that would change nothing are, since every accepted Command is an Event; a byte-equal retry of
the Command that added them still gets its receipt.
"""

from __future__ import annotations

from typing import Any, Final

from mwp.core.group.api import AuthorityContext
from mwp.core.group.dependencies import check_dependencies
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import members
from mwp.core.group.rejection import bad_transition, invalid
from mwp.core.group.roles import coordinator_only
from mwp.core.group.rules import CommandRule, by_agent, work_item_target
from mwp.core.group.state import GroupState
from mwp.core.group.work_item_state import active_mission, get_item
from mwp.core.kinds import REPLANNABLE_WORK_STATES

Json = dict[str, Any]

WORK_DEPENDENCY_ADD_KIND: Final = "ext.missionweaveprotocol.core.work_dependency_add"
ADDED_MEMBER: Final = "addedDependencyWorkItemIds"
# Bounds one Command's growth of a contract (and so of the Group's snapshot).
MAX_DEPENDENCIES_PER_COMMAND: Final = 100


def _decide_add(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state not in REPLANNABLE_WORK_STATES:
        # From queued on, an owner holds the contract it accepted; it is not changed under it.
        bad_transition("WorkItem", item.state, cmd.kind, reason="the WorkItem is owned")
    named = cmd.payload.id_list("dependencyWorkItemIds", min_items=1)
    if len(named) > MAX_DEPENDENCIES_PER_COMMAND:
        invalid(
            f"at most {MAX_DEPENDENCIES_PER_COMMAND} dependencies per Command",
            member="payload.dependencyWorkItemIds",
        )
    present = set(item.dependencies)
    added = [d for d in named if d not in present]
    if not added:
        invalid(
            "the WorkItem already depends on every named WorkItem: nothing changes",
            reason="dependencies_present",
            dependencyWorkItemIds=named,
        )
    dependencies = [*item.dependencies, *added]
    check_dependencies(state, item.work_item_id, dependencies)
    contract = {
        **item.contract,
        "contractVersion": item.contract_version + 1,
        "dependencyWorkItemIds": dependencies,
    }
    drafts.add(
        "work.contract.revised",
        ("work_item", item.work_item_id),
        {
            "contract": contract,
            "previousContractVersion": item.contract_version,
            ADDED_MEMBER: added,
        },
        work_item_id=item.work_item_id,
    )


RULES = (
    CommandRule(
        WORK_DEPENDENCY_ADD_KIND,
        _decide_add,
        coordinator_only,
        target=work_item_target,
        coordinator=by_agent,
        payload=members("dependencyWorkItemIds"),
        clauses=("MWP-EVT-002", "MWP-WRK-001", "MWP-WRK-002", "MWP-WRK-003", "MWP-WRK-007"),
    ),
)

# ``work.contract.revised`` is evolved by ``work_item.py``.
EVOLVERS: dict[str, Any] = {}
