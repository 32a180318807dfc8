"""Pydantic models of every durable protocol object, one per normative schema.

``validate_document`` is the schema stage (stage 2 of Signed Document verification): it takes
a value as parsed by :mod:`mwp.core.wire.strict_json` and returns the model, or raises
:class:`DocumentInvalid`. A validated model dumps back to the same JSON value with
``model_dump(by_alias=True, exclude_unset=True, mode="json")``; timestamps keep their exact
text and an integral ``1.0`` in an integer member comes back as ``1``, the same JSON number.

``common.schema.json`` has no top-level object (only shared definitions), so it has no entry in
:data:`SCHEMA_MODELS`; its definitions are the types and objects of :mod:`mwp.core.models.common`.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from mwp.core.models.agent_card import AgentCard
from mwp.core.models.approval import Approval
from mwp.core.models.artifact import Artifact
from mwp.core.models.command import Command
from mwp.core.models.common import Actor, Budget, PublicKey, Signature
from mwp.core.models.context_package import ContextPackage
from mwp.core.models.conversation import Conversation
from mwp.core.models.error import WireError
from mwp.core.models.event import Event
from mwp.core.models.evidence import Evidence
from mwp.core.models.extension_profile import ExtensionProfile
from mwp.core.models.first_admission_record import FirstAdmissionRecord
from mwp.core.models.group import Group
from mwp.core.models.group_snapshot import GroupSnapshot
from mwp.core.models.lease import Lease
from mwp.core.models.membership import Membership
from mwp.core.models.message import Message
from mwp.core.models.mission import Mission
from mwp.core.models.presence_record import PresenceRecord
from mwp.core.models.websocket_frame import FRAME_TAGS, WebSocketFrame
from mwp.core.models.work_contract import WorkContract
from mwp.core.models.work_item import WorkItem

CLAUSES: tuple[str, ...] = ("MWP-FND-004",)

__all__ = [
    "SCHEMA_MODELS",
    "Actor",
    "AgentCard",
    "Approval",
    "Artifact",
    "Budget",
    "Command",
    "ContextPackage",
    "Conversation",
    "DocumentInvalid",
    "Event",
    "Evidence",
    "ExtensionProfile",
    "FirstAdmissionRecord",
    "Group",
    "GroupSnapshot",
    "Lease",
    "Membership",
    "Message",
    "Mission",
    "PresenceRecord",
    "PublicKey",
    "Signature",
    "WebSocketFrame",
    "WireError",
    "WorkContract",
    "WorkItem",
    "validate_document",
]

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "agent-card.schema.json": AgentCard,
    "approval.schema.json": Approval,
    "artifact.schema.json": Artifact,
    "command.schema.json": Command,
    "context-package.schema.json": ContextPackage,
    "conversation.schema.json": Conversation,
    "error.schema.json": WireError,
    "event.schema.json": Event,
    "evidence.schema.json": Evidence,
    "extension-profile.schema.json": ExtensionProfile,
    "first-admission-record.schema.json": FirstAdmissionRecord,
    "group-snapshot.schema.json": GroupSnapshot,
    "group.schema.json": Group,
    "lease.schema.json": Lease,
    "membership.schema.json": Membership,
    "message.schema.json": Message,
    "mission.schema.json": Mission,
    "presence-record.schema.json": PresenceRecord,
    "websocket-frame.schema.json": WebSocketFrame,
    "work-contract.schema.json": WorkContract,
    "work-item.schema.json": WorkItem,
}

_REASONS_SHOWN = 3


class DocumentInvalid(ValueError):  # noqa: N818 (public name fixed by the codec's contract)
    """A value does not conform to its schema; ``reason`` says where and why."""

    def __init__(self, schema_name: str, reason: str) -> None:
        super().__init__(f"{schema_name}: {reason}")
        self.schema_name = schema_name
        self.reason = reason


def validate_document(schema_name: str, value: object) -> BaseModel:
    """Validate a parsed JSON value against the model of ``schema_name``.

    ``schema_name`` is a schema file name such as ``"command.schema.json"`` (a leading
    ``schemas/`` is ignored). An unknown name is a programming error and raises ``KeyError``.
    """
    name = schema_name.rpartition("/")[2]
    model = SCHEMA_MODELS.get(name)
    if model is None:
        raise KeyError(f"no model for schema {schema_name!r}")
    try:
        return model.model_validate(value, strict=True, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise DocumentInvalid(name, _reason(exc)) from exc


def _reason(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    # A failed optional member also reports that it was "not None"; that branch says nothing.
    useful = [e for e in errors if e["type"] != "none_required"] or errors
    parts = []
    for error in useful[:_REASONS_SHOWN]:
        steps = [_escape(str(p)) for p in error["loc"] if not _is_branch_label(p)]
        parts.append(f"{'/' + '/'.join(steps) if steps else '/'}: {error['msg']}")
    if len(useful) > _REASONS_SHOWN:
        parts.append(f"and {len(useful) - _REASONS_SHOWN} more")
    return "; ".join(parts)


def _escape(step: str) -> str:
    # JSON Pointer escaping: extension member names are URIs and contain "/".
    return step.replace("~", "~0").replace("/", "~1")


def _is_branch_label(part: object) -> bool:
    # Union branches (`function-plain[...]`) and frame tags name no member of the document.
    return isinstance(part, str) and ("[" in part or part in FRAME_TAGS)
