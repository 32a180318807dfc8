"""What a Coordinator does next, decided from what its Group's log shows (pure, no I/O).

The runtime keeps a projection of each Group it coordinates (the pure Group Authority
following the signed log) and the plans it journaled, and asks :func:`next_steps` what to do;
after each step's Events arrive it asks again. Steps are level-triggered: each follows from
the Group's state alone, so a restarted runtime takes up where it stopped, and a step already
taken (its Events not yet seen) is at worst refused by the Authority and asked again later.

* ``Renew`` the Coordinator lease when it was granted under another Session (the runtime's
  HELLO opened a new one) or less than a third of ``lease_seconds`` is left.
* ``NeedReuse`` once per Mission when the Coordinator declares ``reuse`` and its journal holds
  no answer yet; then ``ImportKnowledge`` for each source it named whose content hash is not
  yet among the Group's Artifacts, unless the policy or the Group refused it in this run (the
  Group would refuse content it already holds; a refusal is not asked again every tick).
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
* ``PublishHandover``: a Mission-wide Context Package, the next version of the Group's latest,
  whenever what it would cite changed (an item authorized or its contract changed, an item
  verified), so a replacement can be appointed from it at any time (spec 7.2). Before the first
  ``Authorize`` of items no package carries yet, one carrying them as its remaining plan
  (:mod:`~mwp.coordinator.remaining_plan`) is published on its own: the journal is this
  Coordinator's alone, and a replacement must lose nothing it planned.
* ``TakeOver`` instead of ``NeedPlan`` when this Coordinator was appointed to a Mission it did
  not plan (no journaled plan, a Coordinator Epoch above the founding one, WorkItems in the
  Group or a remaining plan in its latest package): it adopts those WorkItems and the items of
  that remaining plan not authorized since as its plan, and every step above then follows from
  their state, so it reconciles them before it assigns anything new (MWP-MSN-005): it
  authorizes the adopted planned items under the IDs and contracts the package gives.

In a child Mission whose MissionOwner is this Coordinator (it promoted the item),
:func:`owner_steps` gives ``ApproveChild`` once the child Mission awaits Approval.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from mwp.contracts.command_size import MAX_COMMAND_BYTES, command_payload_bytes
from mwp.coordinator.declaration import (
    DEFAULT_CRITERIA,
    ChildMission,
    KnowledgeSource,
    PlannedItem,
)
from mwp.coordinator.remaining_plan import (
    RemainingItem,
    remaining_ids,
    remaining_plan_extension,
)
from mwp.core.group.ids import derive_id, event_id
from mwp.core.wire.values import format_utc, instant_to_datetime, parse_timestamp

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-MSN-005",)

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
    # Taken over, not planned: the WorkItem ID of each item, in order (an adopted item's key
    # names it only within this plan; its ID is not derived from it).
    adopted: tuple[str, ...] = ()
    # Per adopted item, the Work Contract to authorize it with: an item of its predecessor's
    # remaining plan; None for a WorkItem that was in the Group already.
    contracts: tuple[Mapping[str, Any] | None, ...] = ()


@dataclass(frozen=True)
class PackageRecord:
    """A Mission-wide Context Package: its ID, version, the Event IDs it cites and the
    WorkItem IDs of its remaining plan."""

    context_package_id: str
    version: int
    event_ids: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()

    def same_content(self, other: PackageRecord | None) -> bool:
        """Whether ``other`` cites the same Events and carries the same remaining plan."""
        return (
            other is not None
            and set(self.event_ids) == set(other.event_ids)
            and self.remaining == other.remaining
        )


@dataclass(frozen=True)
class LogNotes:
    """What the runtime notes of a Group's log beyond the views: the Context Package named
    by this Coordinator's appointment, the sequence of the latest change request, and the
    latest Mission-wide Context Package published and its remaining plan (the pure views keep
    none of them)."""

    assigned_with: str | None = None
    changes_requested_at: int | None = None
    mission_package: PackageRecord | None = None
    remaining_plan: tuple[RemainingItem, ...] = ()


@dataclass(frozen=True)
class Renew:
    pass


@dataclass(frozen=True)
class NeedPlan:
    pass


@dataclass(frozen=True)
class NeedReuse:
    pass


@dataclass(frozen=True)
class ImportKnowledge:
    source: KnowledgeSource


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


@dataclass(frozen=True)
class TakeOver:
    """Journal ``plan`` (the WorkItems adopted) instead of planning: the Coordinator was
    appointed, as ``coordinator_epoch``, to a Mission another Coordinator planned."""

    plan: JournaledPlan
    coordinator_epoch: int
    context_package_id: str | None  # the package its appointment named


@dataclass(frozen=True)
class PublishHandover:
    """Publish ``package`` (a Mission-wide Context Package, unsigned: the runtime adds its
    generator, time and signature)."""

    package: Json

    @property
    def record(self) -> PackageRecord:
        return package_record(self.package)


def package_record(package: Mapping[str, Any]) -> PackageRecord:
    """What the runtime keeps of a Mission-wide package (a malformed remaining plan: none)."""
    return PackageRecord(
        str(package["contextPackageId"]),
        int(package["version"]),
        tuple(package["sourceEventRange"]["eventIds"]),
        remaining_ids(package),
    )


Step = (
    Renew
    | NeedReuse
    | ImportKnowledge
    | NeedPlan
    | TakeOver
    | PublishHandover
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
    notes: LogNotes = LogNotes(),
    journaled_package: PackageRecord | None = None,
    refused_package: PackageRecord | None = None,
    reuses: bool = False,
    reused: Sequence[KnowledgeSource] | None = None,
    refused_imports: frozenset[str] = frozenset(),
) -> list[Step]:
    """The steps due now for the Mission view ``mission`` and its WorkItem views ``items``
    (``id_of``: how a plan key names its WorkItem, :func:`work_item_id` unless told;
    ``notes``: what the runtime noted of the log; ``journaled_package``: the latest hand-over
    package this Coordinator published, as its journal says; ``refused_package``: one the
    Authority refused as it was, not proposed again)."""
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
    steps.extend(_reuse_steps(mission, reuses, reused, refused_imports))
    if not plans:
        takeover = _takeover(mission, items, notes)
        return [*steps, takeover if takeover is not None else NeedPlan()]
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
    adopted = {  # an adopted plan names each item's WorkItem (a plan without: none)
        item.key: item_id
        for plan in plans
        for item, item_id in zip(plan.items, plan.adopted, strict=False)
    }
    ids.update(adopted)
    contracts = {  # adopted from a remaining plan: authorized with the contract it gives
        item.key: contract
        for plan in plans
        for item, contract in zip(plan.items, plan.contracts, strict=False)
        if contract is not None
    }
    due: list[Authorize] = []
    for item in planned:
        if ids[item.key] in items:
            continue
        if item.key in adopted:
            if item.key not in contracts:
                continue  # a WorkItem adopted from the Group, not in the views at hand
            contract = dict(contracts[item.key])
        else:
            contract = contract_of(item, group_id, now, id_of)
        due.append(Authorize(item, ids[item.key], contract, cites.get(item.key)))
    if due:  # offer once the graph is whole
        answers = {item.key: plan.answers for plan in plans for item in plan.items}
        first = _plan_first(
            mission, items, due, answers, notes.mission_package, journaled_package, refused_package
        )
        return [*steps, *(first if first is not None else due)]
    verified = {i for i, view in items.items() if view.get("state") == "verified"}

    def ready(item: PlannedItem) -> bool:
        return all(ids.get(k, id_of(group_id, k)) in verified for k in item.depends_on)

    for item in planned:
        view = items.get(ids[item.key])
        if view is None:
            continue  # adopted, but not in the views at hand
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
    # Last: a package the Group refuses (rules from before packages) holds up no other step.
    handover = _handover(mission, items, notes.mission_package, journaled_package, refused_package)
    if handover is not None:
        steps.append(handover)
    return steps


def _reuse_steps(
    mission: Mapping[str, Any],
    reuses: bool,
    reused: Sequence[KnowledgeSource] | None,
    refused: frozenset[str],
) -> list[Step]:
    """Ask ``reuse`` once; then import each source the Group does not hold yet."""
    if reused is None:
        return [NeedReuse()] if reuses else []
    held = {str(a["contentHash"]) for a in mission.get("artifacts") or []}
    return [
        ImportKnowledge(s)
        for s in reused
        if s.content_hash not in held and s.content_hash not in refused
    ]


# --- taking over -----------------------------------------------------------------------------


def adopted_key(work_item_id: str) -> str:
    """The plan key an adopted WorkItem goes by (a valid key whatever its ID)."""
    return "adopted-" + hashlib.sha256(work_item_id.encode()).hexdigest()[:24]


def _authorized_at(view: Mapping[str, Any]) -> int:
    """The sequence of the Event that first stated the item's contract (0: not known)."""
    stated = view.get("contractEvents") or []
    return int(stated[0]["sequence"]) if stated else 0


