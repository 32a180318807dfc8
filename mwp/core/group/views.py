"""Read-only views: schema-shaped documents of the Mission, WorkItems and leases.

``mission_view()`` and ``work_item_view()`` are the schema objects plus extra members; the
extra member names are listed in :data:`MISSION_VIEW_EXTRAS` and :data:`WORK_ITEM_VIEW_EXTRAS`
so a caller can strip them (:func:`schema_part`) and validate the rest against the schema.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from mwp.core.group.allocation import DIMENSIONS, figures
from mwp.core.group.approval import execution_approved, execution_gate
from mwp.core.group.budget import item_remaining, left
from mwp.core.group.clock import reached
from mwp.core.group.coordinator_lease import lease_document
from mwp.core.group.dependencies import unsatisfied
from mwp.core.group.membership import membership_document
from mwp.core.group.mission import mission_document
from mwp.core.group.state import (
    BlockedLease,
    ExecutionLease,
    GroupState,
    Ownership,
    SettledWorkItem,
    WorkItem,
)

Json = dict[str, Any]

MISSION_VIEW_EXTRAS = frozenset(
    {
        "sequence",
        "mainConversationId",
        "coordinatorLease",
        "memberships",
        "workItems",
        "proposals",
        "submission",
        "approval",
        "budgetAllocated",
        "budgetUsed",
        "budgetRemaining",
        "closingReason",
        "artifacts",
        "archive",
    }
)

WORK_ITEM_VIEW_EXTRAS = frozenset(
    {
        "ownershipEpoch",
        "ownerFencedReason",
        "startBy",
        "ownershipLease",
        "executionLease",
        "blockedLease",
        "executionGate",
        "executionApproved",
        "pendingDependencies",
        "checkpoint",
        "submissionEvidence",
        "result",
        "failure",
        "cancellation",
        "proposalId",
        "parentWorkItemId",
        "childMission",
        "contractEvents",
        "resourceUsage",
    }
)


def schema_part(view: Json, extras: frozenset[str]) -> Json:
    return {k: v for k, v in view.items() if k not in extras}


# --- leases --------------------------------------------------------------------------------------


def _lease(state: GroupState, item: WorkItem, lease_id: str, lease_type: str, holder: str) -> Json:
    return {
        "leaseId": lease_id,
        "leaseType": lease_type,
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "workItemId": item.work_item_id,
        "holderAgentId": holder,
    }


def _closed_if_due(doc: Json, now: str | None) -> Json:
    if now is not None and reached(now, doc["expiresAt"]):
        doc.update(state="expired", closedAt=doc["expiresAt"], closureReason="lease expired")
    return doc


def ownership_lease_document(
    state: GroupState, item: WorkItem, owner: Ownership, now: str | None = None
) -> Json:
    doc = _lease(state, item, owner.lease_id, "ownership", owner.agent_id)
    doc.update(
        sessionEpoch=owner.session_epoch,
        ownershipEpoch=owner.epoch,
        startBy=owner.start_by,
        issuedAt=owner.accepted_at,
        startsAt=owner.accepted_at,
        expiresAt=owner.start_by,
        state="active",
        renewalCount=0,
    )
    return _closed_if_due(doc, now)


def execution_lease_document(
    state: GroupState, item: WorkItem, lease: ExecutionLease, now: str | None = None
) -> Json:
    doc = _lease(state, item, lease.lease_id, "execution", lease.agent_id)
    doc.update(
        sessionEpoch=lease.session_epoch,
        ownershipEpoch=lease.ownership_epoch,
        issuedAt=lease.started_at,
        startsAt=lease.started_at,
        expiresAt=lease.expires_at,
        state="active",
        renewalCount=lease.renewal_count,
    )
    if lease.last_renewed_at is not None:
        doc["lastRenewedAt"] = lease.last_renewed_at
    return _closed_if_due(doc, now)


def execution_lease_from_document(doc: Json) -> ExecutionLease:
    return ExecutionLease(
        lease_id=doc["leaseId"],
        agent_id=doc["holderAgentId"],
        session_epoch=doc["sessionEpoch"],
        ownership_epoch=doc["ownershipEpoch"],
        started_at=doc["startsAt"],
        expires_at=doc["expiresAt"],
        renewal_count=doc["renewalCount"],
        last_renewed_at=doc.get("lastRenewedAt"),
    )


def blocked_lease_document(
    state: GroupState,
    item: WorkItem,
    lease: BlockedLease,
    owner: Ownership,
    now: str | None = None,
) -> Json:
    doc = _lease(state, item, lease.lease_id, "blocked", owner.agent_id)
    doc.update(
        sessionEpoch=owner.session_epoch,
        ownershipEpoch=owner.epoch,
        issuedAt=lease.issued_at,
        startsAt=lease.issued_at,
        expiresAt=lease.expires_at,
        state="active",
        renewalCount=0,
    )
    return _closed_if_due(doc, now)


# --- WorkItem ------------------------------------------------------------------------------------


def work_item_document(state: GroupState, item: WorkItem, now: str | None = None) -> Json:
    """The work-item.schema.json object; with ``now``, lapsed pending offers show expired."""
    doc: Json = {
        "workItemId": item.work_item_id,
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "conversationId": item.conversation_id,
        "revision": item.revision,
        "state": item.state,
        "exclusive": item.exclusive,
        "contract": item.contract,
        "createdBy": item.created_by,
        "authorizedBy": item.authorized_by,
        "createdAt": item.created_at,
        "updatedAt": item.updated_at,
    }
    if item.offers:
        doc["offers"] = [
            {
                "offerId": o.offer_id,
                "agentId": o.agent_id,
                "agentCardVersion": o.agent_card_version,
                "expiresAt": o.expires_at,
                "status": "expired"
                if o.status == "pending" and now is not None and reached(now, o.expires_at)
                else o.status,
            }
            for o in item.offers
        ]
    owner = item.owner
    if owner is not None:
        doc["owner"] = {
            "agentId": owner.agent_id,
            "agentCardVersion": owner.agent_card_version,
            "capabilityPins": owner.capability_pins,
            "ownershipEpoch": owner.epoch,
            "ownershipLeaseId": owner.lease_id,
            "acceptedAt": owner.accepted_at,
        }
    if item.selection_basis is not None and owner is not None:
        doc["selectionBasis"] = item.selection_basis
    if item.progress is not None:
        doc["progress"] = item.progress
    if item.schedule_estimate is not None:
        doc["scheduleEstimate"] = item.schedule_estimate
    if item.submission is not None:
        doc["submission"] = {
            "artifactHashes": item.submission["artifactHashes"],
            "evidenceIds": item.submission["evidenceIds"],
            "submittedAt": item.submission["submittedAt"],
        }
    return doc


def work_item_view(state: GroupState, item: WorkItem) -> Json:
    now = state.clock or None
    view = work_item_document(state, item, now)
    owner = item.owner
    extras: Json = {
        "ownershipEpoch": item.ownership_epoch,
        "executionGate": execution_gate(state, item),
        "executionApproved": execution_approved(item),
        "pendingDependencies": unsatisfied(state, item),
        "proposalId": item.proposal_id,
        "parentWorkItemId": item.parent_work_item_id,
        "childMission": item.child_mission,
        "checkpoint": item.checkpoint,
        "result": item.result,
        "failure": item.failure,
        "cancellation": item.cancellation,
        # Where its Work Contract was stated: a Context Package for an offer cites these.
        "contractEvents": list(item.contract_events),
    }
    if owner is not None:
        extras["ownerFencedReason"] = owner.fenced_reason
        extras["startBy"] = owner.start_by
        extras["ownershipLease"] = ownership_lease_document(state, item, owner, now)
        if item.blocked_lease is not None:
            extras["blockedLease"] = blocked_lease_document(
                state, item, item.blocked_lease, owner, now
            )
    if item.execution_lease is not None:
        extras["executionLease"] = execution_lease_document(state, item, item.execution_lease, now)
    if item.submission is not None:
        extras["submissionEvidence"] = item.submission["evidence"]
    usage = state.usage.get(item.work_item_id)
    if usage is not None:  # absent until usage is recorded, as in views from before the ledger
        money = usage.get("currency") or item.contract["budget"].get("currency")
        extras["resourceUsage"] = {
            "cumulative": usage,
            "remaining": figures(item_remaining(state, item.work_item_id), money),
        }
    view.update({k: v for k, v in extras.items() if v is not None})
    return view


def work_item_search_attributes(item: WorkItem) -> dict[str, str]:
    owner = item.owner
    return {
        "WorkItemState": item.state,
        "Owner": owner.agent_id if owner is not None and owner.live else "",
        "Capability": ",".join(
            f"{c['id']}@{c['version']}" for c in item.contract["requiredCapabilities"]
        ),
    }


# --- Mission -------------------------------------------------------------------------------------


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _listed(item: WorkItem | SettledWorkItem, owner: str | None) -> Json:
    """A WorkItem's line in the Mission view (settled ones name their last owner)."""
    return {
        "workItemId": item.work_item_id,
        "state": item.state,
        "revision": item.revision,
        "owner": owner,
        "dependencyWorkItemIds": item.dependencies,
    }


