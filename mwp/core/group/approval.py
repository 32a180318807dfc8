"""The execution approval gate (spec 12, 10.2 ``approval.grant_execution``).

A WorkItem needs a signed execution approval before it starts when its contract says so
(``policy_required`` or ``human_required``), or when the Mission's policy demands approval of
high-risk work and the contract's side-effect risk is ``high_risk`` or ``destructive`` (then
``policy_required``). ``human_required`` is granted by the MissionOwner only; ``policy_required``
by the MissionOwner or Organization policy. An approval is bound to the contract version it
saw: a revised contract needs a new one.

The Mission's final Approval (spec 7.3): from rules ``RULES_LEDGER`` on, ``mission.approve``
carries the Approval itself (``payload.approval``, approval.schema.json), signed by its
approver, and ``mission.approved`` carries that document unchanged; so does
``mission.request_changes`` (decision ``changes_requested``, its reason in the document's
``comments``) and ``mission.changes_requested``. The core checks what the
Group knows (:func:`signed_mission_approval`): the approver is the Command's actor, the
document approves this Mission and Group, the submitted revision and exactly its Artifact
set, under the Mission's approval-policy version. The core cannot check the signature (it
holds no Registry evidence); the shell verifies it, on what :func:`embedded_approval` returns,
before the Command is decided, so the signer is the approver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import Payload, members
from mwp.core.group.rejection import bad_transition, forbidden, invalid, reject, revision_conflict
from mwp.core.group.roles import owner_or_service
from mwp.core.group.rules import CommandRule, work_item_target
from mwp.core.group.state import GroupState, Mission, MissionSubmission, WorkItem
from mwp.core.group.work_item_state import active_mission, get_item, touch
from mwp.core.models import DocumentInvalid, validate_document

Json = dict[str, Any]

_HIGH_RISK = frozenset({"high_risk", "destructive"})

APPROVAL_MEMBER: Final = "approval"
APPROVE_KIND: Final = "mission.approve"
CHANGES_KIND: Final = "mission.request_changes"
# The decision each Command's signed Approval must record.
DECISIONS: Final = {APPROVE_KIND: "approved", CHANGES_KIND: "changes_requested"}
# The approval-policy version an Approval names when the Mission's policy states none: the
# schema requires one, and a fixed spelling keeps the binding to the Mission's policy exact.
DEFAULT_POLICY_VERSION: Final = "1.0.0"

CLAUSES: tuple[str, ...] = ("MWP-MSN-008",)


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


def policy_version(mission: Mission) -> str:
    return str(mission.approval_policy.get("policyVersion", DEFAULT_POLICY_VERSION))


# --- the signed Approval of mission.approve ------------------------------------------------------


def embedded_approval(kind: str, payload: Mapping[str, Any]) -> Json | None:
    """The signed Approval a ``mission.approve`` or ``mission.request_changes`` carries,
    unchanged; None if none (the core refuses its absence). The shell verifies it against
    the Registry evidence first::

        approval = embedded_approval(command["kind"], command["payload"])
        if approval is not None:
            verify_value(approval, PROFILES["approval"], evidence)  # signer: approver
    """
    if kind not in DECISIONS or APPROVAL_MEMBER not in payload:
        return None
    return _approval_object(Payload(payload))


def _approval_object(payload: Payload) -> Json:
    value = payload.raw(APPROVAL_MEMBER)
    if not isinstance(value, dict):
        invalid(
            f"payload.{APPROVAL_MEMBER}: must be an object",
            member=f"payload.{APPROVAL_MEMBER}",
            reason="must be an object",
        )
    return value


def _wrong(member: str, message: str, **details: Any) -> NoReturn:
    invalid(message, member=f"payload.{APPROVAL_MEMBER}.{member}", **details)


def signed_mission_approval(
    state: GroupState, cmd: Incoming, mission: Mission, submission: MissionSubmission
) -> Json:
    """The signed Approval ``cmd`` carries, if it decides exactly this submission as its
    kind decides (approves it, or requests changes with a reason)."""
    approval = _approval_object(cmd.payload)
    try:
        validate_document("approval.schema.json", approval)
    except DocumentInvalid as exc:
        reject(
            ErrorCode.SCHEMA_VALIDATION_FAILED,
            f"the Approval is invalid: {exc.reason}",
            member=f"payload.{APPROVAL_MEMBER}",
            reason=exc.reason,
        )
    if approval["approver"] != cmd.actor:
        _wrong("approver", "the Approval's approver must be the Command's actor")
    kind = "child_mission" if mission.parent is not None else "mission_final"
    expected: Json = {
        "kind": kind,
        "decision": DECISIONS[cmd.kind],
        "missionId": mission.mission_id,
        "groupId": state.group_id,
        "acceptancePolicyVersion": policy_version(mission),
    }
    for member, value in expected.items():
        if approval[member] != value:
            _wrong(member, f"payload.{APPROVAL_MEMBER}.{member} does not match", expected=value)
    if approval["missionRevision"] != submission.revision:
        revision_conflict(approval["missionRevision"], submission.revision, "submitted Mission")
    if set(approval["artifactHashes"]) != set(submission.artifact_hashes):
        _wrong(
            "artifactHashes",
            "the Approval must name exactly the submitted Artifact set",
            submittedArtifacts=submission.artifact_hashes,
        )
    for member in ("workItemId", "revokesApprovalId"):
        if member in approval:
            _wrong(member, "a Mission's Approval names no WorkItem and revokes nothing")
    if cmd.kind == CHANGES_KIND and not approval["comments"].strip():
        _wrong("comments", "a request for changes states its reason in the Approval's comments")
    earlier = mission.approval or {}
    if approval["approvalId"] == earlier.get("approvalId"):
        _wrong("approvalId", "the Approval ID is already recorded in this Group")
    return approval


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
