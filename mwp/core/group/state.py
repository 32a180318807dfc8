"""The Group's authoritative state: plain mutable records, changed only by ``evolve``.

Dicts and lists that came from a payload (contracts, selection bases, progress) are held by
reference and never mutated in place: an ``evolve`` replaces them whole. That lets Events and
state share them without copies, which keeps each step O(1)-ish.

Every record converts to and from compact JSON for continue-as-new snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from mwp.core.group.allocation import total
from mwp.core.group.conversation_window import MessageWindow
from mwp.core.group.receipts import ReceiptCache
from mwp.core.kinds import FINAL_WORK_STATES, TERMINAL_MISSION_STATES

Json = dict[str, Any]


def _opt(data: Json, name: str) -> Any:
    return data.get(name)


def _compact(data: Json) -> Json:
    """Absent optional members are omitted, not null: snapshots stay small."""
    return {k: v for k, v in data.items() if v is not None}


@dataclass(slots=True)
class MissionSubmission:
    revision: int
    artifact_hashes: list[str]
    submitted_at: str
    submitted_by: str

    def to_json(self) -> Json:
        return _compact(
            {
                "missionRevision": self.revision,
                "artifactHashes": self.artifact_hashes,
                "submittedAt": self.submitted_at,
                "submittedBy": self.submitted_by,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> MissionSubmission:
        return cls(
            data["missionRevision"],
            list(data["artifactHashes"]),
            data["submittedAt"],
            data["submittedBy"],
        )


@dataclass(slots=True)
class Mission:
    mission_id: str
    revision: int
    objective: str
    definition_of_done: list[Json]
    owner: Json  # actor object
    state: str
    budget: Json
    deadline: str
    approval_policy: Json
    created_at: str
    follow_up_to: str | None
    main_conversation_id: str
    updated_at: str
    submission: MissionSubmission | None = None
    approval: Json | None = None  # the last final-approval decision (approved or changes)
    closing_reason: str | None = None
    # A child Mission's link to its parent: {missionId, workItemId, depth} (spec 14).
    parent: Json | None = None
    # Set by ``group.archived``: {snapshotId, throughSequence, archivedAt} (archive.py).
    archive: Json | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_MISSION_STATES

    @property
    def archived(self) -> bool:
        return self.archive is not None

    def to_json(self) -> Json:
        return _compact(
            {
                "missionId": self.mission_id,
                "revision": self.revision,
                "objective": self.objective,
                "definitionOfDone": self.definition_of_done,
                "owner": self.owner,
                "state": self.state,
                "budget": self.budget,
                "deadline": self.deadline,
                "approvalPolicy": self.approval_policy,
                "createdAt": self.created_at,
                "followUpTo": self.follow_up_to,
                "mainConversationId": self.main_conversation_id,
                "updatedAt": self.updated_at,
                "submission": self.submission.to_json() if self.submission else None,
                "approval": self.approval,
                "closingReason": self.closing_reason,
                "parent": self.parent,
                "archive": self.archive,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> Mission:
        submission = data.get("submission")
        return cls(
            data["missionId"],
            data["revision"],
            data["objective"],
            data["definitionOfDone"],
            data["owner"],
            data["state"],
            data["budget"],
            data["deadline"],
            data["approvalPolicy"],
            data["createdAt"],
            _opt(data, "followUpTo"),
            data["mainConversationId"],
            data["updatedAt"],
            MissionSubmission.from_json(submission) if submission else None,
            _opt(data, "approval"),
            _opt(data, "closingReason"),
            _opt(data, "parent"),
            _opt(data, "archive"),
        )


@dataclass(slots=True)
class CoordinatorLease:
    agent_id: str
    agent_card_version: int
    epoch: int
    lease_id: str
    session_epoch: int
    issued_at: str
    expires_at: str
    lease_seconds: int
    revision: int = 1  # of the lease aggregate: 1 when assigned, +1 per renewal
    renewal_count: int = 0
    last_renewed_at: str | None = None

    def to_json(self) -> Json:
        return _compact(
            {
                "agentId": self.agent_id,
                "agentCardVersion": self.agent_card_version,
                "epoch": self.epoch,
                "leaseId": self.lease_id,
                "sessionEpoch": self.session_epoch,
                "issuedAt": self.issued_at,
                "expiresAt": self.expires_at,
                "leaseSeconds": self.lease_seconds,
                "revision": self.revision,
                "renewalCount": self.renewal_count,
                "lastRenewedAt": self.last_renewed_at,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> CoordinatorLease:
        return cls(
            data["agentId"],
            data["agentCardVersion"],
            data["epoch"],
            data["leaseId"],
            data["sessionEpoch"],
            data["issuedAt"],
            data["expiresAt"],
            data["leaseSeconds"],
            data["revision"],
            data["renewalCount"],
            _opt(data, "lastRenewedAt"),
        )


@dataclass(slots=True)
class Membership:
    member: Json  # actor object
    role: str
    state: str  # provisional | active | ended
    epoch: int
    scopes: list[str]
    visibility_start_sequence: int
    granted_at: str
    revision: int
    activated_at: str | None = None
    ended_at: str | None = None
    provisional_expires_at: str | None = None
    context_package_id: str | None = None

    def to_json(self) -> Json:
        return _compact(
            {
                "member": self.member,
                "role": self.role,
                "state": self.state,
                "epoch": self.epoch,
                "scopes": self.scopes,
                "visibilityStartSequence": self.visibility_start_sequence,
                "grantedAt": self.granted_at,
                "revision": self.revision,
                "activatedAt": self.activated_at,
                "endedAt": self.ended_at,
                "provisionalExpiresAt": self.provisional_expires_at,
                "contextPackageId": self.context_package_id,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> Membership:
        return cls(
            data["member"],
            data["role"],
            data["state"],
            data["epoch"],
            list(data["scopes"]),
            data["visibilityStartSequence"],
            data["grantedAt"],
            data["revision"],
            _opt(data, "activatedAt"),
            _opt(data, "endedAt"),
            _opt(data, "provisionalExpiresAt"),
            _opt(data, "contextPackageId"),
        )


@dataclass(slots=True)
class Conversation:
    conversation_id: str
    type: str  # group | work_item
    title: str
    created_by: Json
    created_at: str
    revision: int = 0
    primary_work_item_id: str | None = None

    def to_json(self) -> Json:
        return _compact(
            {
                "conversationId": self.conversation_id,
                "type": self.type,
                "title": self.title,
                "createdBy": self.created_by,
                "createdAt": self.created_at,
                "revision": self.revision,
                "primaryWorkItemId": self.primary_work_item_id,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> Conversation:
        return cls(
            data["conversationId"],
            data["type"],
            data["title"],
            data["createdBy"],
            data["createdAt"],
            data["revision"],
            _opt(data, "primaryWorkItemId"),
        )


@dataclass(slots=True)
class Proposal:
    proposal_id: str
    proposed_by: Json
    proposed_at: str
    title: str
    revision: int = 1
    details: Json = field(default_factory=dict)  # goal, draftContract, rationale as proposed

    def to_json(self) -> Json:
        return _compact(
            {
                "proposalId": self.proposal_id,
                "proposedBy": self.proposed_by,
                "proposedAt": self.proposed_at,
                "title": self.title,
                "revision": self.revision,
                "details": self.details,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> Proposal:
        return cls(
            data["proposalId"],
            data["proposedBy"],
            data["proposedAt"],
            data["title"],
            data["revision"],
            data["details"],
        )


@dataclass(slots=True)
class Offer:
    offer_id: str
    agent_id: str
    agent_card_version: int
    expires_at: str
    status: str  # pending | accepted | withdrawn | lost_race
    selection_basis: Json
    contract_version: int

    def to_json(self) -> Json:
        return _compact(
            {
                "offerId": self.offer_id,
                "agentId": self.agent_id,
                "agentCardVersion": self.agent_card_version,
                "expiresAt": self.expires_at,
                "status": self.status,
                "selectionBasis": self.selection_basis,
                "contractVersion": self.contract_version,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> Offer:
        return cls(
            data["offerId"],
            data["agentId"],
            data["agentCardVersion"],
            data["expiresAt"],
            data["status"],
            data["selectionBasis"],
            data["contractVersion"],
        )


@dataclass(slots=True)
class Ownership:
    """An ownership grant: one Ownership Epoch, its lease ID and its start-by deadline."""

    agent_id: str
    agent_card_version: int
    capability_pins: list[Json]
    epoch: int
    lease_id: str  # the ownership lease
    accepted_at: str
    start_by: str
    start_within_seconds: int
    session_epoch: int
    fenced_reason: str | None = None  # set once the grant expired or was revoked

    @property
    def live(self) -> bool:
        return self.fenced_reason is None

    def to_json(self) -> Json:
        return _compact(
            {
                "agentId": self.agent_id,
                "agentCardVersion": self.agent_card_version,
                "capabilityPins": self.capability_pins,
                "epoch": self.epoch,
                "leaseId": self.lease_id,
                "acceptedAt": self.accepted_at,
                "startBy": self.start_by,
                "startWithinSeconds": self.start_within_seconds,
                "sessionEpoch": self.session_epoch,
                "fencedReason": self.fenced_reason,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> Ownership:
        return cls(
            data["agentId"],
            data["agentCardVersion"],
            data["capabilityPins"],
            data["epoch"],
            data["leaseId"],
            data["acceptedAt"],
            data["startBy"],
            data["startWithinSeconds"],
            data["sessionEpoch"],
            _opt(data, "fencedReason"),
        )


@dataclass(slots=True)
class ExecutionLease:
    lease_id: str
    agent_id: str
    session_epoch: int
    ownership_epoch: int
    started_at: str
    expires_at: str
    renewal_count: int = 0
    last_renewed_at: str | None = None

    def to_json(self) -> Json:
        return _compact(
            {
                "leaseId": self.lease_id,
                "agentId": self.agent_id,
                "sessionEpoch": self.session_epoch,
                "ownershipEpoch": self.ownership_epoch,
                "startedAt": self.started_at,
                "expiresAt": self.expires_at,
                "renewalCount": self.renewal_count,
                "lastRenewedAt": self.last_renewed_at,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> ExecutionLease:
        return cls(
            data["leaseId"],
            data["agentId"],
            data["sessionEpoch"],
            data["ownershipEpoch"],
            data["startedAt"],
            data["expiresAt"],
            data["renewalCount"],
            _opt(data, "lastRenewedAt"),
        )


@dataclass(slots=True)
class BlockedLease:
    lease_id: str
    issued_at: str
    expires_at: str
    required_resolution: str

    def to_json(self) -> Json:
        return _compact(
            {
                "leaseId": self.lease_id,
                "issuedAt": self.issued_at,
                "expiresAt": self.expires_at,
                "requiredResolution": self.required_resolution,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> BlockedLease:
        return cls(data["leaseId"], data["issuedAt"], data["expiresAt"], data["requiredResolution"])


@dataclass(slots=True)
class WorkItem:
    work_item_id: str
    conversation_id: str
    revision: int
    state: str
    exclusive: bool
    contract: Json
    created_by: Json
    authorized_by: Json
    created_at: str
    updated_at: str
    proposal_id: str | None = None
    offers: list[Offer] = field(default_factory=list)  # the current offer round only
    start_within_seconds: int = 0  # of the current offer round
    ownership_epoch: int = 0  # the last Ownership Epoch issued (0: never owned)
    owner: Ownership | None = None
    selection_basis: Json | None = None
    execution_lease: ExecutionLease | None = None
    blocked_lease: BlockedLease | None = None
    execution_approval: Json | None = None  # {approvalId, contractVersion, approver, ...}
    progress: Json | None = None
    checkpoint: Json | None = None
    schedule_estimate: Json | None = None  # the owner's latest disclosure (spec 11.2)
    submission: Json | None = None  # {artifactHashes, evidenceIds, evidence, submittedAt, ...}
    result: Json | None = None
    failure: Json | None = None
    cancellation: Json | None = None
    parent_work_item_id: str | None = None  # the explicit parent link (spec 9.1)
    # The child Mission this item was promoted to (spec 14): {missionId, groupId,
    # failurePolicy, status, createdAt}; status is "running" until the child settles.
    child_mission: Json | None = None
    # {sequence, eventId} of the Events that stated its Work Contract (``work.authorized``,
    # then each ``work.contract.revised``): what a Context Package for an offer cites.
    contract_events: list[Json] = field(default_factory=list)
    # The Execution Lease a newer Session of its holder revoked, with ``revokedAt``, until
    # the next lease starts: what offline progress under it is checked against.
    revoked_lease: Json | None = None

    @property
    def contract_version(self) -> int:
        return int(self.contract["contractVersion"])

    @property
    def dependencies(self) -> list[str]:
        return list(self.contract.get("dependencyWorkItemIds", []))

    def to_json(self) -> Json:
        return _compact(
            {
                "workItemId": self.work_item_id,
                "conversationId": self.conversation_id,
                "revision": self.revision,
                "state": self.state,
                "exclusive": self.exclusive,
                "contract": self.contract,
                "createdBy": self.created_by,
                "authorizedBy": self.authorized_by,
                "createdAt": self.created_at,
                "updatedAt": self.updated_at,
                "proposalId": self.proposal_id,
                "offers": [offer.to_json() for offer in self.offers],
                "startWithinSeconds": self.start_within_seconds,
                "ownershipEpoch": self.ownership_epoch,
                "owner": self.owner.to_json() if self.owner else None,
                "selectionBasis": self.selection_basis,
                "executionLease": self.execution_lease.to_json() if self.execution_lease else None,
                "blockedLease": self.blocked_lease.to_json() if self.blocked_lease else None,
                "executionApproval": self.execution_approval,
                "progress": self.progress,
                "checkpoint": self.checkpoint,
                "scheduleEstimate": self.schedule_estimate,
                "submission": self.submission,
                "result": self.result,
                "failure": self.failure,
                "cancellation": self.cancellation,
                "parentWorkItemId": self.parent_work_item_id,
                "childMission": self.child_mission,
                "contractEvents": self.contract_events or None,
                "revokedLease": self.revoked_lease,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> WorkItem:
        owner = data.get("owner")
        lease = data.get("executionLease")
        blocked = data.get("blockedLease")
        return cls(
            work_item_id=data["workItemId"],
            conversation_id=data["conversationId"],
            revision=data["revision"],
            state=data["state"],
            exclusive=data["exclusive"],
            contract=data["contract"],
            created_by=data["createdBy"],
            authorized_by=data["authorizedBy"],
            created_at=data["createdAt"],
            updated_at=data["updatedAt"],
            proposal_id=_opt(data, "proposalId"),
            offers=[Offer.from_json(o) for o in data["offers"]],
            start_within_seconds=data["startWithinSeconds"],
            ownership_epoch=data["ownershipEpoch"],
            owner=Ownership.from_json(owner) if owner else None,
            selection_basis=_opt(data, "selectionBasis"),
            execution_lease=ExecutionLease.from_json(lease) if lease else None,
            blocked_lease=BlockedLease.from_json(blocked) if blocked else None,
            execution_approval=_opt(data, "executionApproval"),
            progress=_opt(data, "progress"),
            checkpoint=_opt(data, "checkpoint"),
            schedule_estimate=_opt(data, "scheduleEstimate"),
            submission=_opt(data, "submission"),
            result=_opt(data, "result"),
            failure=_opt(data, "failure"),
            cancellation=_opt(data, "cancellation"),
            parent_work_item_id=_opt(data, "parentWorkItemId"),
            child_mission=_opt(data, "childMission"),
            contract_events=list(data.get("contractEvents", [])),
            revoked_lease=_opt(data, "revokedLease"),
        )


@dataclass(slots=True)
class SettledWorkItem:
    """What a verified or cancelled WorkItem leaves in the Group's state: only the facts later
    decisions and the Mission view read (its ID and outcome, dependencies, budget, parent
    link, delivered Artifacts). Its full record is in the Group Event log and in the final
    result of its WorkItemWorkflow; dropping it keeps a long-lived Group's continue-as-new
    snapshot small (tens of bytes per item instead of kilobytes)."""

    work_item_id: str
    state: str  # verified | cancelled
    revision: int
    ownership_epoch: int
    owner: str | None  # the agent that held it last
    dependencies: list[str]
    budget: Json  # the contract's budget: counted against the Mission unless cancelled
    artifact_hashes: list[str]  # what a verified item delivered
    parent_work_item_id: str | None = None
    child_mission: Json | None = None
    # The sequence of the Event that accepted a verified item's result (its ID derives from
    # it): offers of its dependants cite it.
    accepted_sequence: int | None = None

    @classmethod
    def of(cls, item: WorkItem) -> SettledWorkItem:
        return cls(
            work_item_id=item.work_item_id,
            state=item.state,
            revision=item.revision,
            ownership_epoch=item.ownership_epoch,
            owner=item.owner.agent_id if item.owner is not None else None,
            dependencies=item.dependencies,
            budget=item.contract["budget"],
            artifact_hashes=list((item.submission or {}).get("artifactHashes", []))
            if item.state == "verified"
            else [],
            parent_work_item_id=item.parent_work_item_id,
            child_mission=item.child_mission,
            accepted_sequence=(item.result or {}).get("acceptedEvent", {}).get("sequence"),
        )

    def to_json(self) -> Json:
        return _compact(
            {
                "workItemId": self.work_item_id,
                "state": self.state,
                "revision": self.revision,
                "ownershipEpoch": self.ownership_epoch,
                "owner": self.owner,
                "dependencyWorkItemIds": self.dependencies or None,
                "budget": self.budget,
                "artifactHashes": self.artifact_hashes or None,
                "parentWorkItemId": self.parent_work_item_id,
                "childMission": self.child_mission,
                "acceptedSequence": self.accepted_sequence,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> SettledWorkItem:
        return cls(
            work_item_id=data["workItemId"],
            state=data["state"],
            revision=data["revision"],
            ownership_epoch=data["ownershipEpoch"],
            owner=_opt(data, "owner"),
            dependencies=list(data.get("dependencyWorkItemIds", [])),
            budget=data["budget"],
            artifact_hashes=list(data.get("artifactHashes", [])),
            parent_work_item_id=_opt(data, "parentWorkItemId"),
            child_mission=_opt(data, "childMission"),
            accepted_sequence=_opt(data, "acceptedSequence"),
        )


@dataclass(slots=True)
class DelegationGrant:
    """A persisted Delegation Grant (spec 9.1): its membership.schema.json ``delegationGrants``
    item, and the WorkItems created or offered under it, in the order they were first used."""

    document: Json
    work_item_ids: list[str] = field(default_factory=list)

    @property
    def grant_id(self) -> str:
        return str(self.document["grantId"])

    @property
    def grantee_id(self) -> str:
        return str(self.document["granteeAgentId"])

    @property
    def target_work_item_id(self) -> str:
        return str(self.document["targetWorkItemId"])

    def to_json(self) -> Json:
        return {"grant": self.document, "workItemIds": self.work_item_ids}

    @classmethod
    def from_json(cls, data: Json) -> DelegationGrant:
        return cls(data["grant"], list(data["workItemIds"]))


@dataclass(slots=True)
class GroupState:
    group_id: str = ""
    sequence: int = 0
    clock: str = ""  # occurredAt of the last Event
    mission: Mission | None = None
    coordinator: CoordinatorLease | None = None
    memberships: dict[str, Membership] = field(default_factory=dict)
    conversations: dict[str, Conversation] = field(default_factory=dict)
    proposals: dict[str, Proposal] = field(default_factory=dict)
    work_items: dict[str, WorkItem] = field(default_factory=dict)  # unsettled ones
    settled: dict[str, SettledWorkItem] = field(default_factory=dict)
    messages: MessageWindow = field(default_factory=MessageWindow)
    receipts: ReceiptCache = field(default_factory=ReceiptCache)
    delegation_grants: dict[str, DelegationGrant] = field(default_factory=dict)
    # Published Artifacts by content hash, in publication order (see artifact.py).
    artifacts: dict[str, Json] = field(default_factory=dict)
    # Published Context Packages by ID: {version, workItemId?, sequence} (context_package.py).
    context_packages: dict[str, Json] = field(default_factory=dict)
    # Resource usage as its Events recorded it (resource_usage.py): cumulative per WorkItem,
    # its descendants' included, and the Mission's; budget-shaped JSON objects.
    usage: dict[str, Json] = field(default_factory=dict)
    mission_usage: Json = field(default_factory=dict)
    # Rate counters of the runaway controls: "<policy> <actor ID>" -> [rate window, count]
    # (runaway.py); one per actor and rate, whatever the traffic.
    rates: dict[str, list[int]] = field(default_factory=dict)
    # Cooperation Override Grants by ID, as granted, with ``consumedByEventId`` once used.
    override_grants: dict[str, Json] = field(default_factory=dict)
    # The last charge of each child Mission's usage (child_usage.py): child Mission ID ->
    # {chargeId, eventId, sequence}.
    child_charges: dict[str, Json] = field(default_factory=dict)
    # A child Mission's: what the parent Group said the waiting WorkItem had left after its
    # last charge (budget-shaped; child_usage.py).
    parent_remaining: Json = field(default_factory=dict)
    # Derived, not snapshotted: the budget allocated to WorkItems that are not cancelled.
    allocated: dict[str, Decimal] = field(default_factory=dict)
    # Not snapshotted: the full records of items settled since the holder last took them
    # (see GroupAuthority), so their final views can be handed on before they are dropped.
    retired: list[WorkItem] = field(default_factory=list)

    @property
    def mission_id(self) -> str:
        return self.mission.mission_id if self.mission else ""

    def has_item(self, work_item_id: str) -> bool:
        """Whether the Group ever authorized this WorkItem (settled or not)."""
        return work_item_id in self.work_items or work_item_id in self.settled

    def item_state(self, work_item_id: str) -> str | None:
        item = self.work_items.get(work_item_id) or self.settled.get(work_item_id)
        return item.state if item is not None else None

    def item_record(self, work_item_id: str) -> WorkItem | SettledWorkItem | None:
        return self.work_items.get(work_item_id) or self.settled.get(work_item_id)

    def item_budget(self, work_item_id: str) -> Json:
        live = self.work_items.get(work_item_id)
        return live.contract["budget"] if live is not None else self.settled[work_item_id].budget

    def to_json(self) -> Json:
        return _compact(
            {
                "groupId": self.group_id,
                "sequence": self.sequence,
                "clock": self.clock,
                "mission": self.mission.to_json() if self.mission else None,
                "coordinator": self.coordinator.to_json() if self.coordinator else None,
                "memberships": [m.to_json() for m in self.memberships.values()],
                "conversations": [c.to_json() for c in self.conversations.values()],
                "proposals": [p.to_json() for p in self.proposals.values()],
                "workItems": [w.to_json() for w in self.work_items.values()],
                "settledWorkItems": [w.to_json() for w in self.settled.values()],
                "messages": self.messages.to_json(),
                "receipts": self.receipts.to_json(),
                "delegationGrants": [g.to_json() for g in self.delegation_grants.values()],
                "artifacts": list(self.artifacts.values()),
                "contextPackages": [
                    {"contextPackageId": k, **v} for k, v in self.context_packages.items()
                ]
                or None,
                "usage": {"mission": self.mission_usage, "workItems": self.usage}
                if self.mission_usage
                else None,
                "rates": self.rates or None,
                "overrideGrants": list(self.override_grants.values()) or None,
                "childCharges": self.child_charges or None,
                "parentRemaining": self.parent_remaining or None,
            }
        )

    @classmethod
    def from_json(cls, data: Json) -> GroupState:
        mission = data.get("mission")
        coordinator = data.get("coordinator")
        memberships = [Membership.from_json(m) for m in data["memberships"]]
        conversations = [Conversation.from_json(c) for c in data["conversations"]]
        proposals = [Proposal.from_json(p) for p in data["proposals"]]
        work_items = [WorkItem.from_json(w) for w in data["workItems"]]
        settled = [SettledWorkItem.from_json(w) for w in data.get("settledWorkItems", [])]
        # Snapshots from before settled records existed carry settled items in full.
        settled += [SettledWorkItem.of(w) for w in work_items if w.state in FINAL_WORK_STATES]
        grants = [DelegationGrant.from_json(g) for g in data.get("delegationGrants", [])]
        state = cls(
            group_id=data["groupId"],
            sequence=data["sequence"],
            clock=data["clock"],
            mission=Mission.from_json(mission) if mission else None,
            coordinator=CoordinatorLease.from_json(coordinator) if coordinator else None,
            memberships={m.member["id"]: m for m in memberships},
            conversations={c.conversation_id: c for c in conversations},
            proposals={p.proposal_id: p for p in proposals},
            work_items={w.work_item_id: w for w in work_items if w.state not in FINAL_WORK_STATES},
            settled={w.work_item_id: w for w in settled},
            messages=MessageWindow.from_json(data["groupId"], data["messages"]),
            receipts=ReceiptCache.from_json(data["receipts"]),
            delegation_grants={g.grant_id: g for g in grants},
            artifacts={a["contentHash"]: a for a in data.get("artifacts", [])},
            context_packages={
                p["contextPackageId"]: {k: v for k, v in p.items() if k != "contextPackageId"}
                for p in data.get("contextPackages", [])
            },
            usage=dict(data.get("usage", {}).get("workItems", {})),
            mission_usage=data.get("usage", {}).get("mission", {}),
            rates={k: list(v) for k, v in data.get("rates", {}).items()},
            override_grants={g["grantId"]: dict(g) for g in data.get("overrideGrants", [])},
            child_charges={k: dict(v) for k, v in data.get("childCharges", {}).items()},
            parent_remaining=dict(data.get("parentRemaining", {})),
        )
        budgets = [item.contract["budget"] for item in state.work_items.values()]
        budgets += [item.budget for item in state.settled.values() if item.state != "cancelled"]
        state.allocated = {k: v for k, v in total(budgets).items() if v}
        return state