def mission_view(state: GroupState) -> Json:
    mission, lease = state.mission, state.coordinator
    if mission is None or lease is None:
        return {}
    view = mission_document(state)
    limits = mission.budget
    view.update(
        {
            "sequence": state.sequence,
            "mainConversationId": mission.main_conversation_id,
            "coordinatorLease": lease_document(state, lease, state.clock or None),
            "memberships": [membership_document(state, m) for m in state.memberships.values()],
            "workItems": [
                *(
                    _listed(w, w.owner.agent_id if w.owner else None)
                    for w in state.work_items.values()
                ),
                *(_listed(w, w.owner) for w in state.settled.values()),
            ],
            "proposals": [p.to_json() for p in state.proposals.values()],
            "submission": mission.submission.to_json() if mission.submission else None,
            "approval": mission.approval,
            "budgetAllocated": {
                dimension: _number(state.allocated.get(dimension, Decimal(0)))
                for dimension in DIMENSIONS
                if dimension in limits
            },
            "closingReason": mission.closing_reason,
            "artifacts": [dict(entry) for entry in state.artifacts.values()],
        }
    )
    if mission.archive is not None:  # absent before archival, as in views from before it
        view["archive"] = dict(mission.archive)
    if state.mission_usage:  # absent until usage is recorded (resource_usage.py)
        money = state.mission_usage.get("currency") or limits.get("currency")
        view["budgetUsed"] = state.mission_usage
        view["budgetRemaining"] = figures(left(limits, state.mission_usage), money)
    return view


def search_attributes(state: GroupState) -> dict[str, str]:
    return {
        "MissionId": state.mission_id,
        "GroupId": state.group_id,
        "MissionState": state.mission.state if state.mission else "",
    }
