"""The execution approval gate (spec 12, 10.2 ``approval.grant_execution``).

A WorkItem needs a signed execution approval before it starts when its contract says so
(``policy_required`` or ``human_required``), or when the Mission's policy demands approval of
high-risk work and the contract's side-effect risk is ``high_risk`` or ``destructive`` (then
``policy_required``). ``human_required`` is granted by the MissionOwner only; ``policy_required``
by the MissionOwner or Organization policy. An approval is bound to the contract version it
saw: a revised contract needs a new one.
"""

from __future__ import annotations

from typing import Any

from mwp.core.group.api import AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import members
from mwp.core.group.rejection import bad_transition, forbidden, invalid
from mwp.core.group.roles import owner_or_service
from mwp.core.group.rules import CommandRule, work_item_target
from mwp.core.group.state import GroupState, WorkItem
from mwp.core.group.work_item_state import active_mission, get_item, touch

Json = dict[str, Any]

_HIGH_RISK = frozenset({"high_risk", "destructive"})


def execution_gate(state: GroupState, item: WorkItem) -> str:
    gate = str(item.contract["executionApproval"])
    mission = state.mission
    if (
        gate == "not_required"
        and mission is not None
        and mission.approval_policy.get("highRiskExecutionApproval")
        and item.contract["sideEffectRisk"] in _HIGH_RISK
    ):
        return "policy_required"
    return gate


def execution_approved(item: WorkItem) -> bool:
    approval = item.execution_approval
    return approval is not None and approval["contractVersion"] == item.contract_version


# --- approval.grant_execution --------------------------------------------------------------------


def _decide_grant(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission = active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state != "queued":
        bad_transition("WorkItem", item.state, cmd.kind)
    gate = execution_gate(state, item)
    if gate == "not_required":
        invalid("this WorkItem has no execution approval gate")
    if gate == "human_required" and not cmd.is_human:
        forbidden("this WorkItem's execution needs the MissionOwner's own approval")
    p = cmd.payload
    if p.integer("contractVersion", minimum=1) != item.contract_version:
        invalid(
            "the approval must name the current contract version", current=item.contract_version
        )
    if execution_approved(item):
        invalid("execution of this contract version is already approved")
    approval: Json = {
        "approvalId": derive_id(state.group_id, "approval", drafts.next_sequence),
        "kind": "work_execution",
        "decision": "approved",
        "missionId": mission.mission_id,
        "groupId": state.group_id,
        "workItemId": item.work_item_id,
        "missionRevision": mission.revision,
        "artifactHashes": [],
        "approver": cmd.actor,
        "comments": p.opt_text("comments", max_length=10000) or "",
        "conditions": p.text_list("conditions"),
        "occurredAt": ctx.now,
    }
    version = mission.approval_policy.get("policyVersion")
    if version is not None:
        approval["acceptancePolicyVersion"] = version
    drafts.add(
        "approval.execution.granted",
        ("work_item", item.work_item_id),
        {"approval": approval, "contractVersion": item.contract_version, "gate": gate},
        work_item_id=item.work_item_id,
    )


def _evolve_granted(state: GroupState, event: Json) -> None:
    item = state.work_items[event["workItemId"]]
    approval = event["payload"]["approval"]
    item.execution_approval = {
        "approvalId": approval["approvalId"],
        "contractVersion": event["payload"]["contractVersion"],
        "approver": approval["approver"],
        "grantedAt": approval["occurredAt"],
    }
    touch(item, event)


RULES = (
    CommandRule(
        "approval.grant_execution",
        _decide_grant,
        owner_or_service,
        target=work_item_target,
        payload=members("contractVersion", "comments", "conditions"),
        clauses=("MWP-AUT-003",),
    ),
)

EVOLVERS = {"approval.execution.granted": _evolve_granted}