def _adopted(
    key: str, contract: Mapping[str, Any], keys: Mapping[str, str], child: ChildMission | None
) -> PlannedItem:
    """A WorkItem (or planned item) another Coordinator authorized (or planned), as a planned
    item of this one: its goal, criteria, dependencies, capability and budget are the
    contract's; it is offered to this Coordinator's Workers."""
    capability = contract["requiredCapabilities"][0]
    criteria = tuple(str(c["description"]) for c in contract.get("acceptanceCriteria") or [])
    return PlannedItem(
        key,
        str(contract["goal"]),
        criteria or DEFAULT_CRITERIA,
        tuple(keys.get(d) or adopted_key(d) for d in contract.get("dependencyWorkItemIds") or []),
        (str(capability["id"]), str(capability["version"])),
        dict(contract["budget"]) if contract.get("budget") else None,
        child=child,
    )


def _takeover(
    mission: Mapping[str, Any], items: Mapping[str, Mapping[str, Any]], notes: LogNotes
) -> TakeOver | None:
    """A plan adopted from the Group and its latest package, when this Coordinator was
    appointed after the Mission was planned: planning again would authorize the same work
    twice, or lose what its predecessor decided."""
    epoch = int((mission.get("coordinator") or {}).get("coordinatorEpoch") or 1)
    live = [v for v in items.values() if v.get("state") != "cancelled"]
    # What the predecessor authorized meanwhile is adopted from the Group, not again.
    planned = [r for r in notes.remaining_plan if r.work_item_id not in items]
    if epoch <= 1 or not (live or planned):
        return None  # the founding Coordinator, or nothing planned before it: it plans
    views = sorted(live, key=_authorized_at)
    keys = {
        item_id: adopted_key(item_id)
        for item_id in [*(str(v["workItemId"]) for v in views), *(r.work_item_id for r in planned)]
    }
    answers = "initial"
    approval = mission.get("approval") or {}
    requested = notes.changes_requested_at
    if (
        approval.get("decision") == "changes_requested"
        and requested is not None
        and (
            any(_authorized_at(v) > requested for v in views)
            or any(r.answers == approval["approvalId"] for r in planned)
        )
    ):
        # The former Coordinator answered the change request already: its items are here.
        answers = str(approval["approvalId"])
    adopted = [
        *(_adopted(keys[str(v["workItemId"])], v["contract"], keys, None) for v in views),
        *(_adopted(keys[r.work_item_id], r.contract, keys, r.child) for r in planned),
    ]
    plan = JournaledPlan(
        answers,
        tuple(adopted),
        adopted=tuple(keys),
        contracts=(*(None for _ in views), *(r.contract for r in planned)),
    )
    return TakeOver(plan, epoch, notes.assigned_with)


