"""The signed Command envelope and the scope rules tying its kind to its actor and epochs."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import PlainValidator, model_validator

from mwp.core.kinds import (
    COORDINATOR_ONLY_KINDS,
    CORE_COMMAND_KINDS,
    GROUP_CREATING_KINDS,
    ORGANIZATION_COMMAND_KINDS,
)
from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Extensions,
    Identifier,
    JsonObject,
    PositiveInteger,
    ProtocolVersion,
    SafeInteger,
    Signature,
    Timestamp,
    is_extension_kind,
)

CLAUSES: tuple[str, ...] = ("MWP-EVT-001",)


def _command_kind(value: object) -> str:
    if isinstance(value, str) and (value in CORE_COMMAND_KINDS or is_extension_kind(value)):
        return value
    raise ValueError("not a core or extension Command kind")


CommandKind = Annotated[str, PlainValidator(_command_kind)]


class Command(WireModel):
    protocol_version: ProtocolVersion
    action_id: Identifier
    actor: Actor
    session_epoch: PositiveInteger | None = None
    membership_epoch: PositiveInteger | None = None
    coordinator_epoch: PositiveInteger | None = None
    group_id: Identifier | None = None
    conversation_id: Identifier | None = None
    work_item_id: Identifier | None = None
    cooperation_override_grant_id: Identifier | None = None
    kind: CommandKind
    expected_revision: SafeInteger | None = None
    correlation_id: Identifier
    caused_by_event_id: Identifier | None = None
    issued_at: Timestamp
    payload: JsonObject
    extensions: Extensions | None = None
    signature: Signature

    @model_validator(mode="after")
    def _scope_rules(self) -> Self:
        kind, actor = self.kind, self.actor.type
        if actor == "agent":
            self._require(
                "group_id", "session_epoch", "membership_epoch", when="an agent issues a Command"
            )
        else:
            self._forbid("session_epoch", when="the actor is not an agent")
        if actor == "service":
            self._forbid("membership_epoch", "coordinator_epoch", when="a service issues it")
        if kind in CORE_COMMAND_KINDS:
            self._require("group_id", when="the kind is a core Group Command")
        if actor == "human" and kind not in GROUP_CREATING_KINDS:
            self._require("group_id", "membership_epoch", when="a human acts in an existing Group")
        if kind in GROUP_CREATING_KINDS:
            if actor != "human":
                raise ValueError(f"{kind} must be issued by a human")
            self._forbid("membership_epoch", "coordinator_epoch", when=f"the kind is {kind}")
        if kind in ORGANIZATION_COMMAND_KINDS:
            if actor != "service":
                raise ValueError(f"{kind} must be issued by a service")
            self._forbid(
                "group_id",
                "session_epoch",
                "membership_epoch",
                "coordinator_epoch",
                when="the Command is Organization-scoped",
            )
        if kind in COORDINATOR_ONLY_KINDS:
            if actor != "agent":
                raise ValueError(f"{kind} must be issued by the Coordinator agent")
            self._require("coordinator_epoch", when=f"the kind is {kind}")
        if kind == "mission.terminate":
            if actor == "human":
                raise ValueError("mission.terminate is not issued by a human")
            if actor == "agent":
                self._require("coordinator_epoch", when="an agent terminates a Mission")
        return self
