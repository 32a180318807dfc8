"""The one enumeration of kinds and states: the protocol's vocabulary (the core Command and
Event kinds of the schemas) and what this runtime decides on (its Command kinds, Event kinds,
and the Mission and WorkItem states of spec 7.1 and 10.2). Every other list derives from these:
the subsets below are typed, so mypy refuses a misspelt member, and
``tests/unit/group/test_kinds.py`` checks the Authority's tables against the full lists, the
runtime's kinds against the protocol's, and the protocol's against the bundle's schemas (with
``tests/unit/test_models_json_schema.py``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

CommandKind = Literal[
    "approval.grant_execution",
    "artifact.publish",
    "ext.missionweaveprotocol.core.artifact_import",
    "ext.missionweaveprotocol.core.context_package_publish",
    "ext.missionweaveprotocol.core.execution_lease_renew",
    "ext.missionweaveprotocol.core.group_archive",
    "ext.missionweaveprotocol.core.resource_usage_record",
    "ext.missionweaveprotocol.core.schedule_disclose",
    "ext.missionweaveprotocol.core.work_dependency_add",
    "membership.change",
    "membership.end",
    "membership.grant_delegation",
    "message.correct",
    "message.post",
    "message.redact",
    "message.retract",
    "mission.approve",
    "mission.assign_coordinator",
    "mission.cancel",
    "mission.create",
    "mission.create_child",
    "mission.create_follow_up",
    "mission.renew_coordinator",
    "mission.request_changes",
    "mission.submit_for_approval",
    "mission.terminate",
    "policy.grant_cooperation_override",
    "work.accept_offer",
    "work.accept_result",
    "work.authorize",
    "work.block",
    "work.cancel",
    "work.checkpoint",
    "work.fail",
    "work.offer",
    "work.propose",
    "work.start",
    "work.submit",
    "work.unblock",
]

EventKind = Literal[
    "approval.execution.granted",
    "artifact.published",
    "ext.missionweaveprotocol.core.artifact_imported",
    "ext.missionweaveprotocol.core.context_package_published",
    "ext.missionweaveprotocol.core.cooperation_override_consumed",
    "ext.missionweaveprotocol.core.cooperation_threshold_reached",
    "ext.missionweaveprotocol.core.execution_lease_revoked",
    "ext.missionweaveprotocol.core.ownership_expired",
    "ext.missionweaveprotocol.core.resource_usage_recorded",
    "ext.missionweaveprotocol.core.schedule_disclosed",
    "group.archived",
    "group.snapshot.created",
    "membership.changed",
    "membership.delegation.granted",
    "membership.ended",
    "message.corrected",
    "message.posted",
    "message.redacted",
    "message.retracted",
    "mission.approved",
    "mission.cancelled",
    "mission.changes_requested",
    "mission.child.created",
    "mission.coordinator.assigned",
    "mission.coordinator.renewed",
    "mission.created",
    "mission.follow_up.created",
    "mission.submitted_for_approval",
    "mission.terminated",
    "policy.cooperation_override.granted",
    "work.authorized",
    "work.blocked",
    "work.cancelled",
    "work.checkpointed",
    "work.contract.revised",
    "work.failed",
    "work.offer.accepted",
    "work.offer.created",
    "work.progressed",
    "work.proposed",
    "work.result.accepted",
    "work.started",
    "work.submitted",
    "work.unblocked",
]

MissionState = Literal["active", "awaiting_approval", "approved", "failed", "cancelled"]
WorkItemState = Literal[
    "open",
    "offered",
    "queued",
    "active",
    "blocked",
    "submitted",
    "verified",
    "failed",
    "cancelled",
]

COMMAND_KINDS: Final[tuple[CommandKind, ...]] = get_args(CommandKind)
EVENT_KINDS: Final[tuple[EventKind, ...]] = get_args(EventKind)
MISSION_STATES: Final[tuple[MissionState, ...]] = get_args(MissionState)
WORK_ITEM_STATES: Final[tuple[WorkItemState, ...]] = get_args(WorkItemState)

# A Mission in one of these states takes no Command that changes it.
TERMINAL_MISSION_STATES: Final[frozenset[MissionState]] = frozenset(
    {"approved", "cancelled", "failed"}
)
# WorkItem states from which work.fail / work.cancel (and Mission propagation) apply.
UNFINISHED_WORK_STATES: Final[frozenset[WorkItemState]] = frozenset(
    {"open", "offered", "queued", "active", "blocked", "submitted"}
)
# A WorkItem in one of these never changes again: the Group keeps only a short record of it and
# its WorkItemWorkflow ends with its final view.
FINAL_WORK_STATES: Final[frozenset[WorkItemState]] = frozenset({"verified", "cancelled"})
# No longer in progress: final, or failed (which a new offer may still revive).
SETTLED_WORK_STATES: Final[frozenset[WorkItemState]] = FINAL_WORK_STATES | {"failed"}
# From ``queued`` on, the item has an owner chosen on a recorded basis.
OWNED_WORK_STATES: Final[frozenset[WorkItemState]] = frozenset(
    {"queued", "active", "blocked", "submitted", "verified"}
)
SUBMITTED_WORK_STATES: Final[frozenset[WorkItemState]] = frozenset({"submitted", "verified"})
# A WorkItem that may still be offered (again), or promoted to a child Mission.
OFFERABLE_WORK_STATES: Final[frozenset[WorkItemState]] = (
    UNFINISHED_WORK_STATES - {"submitted"}
) | {"failed"}
PROMOTABLE_WORK_STATES: Final[frozenset[WorkItemState]] = UNFINISHED_WORK_STATES - {"submitted"}
# No owner holds the contract yet (or any more): the Coordinator may add dependencies to it.
REPLANNABLE_WORK_STATES: Final[frozenset[WorkItemState]] = frozenset({"open", "offered", "failed"})


# --- the protocol's vocabulary (the schemas' enumerations) ---------------------------------

CORE_COMMAND_KINDS: frozenset[str] = frozenset(
    {
        "mission.create",
        "mission.assign_coordinator",
        "mission.renew_coordinator",
        "mission.submit_for_approval",
        "mission.approve",
        "mission.request_changes",
        "mission.cancel",
        "mission.terminate",
        "mission.create_child",
        "mission.create_follow_up",
        "membership.change",
        "membership.end",
        "membership.grant_delegation",
        "message.post",
        "message.correct",
        "message.retract",
        "message.redact",
        "work.propose",
        "work.authorize",
        "work.offer",
        "work.accept_offer",
        "work.start",
        "work.checkpoint",
        "work.block",
        "work.unblock",
        "work.submit",
        "work.accept_result",
        "work.fail",
        "work.cancel",
        "artifact.publish",
        "approval.grant_execution",
        "policy.grant_cooperation_override",
    }
)

# Registry and identity actions of the Organization: outside any Group, issued by a service.
ORGANIZATION_COMMAND_KINDS: frozenset[str] = frozenset(
    {
        "ext.missionweaveprotocol.registry.agent_card_register",
        "ext.missionweaveprotocol.identity.session_open",
    }
)

# Kinds only the current Coordinator may issue: the schema requires their Coordinator Epoch.
COORDINATOR_ONLY_KINDS: frozenset[str] = frozenset(
    {
        "mission.renew_coordinator",
        "mission.submit_for_approval",
        "mission.create_child",
        "membership.grant_delegation",
        "work.accept_result",
    }
)

# Kinds that bring a Group into existence, so no Membership or Coordinator epoch exists yet.
GROUP_CREATING_KINDS: frozenset[str] = frozenset({"mission.create", "mission.create_follow_up"})

CORE_EVENT_KINDS: frozenset[str] = frozenset(
    {
        "mission.created",
        "mission.coordinator.assigned",
        "mission.coordinator.renewed",
        "mission.submitted_for_approval",
        "mission.approved",
        "mission.changes_requested",
        "mission.cancelled",
        "mission.terminated",
        "mission.child.created",
        "mission.follow_up.created",
        "membership.changed",
        "membership.ended",
        "membership.delegation.granted",
        "message.posted",
        "message.corrected",
        "message.retracted",
        "message.redacted",
        "work.proposed",
        "work.authorized",
        "work.offer.created",
        "work.offer.accepted",
        "work.contract.revised",
        "work.started",
        "work.progressed",
        "work.checkpointed",
        "work.blocked",
        "work.unblocked",
        "work.submitted",
        "work.result.accepted",
        "work.failed",
        "work.cancelled",
        "artifact.published",
        "approval.execution.granted",
        "policy.cooperation_override.granted",
        "group.snapshot.created",
        "group.archived",
    }
)

# Recorded by the Organization's services outside every Group log, hence unsequenced.
ORGANIZATION_EVENT_KINDS: frozenset[str] = frozenset(
    {
        "ext.missionweaveprotocol.registry.agent_card_registered",
        "ext.missionweaveprotocol.identity.session_opened",
    }
)
