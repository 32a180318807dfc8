"""The facts of one verified Command that the Authority step reads, parsed once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.api import Envelope
from mwp.core.group.payload import Payload
from mwp.core.group.rejection import reject
from mwp.core.wire.values import MAX_SAFE_INTEGER, is_identifier

CLAUSES: tuple[str, ...] = ("MWP-EVT-001",)


@dataclass(frozen=True, slots=True)
class Incoming:
    kind: str
    action_id: str
    actor_type: str  # "agent" | "human" | "service"
    actor_id: str
    group_id: str | None
    session_epoch: int | None
    membership_epoch: int | None
    coordinator_epoch: int | None
    work_item_id: str | None
    conversation_id: str | None
    expected_revision: int | None
    correlation_id: str
    payload: Payload
    signing_hash: str
    command_hash: str
    issued_at: str
    # The names of the extensions the Command marks critical, and the Cooperation Override
    # Grant it cites (spec 17.4, 20): what the door looks at.
    critical_extensions: tuple[str, ...] = ()
    override_grant_id: str | None = None
    # Every extension entry as sent, by name: what an interpreted extension says.
    extensions: dict[str, Any] = field(default_factory=dict)

    @property
    def actor(self) -> dict[str, str]:
        return {"type": self.actor_type, "id": self.actor_id}

    @property
    def is_agent(self) -> bool:
        return self.actor_type == "agent"

    @property
    def is_service(self) -> bool:
        return self.actor_type == "service"

    @property
    def is_human(self) -> bool:
        return self.actor_type == "human"

    @classmethod
    def parse(cls, envelope: Envelope) -> Incoming:
        """Read the envelope defensively: the shell verified the schema, tests may not have."""
        command = envelope.command
        if not isinstance(command, dict):
            _malformed("the Command is not an object")
        actor = command.get("actor")
        payload = command.get("payload")
        if not isinstance(actor, dict) or actor.get("type") not in ("agent", "human", "service"):
            _malformed("actor")
        if not isinstance(payload, dict):
            _malformed("payload")
        return cls(
            kind=_text(command, "kind"),
            action_id=_uri(command, "actionId"),
            actor_type=str(actor["type"]),
            actor_id=_uri(actor, "id"),
            group_id=_opt_uri(command, "groupId"),
            session_epoch=_opt_int(command, "sessionEpoch"),
            membership_epoch=_opt_int(command, "membershipEpoch"),
            coordinator_epoch=_opt_int(command, "coordinatorEpoch"),
            work_item_id=_opt_uri(command, "workItemId"),
            conversation_id=_opt_uri(command, "conversationId"),
            expected_revision=_opt_int(command, "expectedRevision"),
            correlation_id=_uri(command, "correlationId"),
            payload=Payload(payload),
            signing_hash=envelope.signing_hash,
            command_hash=envelope.command_hash,
            issued_at=_text(command, "issuedAt"),
            critical_extensions=_critical_extensions(command),
            override_grant_id=_opt_uri(command, "cooperationOverrideGrantId"),
            extensions=dict(command.get("extensions", {})),
        )


def _malformed(member: str) -> NoReturn:
    reject(ErrorCode.SCHEMA_VALIDATION_FAILED, f"Command member {member} is malformed")


def _text(command: dict[str, Any], name: str) -> str:
    value = command.get(name)
    if not isinstance(value, str) or not value:
        _malformed(name)
    return str(value)


def _uri(command: dict[str, Any], name: str) -> str:
    value = command.get(name)
    if not isinstance(value, str) or not is_identifier(value):
        _malformed(name)
    return str(value)


def _opt_uri(command: dict[str, Any], name: str) -> str | None:
    return _uri(command, name) if name in command else None


def _critical_extensions(command: dict[str, Any]) -> tuple[str, ...]:
    extensions = command.get("extensions", {})
    if not isinstance(extensions, dict) or not all(
        isinstance(e, dict) for e in extensions.values()
    ):
        _malformed("extensions")
    return tuple(name for name, entry in extensions.items() if entry.get("critical") is True)


def _opt_int(command: dict[str, Any], name: str) -> int | None:
    if name not in command:
        return None
    value = command[name]
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
        _malformed(name)
    return int(value)
