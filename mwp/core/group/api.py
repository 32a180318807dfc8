"""The Group Authority's pure interface: what the Temporal shell calls.

INTERFACE CONTRACT (names and shapes are stable; implementations live beside this file).

One :class:`GroupAuthority` holds one Group's authoritative state. The shell (MissionWorkflow)
verifies a Command's signature first (``mwp.core.trust.signed_document.verify``), then:

* ``authority.check(envelope, ctx)`` in the Update *validator*: decides without changing
  anything; raises :class:`mwp.core.errors.MwpError` to reject (rejections never enter
  Temporal history);
* ``authority.submit(envelope, ctx)`` in the Update *handler*: decides again and applies,
  atomically, returning an :class:`Outcome` (receipt + the new unsigned Event bodies);
* ``authority.fire(timer, ctx)`` when a WorkItemWorkflow reports a durable timer that
  fired (offer expiry, start-by deadline, lease expiry, blocked-lease expiry);
* ``authority.snapshot()`` / ``GroupAuthority.restore(...)`` carry compact state across
  continue-as-new; ``replay(events)`` rebuilds the same state from the Event log alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mwp.core.group.cooperation_limits import CooperationLimits
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import FreshnessWindow, VerifiedDocument


@dataclass(frozen=True)
class Envelope:
    """A Command that passed six-stage verification, ready for the Authority to decide."""

    command: dict[str, Any]  # the wire Command as received (parsed JSON, with signature)
    signing_hash: str  # sha256 of its JCS signing bytes: byte-equality for idempotency
    # sha256 of the JCS of the whole Command: the Events' ``commandHash`` under rules older
    # than ``RULES_ARCHIVE`` (from it on they carry ``signing_hash``, authority.py).
    command_hash: str
    # What the six stages established (key, Principal, the key's validity in the current
    # Registry evidence): First Admission needs it; without it, from rules ``RULES_DOOR`` on,
    # the Command is refused as verified against no evidence (``admission.py``).
    verified: VerifiedDocument | None = None


# Revisions of the rules: 0.1.0 as released, then the door of issue 12 (unknown critical
# extensions and core members, override-grant citations, First Admission on the Group path),
# then Group archival (the ``group_archive`` Command; an archived Group refuses every Command),
# then Context Packages (the ``context_package_publish`` Command; a new Worker's offer and a
# replacement Coordinator must name a package the Group published), then the ledger (the
# six-dimensional resource usage ledger, review records citing Evidence, the signed Approval
# inside ``mission.approved`` and the Mission rules of issue 15 that came with them), then
# oversight (issue 14's runaway controls and Cooperation Override Grants, and an archive
# Command whose snapshot leaves out the Event IDs its sequence range determines), then child
# usage (a child Mission's consumption is charged to its parent Group's ledger as well, in the
# same decision: child_usage.py), then offline renewals (a reconciled offline checkpoint may
# state an earlier expiry of the lease it names, since the receipt of the renewal that replaced
# it may never have reached the Worker: offline_execution.py).
RULES_0_1_0 = 1
RULES_DOOR = 2
RULES_ARCHIVE = 3
RULES_CONTEXT = 4
RULES_LEDGER = 5
RULES_OVERSIGHT = 6
RULES_CHILD_USAGE = 7
RULES_OFFLINE_RENEWALS = 8
CURRENT_RULES = RULES_OFFLINE_RENEWALS


@dataclass(frozen=True)
class AuthorityContext:
    """Facts the shell supplies for one decision; everything else is Group state."""

    now: str  # the Authority's clock, a protocol timestamp in UTC ``Z`` spelling
    authority: Principal  # the Group Authority service: every Event's ``acceptedBy``
    # Current Session Epoch of each Agent, from the Organization's session service.
    session_epochs: dict[str, int] = field(default_factory=dict)
    # Approved Missions a ``mission.create_follow_up`` may link to: Mission ID -> the ID of its
    # MissionOwner, as the Organization knows them. Only that kind reads it.
    approved_missions: dict[str, str] = field(default_factory=dict)
    # The shell can carry no more of this Group's state (its continue-as-new snapshot nears
    # the workflow payload limit): Commands that add WorkItems are refused.
    at_capacity: bool = False
    # The Organization's bounded window for a newly presented Command's issuedAt (spec 6).
    freshness: FreshnessWindow = field(default_factory=FreshnessWindow)
    # Which revision of the rules decides. A workflow pins it (``workflow.patched``), so a
    # Group that accepted a Command under older rules replays the same decision.
    rules: int = CURRENT_RULES
    # Failure Evidence the Group Authority signed for this decision (by WorkItem ID): the
    # shell has ``termination_evidence`` records signed by an activity, since the core holds
    # no key. A record is used only if it signs exactly what the decision would write.
    signed_evidence: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # Organization cooperation policy: the runaway controls' limits (from ``RULES_OVERSIGHT``).
    cooperation_limits: CooperationLimits = field(default_factory=CooperationLimits)
    # The parent Group's answer to this decision's charge (child_usage.py): ``{missionId,
    # eventId, remaining}``; the usage Event cites it and what it leaves caps this Group.
    parent_charge: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Receipt:
    """What an accepted Command returns, and what a byte-equal retry returns again."""

    action_id: str
    actor_id: str
    signing_hash: str
    group_id: str
    first_sequence: int
    last_sequence: int
    event_ids: tuple[str, ...]
    aggregate_revision: int
    accepted_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "actionId": self.action_id,
            "actorId": self.actor_id,
            "signingHash": self.signing_hash,
            "groupId": self.group_id,
            "firstSequence": self.first_sequence,
            "lastSequence": self.last_sequence,
            "eventIds": list(self.event_ids),
            "aggregateRevision": self.aggregate_revision,
            "acceptedAt": self.accepted_at,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Receipt:
        return cls(
            value["actionId"],
            value["actorId"],
            value["signingHash"],
            value["groupId"],
            value["firstSequence"],
            value["lastSequence"],
            tuple(value["eventIds"]),
            value["aggregateRevision"],
            value["acceptedAt"],
        )


@dataclass(frozen=True)
class Outcome:
    receipt: Receipt
    # Unsigned Event bodies (every event.schema.json member except ``signature``), in
    # sequence order. Empty when ``duplicate`` is true (the original receipt is returned).
    events: tuple[dict[str, Any], ...]
    duplicate: bool = False


TimerKind = Literal["offer_expiry", "start_by", "execution_lease", "blocked_lease"]


@dataclass(frozen=True)
class TimerRequest:
    """A durable timer a WorkItemWorkflow must hold for its item (derived from state)."""

    work_item_id: str
    kind: TimerKind
    due_at: str  # protocol timestamp
    # Which grant the timer belongs to, so a stale timer firing after a renewal or a new
    # Ownership Epoch is ignored: e.g. the offer ID, or "<ownershipEpoch>:<leaseId>".
    token: str


@dataclass(frozen=True)
class ChildSettled:
    """A child Mission reached a terminal state; its parent Group records the outcome."""

    child_mission_id: str
    state: Literal["approved", "cancelled", "failed"]
    event_id: str  # the child Group's Event that settled it: the parent Event's cause
    actor: dict[str, str]  # who settled it (the child's approver, canceller or terminator)
    approval: dict[str, Any] | None = None  # the child Approval, when approved
    reason: str | None = None


@dataclass(frozen=True)
class ChildUsage:
    """Usage a child Mission is about to record, for its parent Group to charge first."""

    child_mission_id: str
    # Names the child's decision: a retry of the same charge finds the parent's Event again.
    charge_id: str
    delta: dict[str, Any]  # the recorded delta, as the child's Event carries it
    child_work_item_id: str  # the child Group's WorkItem that consumed it

    def to_json(self) -> dict[str, Any]:
        return {
            "childMissionId": self.child_mission_id,
            "chargeId": self.charge_id,
            "delta": self.delta,
            "childWorkItemId": self.child_work_item_id,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ChildUsage:
        """KeyError, TypeError or ValueError if ``value`` is not one."""
        names = ("childMissionId", "chargeId", "childWorkItemId")
        if set(value) != {*names, "delta"}:
            raise ValueError("unexpected members")
        if not all(isinstance(value[n], str) for n in names) or not isinstance(
            value["delta"], dict
        ):
            raise TypeError("a child usage report has string IDs and a delta object")
        return cls(
            value["childMissionId"],
            value["chargeId"],
            dict(value["delta"]),
            value["childWorkItemId"],
        )


@dataclass(frozen=True)
class ChildCharged:
    """The parent's ``..._recorded`` Event for a child's usage (``duplicate``: charged before)."""

    event_id: str
    sequence: int
    # What the waiting WorkItem may still consume after it (its ancestry's limits included).
    remaining: dict[str, Any]
    duplicate: bool = False
    # The Outcome to record and mirror; None for a duplicate.
    outcome: Outcome | None = None

    def answer(self, mission_id: str) -> dict[str, Any]:
        """What the parent tells the child (the child's ``AuthorityContext.parent_charge``)."""
        return {
            "missionId": mission_id,
            "eventId": self.event_id,
            "sequence": self.sequence,
            "remaining": self.remaining,
            "duplicate": self.duplicate,
        }


@dataclass(frozen=True)
class TimerFired:
    work_item_id: str
    kind: TimerKind
    token: str
