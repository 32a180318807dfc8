"""What a Coordinator does next, decided from what its Group's log shows (pure, no I/O).

The runtime keeps a projection of each Group it coordinates (the pure Group Authority
following the signed log) and the plans it journaled, and asks :func:`next_steps` what to do;
after each step's Events arrive it asks again. Steps are level-triggered: each follows from
the Group's state alone, so a restarted runtime takes up where it stopped, and a step already
taken (its Events not yet seen) is at worst refused by the Authority and asked again later.

* ``Renew`` the Coordinator lease when it was granted under another Session (the runtime's
  HELLO opened a new one) or less than a third of ``lease_seconds`` is left.
* ``NeedPlan`` for an active Mission with no plan; ``NeedReplan`` when the MissionOwner
  requested changes that no journaled plan answers yet; ``NeedProposal`` for each open Work
  Proposal no journaled plan answers (an item answering one is authorized citing it).
* ``Authorize`` each planned item not yet authorized (its WorkItem ID derives from the Group
  and its key).
* ``Offer`` an ``open`` or ``failed`` item once every dependency is ``verified`` and it has no
  pending offer; a ``failed`` one only while fewer than ``retryPolicy.maxAttempts`` owners
  tried it (its Ownership Epoch). An item whose owner was fenced (its lease expired, it missed
  its start, it left the Group) is offered again, to its candidates and ``reassign_to`` other
  than the agent that lost it (the Authority fences that ownership in the same transition).
* ``Promote`` an ``open`` item planned as a child Mission, once its dependencies are
  ``verified``, instead of offering it: the child's approval verifies it.
* ``ReviewResult`` each ``submitted`` item.
* ``SubmitMission`` once every planned item is ``verified``: their Artifacts, in plan order.

In a child Mission whose MissionOwner is this Coordinator (it promoted the item),
:func:`owner_steps` gives ``ApproveChild`` once the child Mission awaits Approval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mwp.coordinator.declaration import PlannedItem
from mwp.core.group.ids import derive_id
from mwp.core.wire.values import format_utc, instant_to_datetime, parse_timestamp

Json = dict[str, Any]

DEFAULT_BUDGET = {"currency": "USD", "financialLimit": 10, "toolCallLimit": 100}


def work_item_id(group_id: str, key: str) -> str:
    """The WorkItem ID of the planned item ``key`` in that Group."""
    return derive_id(group_id, "coordinator-plan", key)


@dataclass(frozen=True)
class JournaledPlan:
    """A plan the runtime wrote down before acting on it: ``answers`` is ``initial`` or the ID
    of the change request (Approval) it answers."""

    answers: str
    items: tuple[PlannedItem, ...]
    proposal: bool = False  # ``answers`` is a Work Proposal's ID: its item cites it


@dataclass(frozen=True)
class Renew:
    pass


@dataclass(frozen=True)
class NeedPlan:
    pass


@dataclass(frozen=True)
class NeedReplan:
    approval: Json


@dataclass(frozen=True)
class NeedProposal:
    proposal: Json


@dataclass(frozen=True)
class Authorize:
    item: PlannedItem
    work_item_id: str
    contract: Json
    proposal_id: str | None = None  # the open Work Proposal it answers


@dataclass(frozen=True)
class Offer:
    work_item_id: str
    candidates: tuple[str, ...]
    capability: tuple[str, str]


@dataclass(frozen=True)
class ReviewResult:
    work_item_id: str


@dataclass(frozen=True)
class SubmitMission:
    artifact_hashes: tuple[str, ...]


@dataclass(frozen=True)
class Promote:
    work_item_id: str
    item: PlannedItem  # its ``child`` says what the child Mission is


@dataclass(frozen=True)
class ApproveChild:
    pass


Step = (
    Renew
    | NeedPlan
    | NeedReplan
    | NeedProposal
    | Authorize
    | Offer
    | Promote
    | ReviewResult
    | SubmitMission
    | ApproveChild
)


IdOf = Callable[[str, str], str]  # (Group ID, plan key) -> WorkItem ID


def contract_of(
    item: PlannedItem, group_id: str, now: datetime, id_of: IdOf = work_item_id
) -> Json:
    """A complete Work Contract (spec 10.1) for the planned item."""
    capability = {"id": item.capability[0], "version": item.capability[1]}
    return {
        "contractVersion": 1,
        "goal": item.goal,
        "requiredDeliverables": [
            {
                "deliverableId": "result",
                "description": f"The result of: {item.goal}",
                "mediaType": "text/plain",
                "schema": "urn:mwp:schema:text",
            }
        ],
        "acceptanceCriteria": [
            {
                "criterionId": f"criterion-{index}",
                "description": text,
                "evidenceRequired": ["deterministic_test"],
            }
            for index, text in enumerate(item.criteria, 1)
        ],
        "inputArtifacts": [],
        "dependencyWorkItemIds": [id_of(group_id, key) for key in item.depends_on],
        "allowedResources": [],
        "requiredCapabilities": [capability],
        "deadline": format_utc(now + timedelta(hours=item.deadline_hours)),
        "requestedUrgency": "normal",
        "businessImpact": "Part of the Mission's definition of done.",
        "retryPolicy": {
            "maxAttempts": 3,
            "backoff": "exponential",
            "maxDelay": "PT5M",
            "retryableFailures": ["TRANSIENT_TOOL_FAILURE"],
        },
        "budget": dict(item.budget) if item.budget is not None else dict(DEFAULT_BUDGET),
        "sideEffectRisk": "none",
        "executionApproval": "not_required",
    }


def child_payload(group_id: str, item: PlannedItem, contract: Mapping[str, Any]) -> Json:
    """``mission.create_child`` for ``item`` (its Work Contract ``contract``): the child has the
    item's budget and deadline, and IDs derived from the item's key, so a retry names the same
    child Mission."""
    child = item.child
    assert child is not None
    return {
        "childMissionId": derive_id(group_id, "child-mission", item.key),
        "childGroupId": derive_id(group_id, "child-group", item.key),
        "objective": child.objective,
        "definitionOfDone": [
            {
                "criterionId": f"done-{index}",
                "description": text,
                "evidenceRequired": ["deterministic_test"],
            }
            for index, text in enumerate(child.definition_of_done, 1)
        ],
        "budget": dict(contract["budget"]),
        "deadline": contract["deadline"],
        "coordinatorAgentId": child.coordinator,
        "failurePolicy": "block",
    }


def selection_basis(
    capability: tuple[str, str],
    available_at: str,
    reliability: Sequence[str] = (),
    rules: Sequence[str] = (),
) -> Json:
    """Why a candidate was chosen (MWP-WRK-006): structured facts, here the declared
    capability the Coordinator matched, the Events of the candidate's performance record
    (``reliability``) and the policy rules applied besides the default."""
    required = {"id": capability[0], "version": capability[1]}
    return {
        "requiredCapabilities": [required],
        "verifiedMatches": [required],
        "authorizationEligible": True,
        "availabilityEstimate": available_at,
        "expectedCost": 1,
        "reliabilityEvidence": list(reliability),
        "policyRulesApplied": ["org.default.assignment", *rules],
    }


def _lease_due(
    mission: Mapping[str, Any], session_epoch: int, lease_seconds: int, now: datetime
) -> bool:
    lease = mission.get("coordinatorLease") or {}
    if lease.get("sessionEpoch") != session_epoch:
        return True
    expires = instant_to_datetime(parse_timestamp(str(lease["expiresAt"])).instant)
    return now >= expires - timedelta(seconds=lease_seconds / 3)


def _abandoned(view: Mapping[str, Any]) -> bool:
    """Owned, but its owner was fenced: nobody will finish it unless it is offered again."""
    return view.get("state") in ("queued", "active", "blocked") and bool(
        view.get("ownerFencedReason")
    )


def _pending_offer(view: Mapping[str, Any]) -> bool:
    return any(o.get("status") == "pending" for o in view.get("offers") or [])


def next_steps(
    mission: Mapping[str, Any],
    items: Mapping[str, Mapping[str, Any]],
    plans: Sequence[JournaledPlan],
    *,
    coordinator_id: str,
    workers: Sequence[str],
    session_epoch: int,
    lease_seconds: int,
    now: datetime,
    id_of: IdOf = work_item_id,
) -> list[Step]:
    """The steps due now for the Mission view ``mission`` and its WorkItem views ``items``
    (``id_of``: how a plan key names its WorkItem, :func:`work_item_id` unless told)."""
    if mission.get("state") != "active":
        return []
    if (mission.get("coordinator") or {}).get("agentId") != coordinator_id:
        return []  # another Coordinator coordinates now
    steps: list[Step] = []
    try:
        if _lease_due(mission, session_epoch, lease_seconds, now):
            steps.append(Renew())
    except (KeyError, ValueError):
        steps.append(Renew())
    if not plans:
        return [*steps, NeedPlan()]
    approval = mission.get("approval") or {}
    answered = {p.answers for p in plans}
    if approval.get("decision") == "changes_requested" and approval["approvalId"] not in answered:
        return [*steps, NeedReplan(dict(approval))]
    unanswered = [p for p in mission.get("proposals") or [] if p["proposalId"] not in answered]
    if unanswered:
        return [*steps, *(NeedProposal(dict(p)) for p in unanswered)]
    group_id = str(mission["groupId"])
    open_proposals = {p["proposalId"] for p in mission.get("proposals") or []}
    planned = [item for plan in plans for item in plan.items]
    cites = {
        item.key: plan.answers
        for plan in plans
        if plan.proposal and plan.answers in open_proposals
        for item in plan.items
    }
    ids = {item.key: id_of(group_id, item.key) for item in planned}
    for item in planned:
        if ids[item.key] not in items:
            contract = contract_of(item, group_id, now, id_of)
            steps.append(Authorize(item, ids[item.key], contract, cites.get(item.key)))
    if any(isinstance(s, Authorize) for s in steps):
        return steps  # offer once the graph is whole
    verified = {i for i, view in items.items() if view.get("state") == "verified"}

    def ready(item: PlannedItem) -> bool:
        return all(ids.get(k, id_of(group_id, k)) in verified for k in item.depends_on)

    for item in planned:
        view = items[ids[item.key]]
        state = view.get("state")
        if state == "submitted":
            steps.append(ReviewResult(ids[item.key]))
        elif item.child is not None:
            if state == "open" and not view.get("childMission") and ready(item):
                steps.append(Promote(ids[item.key], item))
        elif (state in ("open", "failed") or _abandoned(view)) and not _pending_offer(view):
            if not ready(item):
                continue
            policy = (view.get("contract") or {}).get("retryPolicy", {})
            if state == "failed" and int(view.get("ownershipEpoch") or 0) >= int(
                policy.get("maxAttempts", 3)
            ):
                continue  # every attempt failed: given up, the item stays failed
            candidates = tuple(item.candidates or workers)
            if _abandoned(view):
                lost = (view.get("owner") or {}).get("agentId")
                others = [a for a in (*candidates, *item.reassign_to) if a != lost]
                candidates = tuple(dict.fromkeys(others)) or candidates
            if candidates:
                steps.append(Offer(ids[item.key], candidates, item.capability))
    if all(ids[item.key] in verified for item in planned):
        hashes: list[str] = []
        for item in planned:
            for digest in (items[ids[item.key]].get("submission") or {}).get("artifactHashes", []):
                if digest not in hashes:
                    hashes.append(digest)
        steps.append(SubmitMission(tuple(hashes)))
    return steps


def owner_steps(mission: Mapping[str, Any], owner_id: str) -> list[Step]:
    """What ``owner_id`` does in a child Mission it owns: approve it once it is submitted (its
    Coordinator reviewed each result; the approval verifies the parent's item)."""
    owner = (mission.get("missionOwner") or {}).get("id")
    if mission.get("parent") and owner == owner_id and mission.get("state") == "awaiting_approval":
        return [ApproveChild()]
    return []
