"""The signed Event envelope: Group Events carry their Group order, Organization Events do not."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import PlainValidator, model_validator

from mwp.core.kinds import CORE_EVENT_KINDS, ORGANIZATION_EVENT_KINDS
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