# --- hand-over packages ----------------------------------------------------------------------

MAX_TEXT: Final = 4000  # the schema's bound on a decision, constraint or question
MAX_SUMMARY: Final = 50_000
# The largest package carrying a remaining plan: what a publish Command may carry, less room
# for the Command's own members and the package's signature.
MAX_PLAN_PACKAGE_BYTES: Final = MAX_COMMAND_BYTES - 16 * 1024


def _cited(mission: Mapping[str, Any], items: Mapping[str, Mapping[str, Any]]) -> list[Json]:
    """What a hand-over package cites: the Group's founding Event, and per WorkItem the
    Events that stated its contract and the one that accepted its result."""
    group_id = str(mission["groupId"])
    cited = {event_id(group_id, 1): 1}
    for view in items.values():
        accepted = (view.get("result") or {}).get("acceptedEvent")
        for event in [*(view.get("contractEvents") or []), *([accepted] if accepted else [])]:
            cited[str(event["eventId"])] = int(event["sequence"])
    return [{"eventId": e, "sequence": s} for e, s in sorted(cited.items(), key=lambda c: c[1])]


def _behind(published: PackageRecord | None, journaled: PackageRecord | None) -> bool:
    """Whether the log has not shown yet the package journaled last."""
    return journaled is not None and (published is None or journaled.version > published.version)


def _plan_first(
    mission: Mapping[str, Any],
    items: Mapping[str, Mapping[str, Any]],
    due: Sequence[Authorize],
    answers: Mapping[str, str],
    published: PackageRecord | None,
    journaled: PackageRecord | None,
    refused: PackageRecord | None,
) -> list[Step] | None:
    """What comes before authorizing ``due``: None when the latest package carries each of
    them (an item answering an open Work Proposal stays out: the proposal, open in the Group,
    is answered by whoever coordinates); else a package carrying them, or nothing while the
    log has not shown the one journaled last. A Group that refused a package authorizes as
    before packages: it would refuse this one too; so does a plan too large for one package
    (a Command that could never be sent would hold the plan up for good)."""
    remaining = [
        RemainingItem(a.item.key, a.work_item_id, answers[a.item.key], a.contract, a.item.child)
        for a in due
        if a.proposal_id is None
    ]
    latest = journaled if _behind(published, journaled) else published
    wanted = {r.work_item_id for r in remaining}
    if not wanted or (latest is not None and wanted <= set(latest.remaining)):
        return None
    if _behind(published, journaled):
        return []
    if refused is not None:
        return None
    package = _package(mission, items, published, remaining)
    if command_payload_bytes(json.dumps(package, separators=(",", ":"))) > MAX_PLAN_PACKAGE_BYTES:
        return None
    return [PublishHandover(package)]


