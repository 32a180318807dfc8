"""The Mission lifecycle (spec 7.1, 7.3): creation, submission, human Approval, closure.

Submission rule: the Coordinator may submit only when every WorkItem is settled (``verified``,
``cancelled`` or ``failed``) and at least one is ``verified``; the submitted Artifact set must
be non-empty and drawn from the verified WorkItems' submissions. The submission fixes the
Mission revision (the one its own Event produces) that the MissionOwner approves.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_LEDGER, AuthorityContext, Envelope
from mwp.core.group.approval import APPROVAL_MEMBER, signed_mission_approval
from mwp.core.group.clock import reached
from mwp.core.group.coordinator_lease import (
    assignment,
    coordinator_session,
    lease_from_payload,
    lease_payload,
    lease_seconds,
    new_lease,
)
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id, main_conversation_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.membership import add_grant, grant
from mwp.core.group.payload import members
from mwp.core.group.rejection import bad_transition, forbidden, invalid, reject, revision_conflict
from mwp.core.group.roles import (
    anyone,
    coordinator_only,
    coordinator_or_service,
    owner_only,
    owner_or_service,
)
from mwp.core.group.rules import CommandRule, by_agent
from mwp.core.group.state import (
    Conversation,
    CoordinatorLease,
    GroupState,
    Mission,
    MissionSubmission,
    WorkItem,
)
from mwp.core.kinds import SETTLED_WORK_STATES, UNFINISHED_WORK_STATES
from mwp.core.models import DocumentInvalid, validate_document

Json = dict[str, Any]

_DEFAULT_APPROVAL_POLICY = {"finalHumanApproval": True, "highRiskExecutionApproval": True}


def mission_document(state: GroupState) -> Json:
    """The mission.schema.json object of the current Mission."""
    m, lease = state.mission, state.coordinator
    assert m is not None and lease is not None
    doc: Json = {
        "missionId": m.mission_id,
        "groupId": state.group_id,
        "revision": m.revision,
        "objective": m.objective,
        "definitionOfDone": m.definition_of_done,
        "missionOwner": m.owner,
        "coordinator": assignment(lease),
        "state": m.state,
        "budget": m.budget,
        "deadline": m.deadline,
        "approvalPolicy": m.approval_policy,
        "createdAt": m.created_at,
    }
    if m.follow_up_to is not None:
        doc["followUpToMissionId"] = m.follow_up_to
    if m.parent is not None:
        doc["parent"] = m.parent
    return doc


def conversation_document(state: GroupState, c: Conversation) -> Json:
    doc: Json = {
        "conversationId": c.conversation_id,
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "type": c.type,
        "title": c.title,
        "access": {"mode": "group"},
        "createdBy": c.created_by,
        "createdAt": c.created_at,
        "state": "active",
        "revision": c.revision,
    }
    if c.primary_work_item_id is not None:
        doc["primaryWorkItemId"] = c.primary_work_item_id
    return doc


def conversation_from_document(doc: Json) -> Conversation:
    return Conversation(
        conversation_id=doc["conversationId"],
        type=doc["type"],
        title=doc["title"],
        created_by=doc["createdBy"],
        created_at=doc["createdAt"],
        revision=doc["revision"],
        primary_work_item_id=doc.get("primaryWorkItemId"),
    )


def _require_state(state: GroupState, cmd: Incoming, required: str) -> Mission:
    mission = state.mission
    assert mission is not None
    if mission.state != required:
        bad_transition("Mission", mission.state, cmd.kind)
    return mission


def _mission_event(state: GroupState, event: Json) -> Mission:
    mission = state.mission
    assert mission is not None
    mission.revision = event["aggregateRevision"]
    mission.updated_at = event["occurredAt"]
    return mission


# --- mission.create / mission.create_follow_up ---------------------------------------------------


def _decide_create(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    if state.mission is not None:
        bad_transition("Mission", state.mission.state, cmd.kind)
    if not cmd.is_human:
        forbidden("a root Mission is created by its human MissionOwner")
    group_id = cmd.group_id
    if group_id is None:
        invalid("the Command must name the Group being created")
    p = cmd.payload
    if p.has("groupId") and p.id("groupId") != group_id:
        invalid("payload.groupId differs from the Command's groupId")
    mission_id = p.id("missionId")
    deadline = p.timestamp("deadline")
    if reached(ctx.now, deadline):
        invalid("the Mission deadline has already passed")
    coordinator_id = p.id("coordinatorAgentId")
    if coordinator_id == cmd.actor_id:
        invalid("the MissionOwner cannot be the Coordinator")
    card = p.integer("coordinatorAgentCardVersion", minimum=1, default=1)
    seconds = lease_seconds(cmd)
    session = coordinator_session(ctx, coordinator_id)
    follow_up_to = None
    if cmd.kind == "mission.create_follow_up":
        follow_up_to = p.id("followUpToMissionId")
        owner_of_approved = ctx.approved_missions.get(follow_up_to)
        if owner_of_approved is None:
            invalid("a follow-up must link to an approved Mission", missionId=follow_up_to)
        if owner_of_approved != cmd.actor_id:
            forbidden("only the approved Mission's MissionOwner may create its follow-up")
    lease = new_lease(group_id, coordinator_id, card, 1, session, ctx.now, seconds)
    mission_doc: Json = {
        "missionId": mission_id,
        "groupId": group_id,
        "revision": 1,
        "objective": p.raw("objective"),
        "definitionOfDone": p.raw("definitionOfDone"),
        "missionOwner": cmd.actor,
        "coordinator": assignment(lease),
        "state": "active",
        "budget": p.raw("budget"),
        "deadline": deadline,
        "approvalPolicy": p.raw("approvalPolicy")
        if p.has("approvalPolicy")
        else dict(_DEFAULT_APPROVAL_POLICY),
        "createdAt": ctx.now,
    }
    if follow_up_to is not None:
        mission_doc["followUpToMissionId"] = follow_up_to
    kind = "mission.created" if follow_up_to is None else "mission.follow_up.created"
    found_group(
        drafts,
        kind,
        validated_mission(mission_doc),
        lease,
        title=p.opt_text("title", max_length=500),
        now=ctx.now,
        reason=cmd.kind,
    )


def validated_mission(mission_doc: Json) -> Json:
    """The Mission document as mission.schema.json normalizes it, or INVALID_COMMAND."""
    try:
        model = validate_document("mission.schema.json", mission_doc)
    except DocumentInvalid as exc:
        invalid(f"the Mission is invalid: {exc.reason}", reason=exc.reason)
    doc = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    criteria = [c["criterionId"] for c in doc["definitionOfDone"]]
    if len(set(criteria)) != len(criteria):
        invalid("definitionOfDone criterion IDs must be unique")
    return doc


def found_group(
    drafts: Drafts,
    kind: str,
    mission_doc: Json,
    lease: CoordinatorLease,
    *,
    title: str | None,
    now: str,
    reason: str,
    extra: Json | None = None,
) -> None:
    """The Events that bring a Group into existence: its Mission with the main Conversation
    and Coordinator lease, then the MissionOwner's and the Coordinator's Memberships."""
    group_id, mission_id = mission_doc["groupId"], mission_doc["missionId"]
    owner = mission_doc["missionOwner"]
    conversation = Conversation(
        conversation_id=main_conversation_id(group_id),
        type="group",
        title=title or "Mission planning",
        created_by=owner,
        created_at=now,
    )
    # Documents are built before the Group exists, so give them its identity explicitly.
    scratch = GroupState(group_id=group_id)
    scratch.mission = Mission(mission_id, 0, "", [], owner, "", {}, "", {}, "", None, "", "")
    payload = {
        "mission": mission_doc,
        "mainConversation": conversation_document(scratch, conversation),
        **lease_payload(scratch, lease),
        **(extra or {}),
    }
    drafts.add(kind, ("mission", mission_id), payload)
    for member, role in ((owner, "mission_owner"), (_agent(lease.agent_id), "coordinator")):
        doc = grant(scratch, member, role, now=now, sequence=drafts.next_sequence)
        assert doc is not None
        add_grant(drafts, doc, reason)


def _agent(agent_id: str) -> Json:
    return {"type": "agent", "id": agent_id}


def _evolve_created(state: GroupState, event: Json) -> None:
    payload = event["payload"]
    doc, conversation = payload["mission"], payload["mainConversation"]
    state.group_id = event["groupId"]
    state.mission = Mission(
        mission_id=doc["missionId"],
        revision=event["aggregateRevision"],
        objective=doc["objective"],
        definition_of_done=doc["definitionOfDone"],
        owner=doc["missionOwner"],
        state=doc["state"],
        budget=doc["budget"],
        deadline=doc["deadline"],
        approval_policy=doc["approvalPolicy"],
        created_at=doc["createdAt"],
        follow_up_to=doc.get("followUpToMissionId"),
        main_conversation_id=conversation["conversationId"],
        updated_at=event["occurredAt"],
        parent=doc.get("parent"),
    )
    state.conversations[conversation["conversationId"]] = conversation_from_document(conversation)
    state.coordinator = lease_from_payload(payload, 1)


# --- mission.submit_for_approval -----------------------------------------------------------------


def _decide_submit(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission = _require_state(state, cmd, "active")
    p = cmd.payload
    hashes = p.sha256_list("artifactHashes", min_items=1)
    summary = p.opt_text("summary", max_length=10000)
    unsettled = [
        w.work_item_id for w in state.work_items.values() if w.state not in SETTLED_WORK_STATES
    ]
    if unsettled:
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            "every WorkItem must be verified, cancelled or failed before submission",
            unsettledWorkItemIds=unsettled[:100],
        )
    verified = [w for w in state.settled.values() if w.state == "verified"]
    if not verified:
        reject(ErrorCode.INVALID_STATE_TRANSITION, "no WorkItem has been verified")
    produced = {h for w in verified for h in w.artifact_hashes}
    unknown = [h for h in hashes if h not in produced]
    if unknown:
        invalid("submitted Artifacts must come from verified WorkItems", unknownArtifacts=unknown)
    payload: Json = {
        "missionRevision": mission.revision + 1,
        "artifactHashes": hashes,
        "verifiedWorkItemIds": [w.work_item_id for w in verified],
    }
    if summary is not None:
        payload["summary"] = summary
    drafts.add("mission.submitted_for_approval", ("mission", mission.mission_id), payload)


def _evolve_submitted(state: GroupState, event: Json) -> None:
    mission = _mission_event(state, event)
    payload = event["payload"]
    mission.state = "awaiting_approval"
    mission.submission = MissionSubmission(
        payload["missionRevision"],
        payload["artifactHashes"],
        event["occurredAt"],
        event["actor"]["id"],
    )


# --- mission.approve / mission.request_changes ---------------------------------------------------


def _decision(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts, decision: str
) -> Json:
    mission = _require_state(state, cmd, "awaiting_approval")
    submission = mission.submission
    assert submission is not None
    p = cmd.payload
    revision = p.integer("missionRevision")
    if revision != submission.revision:
        revision_conflict(revision, submission.revision, "submitted Mission")
    if decision == "approved":
        hashes = p.sha256_list("artifactHashes", min_items=1)
        if set(hashes) != set(submission.artifact_hashes):
            invalid(
                "the approval must name exactly the submitted Artifact set",
                submittedArtifacts=submission.artifact_hashes,
            )
        comments = p.opt_text("comments", max_length=10000) or ""
    else:
        comments = p.text("reason", max_length=10000)
    approval: Json = {
        "approvalId": derive_id(state.group_id, "approval", drafts.next_sequence),
        "kind": "child_mission" if mission.parent is not None else "mission_final",
        "decision": decision,
        "missionId": mission.mission_id,
        "groupId": state.group_id,
        "missionRevision": submission.revision,
        "artifactHashes": submission.artifact_hashes,
        "approver": cmd.actor,
        "comments": comments,
        "conditions": p.text_list("conditions"),
        "occurredAt": ctx.now,
    }
    version = mission.approval_policy.get("policyVersion")
    if version is not None:
        approval["acceptancePolicyVersion"] = version
    return approval


def _signed_decision(state: GroupState, cmd: Incoming, outside: tuple[str, ...]) -> Json:
    """From the ledger rules on: the approver's signed decision of the submission, not one
    the Group writes; ``outside`` names the members that belong inside it."""
    mission = _require_state(state, cmd, "awaiting_approval")
    assert mission.submission is not None
    revision = cmd.payload.integer("missionRevision")
    if revision != mission.submission.revision:
        revision_conflict(revision, mission.submission.revision, "submitted Mission")
    for member in outside:
        if cmd.payload.has(member):
            invalid(
                f"payload.{member} belongs inside the signed Approval", member=f"payload.{member}"
            )
    return signed_mission_approval(state, cmd, mission, mission.submission)


def _unsigned_decision(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts, decision: str
) -> Json:
    """Under older rules: the decision as the Group writes it, the member unknown."""
    if cmd.payload.has(APPROVAL_MEMBER):
        invalid(
            f"payload.{APPROVAL_MEMBER} is not known to this Group's rules",
            member=f"payload.{APPROVAL_MEMBER}",
        )
    return _decision(state, cmd, ctx, drafts, decision)


def _decide_approve(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    if ctx.rules >= RULES_LEDGER:
        _decision(state, cmd, ctx, drafts, "approved")  # the revision and the Artifact set
        approval = _signed_decision(state, cmd, ("comments", "conditions"))
    else:
        approval = _unsigned_decision(state, cmd, ctx, drafts, "approved")
    drafts.add("mission.approved", ("mission", state.mission_id), {"approval": approval})


def _evolve_approved(state: GroupState, event: Json) -> None:
    mission = _mission_event(state, event)
    mission.state = "approved"
    mission.approval = event["payload"]["approval"]


def _decide_changes(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    if ctx.rules >= RULES_LEDGER:
        approval = _signed_decision(state, cmd, ("reason", "conditions"))  # reason: comments
    else:
        approval = _unsigned_decision(state, cmd, ctx, drafts, "changes_requested")
    drafts.add(
        "mission.changes_requested",
        ("mission", state.mission_id),
        {"approval": approval, "reason": approval["comments"]},
    )


def _evolve_changes_requested(state: GroupState, event: Json) -> None:
    mission = _mission_event(state, event)
    mission.state = "active"
    mission.approval = event["payload"]["approval"]
    mission.submission = None


# --- mission.cancel / mission.terminate ----------------------------------------------------------


def _close(
    cmd: Incoming,
    state: GroupState,
    ctx: AuthorityContext,
    drafts: Drafts,
    work_kind: str,
    kind: str,
) -> None:
    mission = state.mission
    assert mission is not None
    if mission.terminal:
        bad_transition("Mission", mission.state, cmd.kind)
    reason = cmd.payload.opt_text("reason") or cmd.kind
    # From the ledger rules on, each WorkItem the termination fails gets its failure Evidence.
    author = ctx if work_kind == "work.failed" and ctx.rules >= RULES_LEDGER else None
    close_drafts(state, drafts, work_kind, kind, reason, evidence_by=author)


def close_drafts(
    state: GroupState,
    drafts: Drafts,
    work_kind: str,
    kind: str,
    reason: str,
    *,
    evidence_by: AuthorityContext | None = None,
    evidence_ids: list[str] | None = None,
    failed_first: str | None = None,
    extra: Json | None = None,
) -> None:
    """End the Mission; its terminal state propagates to every unfinished WorkItem (spec
    10.2, last row). With ``evidence_by``, each ``work.failed`` carries a failure Evidence
    record that context's Group Authority produced; else it cites ``evidence_ids``.
    ``failed_first`` names an item already failed by an earlier draft of the same decision:
    it is listed among the closed items but not failed again."""
    mission = state.mission
    assert mission is not None
    closed = [] if failed_first is None else [failed_first]
    for item in state.work_items.values():
        if item.state in UNFINISHED_WORK_STATES and item.work_item_id != failed_first:
            closed.append(item.work_item_id)
            payload: Json = {"reason": reason, "propagatedFrom": mission.mission_id}
            if work_kind == "work.failed":
                payload["failureEvidenceIds"] = list(evidence_ids or [])
                if evidence_by is not None:
                    record = failure_evidence(state, item, drafts, evidence_by, reason)
                    payload["failureEvidenceIds"] = [record["evidenceId"]]
                    payload["failureEvidence"] = [record]
            drafts.add(
                work_kind, ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
            )
    closing: Json = {"reason": reason, "workItemIds": closed, **(extra or {})}
    drafts.add(kind, ("mission", mission.mission_id), closing)


def failure_evidence(
    state: GroupState, item: WorkItem, drafts: Drafts, ctx: AuthorityContext, reason: str
) -> Json:
    """The ``failure_report`` Evidence (evidence.schema.json) of a WorkItem its Mission's end
    fails, produced by the Group Authority. The pure core holds no key: the record is the one
    the shell had the Group Authority sign (``ctx.signed_evidence``, from
    :func:`termination_evidence`) when its body is exactly this decision's, else unsigned."""
    mission = state.mission
    assert mission is not None
    sequence = drafts.next_sequence  # the work.failed Event's: the ID is derived from it
    # A submitted result that was never reviewed is what the failure leaves behind.
    pending = item.submission if item.state == "submitted" else None
    submitted = pending["artifactHashes"] if pending is not None else []
    record: Json = {
        "evidenceId": derive_id(state.group_id, "failure-evidence", sequence),
        "missionId": mission.mission_id,
        "groupId": state.group_id,
        "workItemId": item.work_item_id,
        "type": "failure_report",
        "subject": {"type": "work_item", "id": item.work_item_id},
        "criterionIds": [c["criterionId"] for c in item.contract["acceptanceCriteria"]],
        "method": "The Group Authority recorded that the WorkItem's Mission ended failed "
        "before the WorkItem was settled; no criterion was verified.",
        "result": "failed",
        "details": {
            "reason": reason,
            "previousState": item.state,
            "propagatedFrom": mission.mission_id,
        },
        "artifactHashes": sorted(set(submitted)),
        "generatedBy": ctx.authority.to_json(),
        "createdAt": ctx.now,
    }
    signed = ctx.signed_evidence.get(item.work_item_id)
    if signed is not None and {k: v for k, v in signed.items() if k != "signature"} == record:
        return dict(signed)
    return record


