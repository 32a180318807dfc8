"""The signed Event envelope: Group Events carry their Group order, Organization Events do not."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import PlainValidator, model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Extensions,
    Identifier,
    JsonObject,
    PositiveInteger,
    ProtocolVersion,
    SafeInteger,
    Sha256,
    Signature,
    Timestamp,
    is_extension_kind,
)

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


def _event_kind(value: object) -> str:
    if isinstance(value, str) and (value in CORE_EVENT_KINDS or is_extension_kind(value)):
        return value
    raise ValueError("not a core or extension Event kind")


EventKind = Annotated[str, PlainValidator(_event_kind)]


class Cause(WireModel):
    type: Literal["command", "event", "timer", "policy"]
    id: Identifier


class Event(WireModel):
    protocol_version: ProtocolVersion
    event_id: Identifier
    group_id: Identifier | None = None
    sequence: PositiveInteger | None = None
    aggregate_revision: SafeInteger | None = None
    kind: EventKind
    actor: Actor
    cause: Cause
    correlation_id: Identifier
    conversation_id: Identifier | None = None
    work_item_id: Identifier | None = None
    occurred_at: Timestamp
    payload: JsonObject
    accepted_by: Actor
    command_hash: Sha256 | None = None
    extensions: Extensions | None = None
    signature: Signature

    @model_validator(mode="after")
    def _ordering_context(self) -> Self:
        if self.kind in ORGANIZATION_EVENT_KINDS:
            if self.actor.type != "service":
                raise ValueError(f"{self.kind} must have a service actor")
            self._forbid(
                "group_id",
                "sequence",
                "aggregate_revision",
                when="the Event is Organization-scoped",
            )
        else:
            self._require(
                "group_id", "sequence", "aggregate_revision", when="the Event is a Group Event"
            )
        return self