def _handover(
    mission: Mapping[str, Any],
    items: Mapping[str, Mapping[str, Any]],
    published: PackageRecord | None,
    journaled: PackageRecord | None,
    refused: PackageRecord | None,
) -> PublishHandover | None:
    """The next Mission-wide package, when the latest one (``published``) no longer cites
    what a replacement needs or still carries a remaining plan; none while the log has not
    shown the one journaled last, nor one with the content of the package refused."""
    if _behind(published, journaled):
        return None
    step = PublishHandover(_package(mission, items, published, ()))
    if step.record.same_content(published) or step.record.same_content(refused):
        return None
    return step


def _package(
    mission: Mapping[str, Any],
    items: Mapping[str, Mapping[str, Any]],
    published: PackageRecord | None,
    remaining: Sequence[RemainingItem],
) -> Json:
    """The next version of the Group's latest Mission-wide package, unsigned."""
    cited = _cited(mission, items)
    group_id = str(mission["groupId"])
    previous = published.context_package_id if published is not None else None
    version = published.version + 1 if published is not None else 1
    views = sorted(items.values(), key=_authorized_at)
    package: Json = {
        # Derived from its predecessor: a second attempt at the same version is refused.
        "contextPackageId": derive_id(group_id, "coordinator-handover", previous or "", version),
        "version": version,
        "missionId": mission["missionId"],
        "groupId": group_id,
        "sourceEventRange": {
            "fromSequence": cited[0]["sequence"],
            "toSequence": cited[-1]["sequence"],
            "eventIds": [e["eventId"] for e in cited],
        },
        "artifactHashes": _verified_artifacts(mission, views),
        "summary": _summary(mission, views, remaining),
        "decisions": _decisions(views),
        "constraints": [f"Deadline: {mission['deadline']}"] if mission.get("deadline") else [],
        "unresolvedQuestions": [
            f"Open Work Proposal: {p.get('title', p['proposalId'])}"[:MAX_TEXT]
            for p in mission.get("proposals") or []
        ],
    }
    if previous is not None:
        package["previousContextPackageId"] = previous
    if remaining:
        package["extensions"] = remaining_plan_extension(remaining)
    return package


def _verified_artifacts(
    mission: Mapping[str, Any], views: Sequence[Mapping[str, Any]]
) -> list[str]:
    published = {a["contentHash"] for a in mission.get("artifacts") or []}
    hashes: list[str] = []
    for view in views:
        if view.get("state") == "verified":
            for digest in (view.get("submission") or {}).get("artifactHashes", []):
                if digest in published and digest not in hashes:
                    hashes.append(digest)
    return hashes


def _summary(
    mission: Mapping[str, Any],
    views: Sequence[Mapping[str, Any]],
    remaining: Sequence[RemainingItem],
) -> str:
    verified = sum(1 for v in views if v.get("state") == "verified")
    lines = [
        f"Hand-over of Mission {mission['missionId']}: {mission.get('objective', '')}",
        f"{len(views)} WorkItems, {verified} verified:",
        *(f"- {v.get('state')}: {v['contract']['goal']} ({v['workItemId']})" for v in views),
    ]
    if remaining:
        lines.append(f"{len(remaining)} planned, not yet authorized:")
        lines.extend(f"- {r.contract['goal']} ({r.work_item_id})" for r in remaining)
    return "\n".join(lines)[:MAX_SUMMARY]


def _decisions(views: Sequence[Mapping[str, Any]]) -> list[Json]:
    decisions: list[Json] = []
    for view in views:
        goal = view["contract"]["goal"]
        stated = [e["eventId"] for e in view.get("contractEvents") or []]
        if stated:
            decisions.append(
                {"description": f"Authorized {goal!r}"[:MAX_TEXT], "sourceEventIds": stated}
            )
        accepted = (view.get("result") or {}).get("acceptedEvent")
        if accepted:
            decisions.append(
                {
                    "description": f"Accepted the result of {goal!r}"[:MAX_TEXT],
                    "sourceEventIds": [accepted["eventId"]],
                }
            )
    return decisions


def owner_steps(mission: Mapping[str, Any], owner_id: str) -> list[Step]:
    """What ``owner_id`` does in a child Mission it owns: approve it once it is submitted (its
    Coordinator reviewed each result; the approval verifies the parent's item)."""
    owner = (mission.get("missionOwner") or {}).get("id")
    if mission.get("parent") and owner == owner_id and mission.get("state") == "awaiting_approval":
        return [ApproveChild()]
    return []