def termination_evidence(state: GroupState, envelope: Envelope, ctx: AuthorityContext) -> Json:
    """The unsigned failure Evidence records (WorkItem ID -> record) that deciding
    ``envelope``, a ``mission.terminate``, under ``ctx`` would write; empty for any other
    Command, older rules or a closed Mission. The shell has them signed and hands them back
    in ``ctx.signed_evidence``. Call it only for a Command ``check`` accepted."""
    mission = state.mission
    cmd = Incoming.parse(envelope)
    if cmd.kind != "mission.terminate" or ctx.rules < RULES_LEDGER:
        return {}
    if mission is None or mission.terminal:
        return {}
    drafts = Drafts(state.sequence + 1)  # as decide() starts them (decision.py)
    unsigned = replace(ctx, signed_evidence={})
    reason = cmd.payload.opt_text("reason") or cmd.kind
    close_drafts(state, drafts, "work.failed", "mission.terminated", reason, evidence_by=unsigned)
    return {
        d.work_item_id: d.payload["failureEvidence"][0]
        for d in drafts.items
        if d.work_item_id is not None and "failureEvidence" in d.payload
    }


def _decide_cancel(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    _close(cmd, state, ctx, drafts, "work.cancelled", "mission.cancelled")


def _decide_terminate(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    _close(cmd, state, ctx, drafts, "work.failed", "mission.terminated")


def _closer(final_state: str) -> Any:
    def evolve(state: GroupState, event: Json) -> None:
        mission = _mission_event(state, event)
        mission.state = final_state
        mission.closing_reason = event["payload"]["reason"]

    return evolve


RULES = (
    CommandRule(
        "mission.create",
        _decide_create,
        anyone,
        creates_group=True,
        payload=members(
            "missionId",
            "objective",
            "definitionOfDone",
            "budget",
            "deadline",
            "coordinatorAgentId",
            "coordinatorAgentCardVersion",
            "leaseSeconds",
            "approvalPolicy",
            "groupId",
            "title",
        ),
        clauses=("MWP-MSN-001", "MWP-MSN-015"),
    ),
    CommandRule(
        "mission.create_follow_up",
        _decide_create,
        anyone,
        creates_group=True,
        payload=members(
            "missionId",
            "objective",
            "definitionOfDone",
            "budget",
            "deadline",
            "coordinatorAgentId",
            "coordinatorAgentCardVersion",
            "leaseSeconds",
            "approvalPolicy",
            "groupId",
            "title",
            "followUpToMissionId",
        ),
        clauses=("MWP-MSN-001", "MWP-MSN-002", "MWP-MSN-015"),
    ),
    CommandRule(
        "mission.submit_for_approval",
        _decide_submit,
        coordinator_only,
        coordinator=by_agent,
        payload=members("artifactHashes", "summary"),
        clauses=("MWP-EVT-002", "MWP-MSN-004", "MWP-MSN-008"),
    ),
    CommandRule(
        "mission.approve",
        _decide_approve,
        owner_only,
        payload=members(
            "missionRevision", "artifactHashes", "comments", "conditions", APPROVAL_MEMBER
        ),
        clauses=("MWP-EVT-007", "MWP-MSN-002", "MWP-MSN-008"),
    ),
    CommandRule(
        "mission.request_changes",
        _decide_changes,
        owner_only,
        payload=members("missionRevision", "reason", "conditions", APPROVAL_MEMBER),
        clauses=("MWP-EVT-007", "MWP-MSN-002", "MWP-MSN-008"),
    ),
    CommandRule(
        "mission.cancel",
        _decide_cancel,
        owner_or_service,
        payload=members("reason"),
        clauses=("MWP-AUT-006", "MWP-MSN-002", "MWP-MSN-003"),
    ),
    CommandRule(
        "mission.terminate",
        _decide_terminate,
        coordinator_or_service,
        coordinator=by_agent,
        payload=members("reason"),
        clauses=("MWP-AUT-006", "MWP-EVT-002", "MWP-MSN-002", "MWP-WRK-003"),
    ),
)

EVOLVERS = {
    "mission.created": _evolve_created,
    "mission.follow_up.created": _evolve_created,
    "mission.submitted_for_approval": _evolve_submitted,
    "mission.approved": _evolve_approved,
    "mission.changes_requested": _evolve_changes_requested,
    "mission.cancelled": _closer("cancelled"),
    "mission.terminated": _closer("failed"),
}
