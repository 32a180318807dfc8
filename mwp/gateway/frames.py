"""One WebSocket message in, one typed frame out, or the typed ``ERROR`` frame that answers it.

The checks run in the binding's order (spec 17.1, 17.4): a binary message is refused; a text
message over :data:`MAX_FRAME_BYTES` is refused unread; then the UTF-8 text is parsed by the
project's strict parser, which refuses duplicate member names before any schema is consulted;
only then is the value validated against ``websocket-frame.schema.json``. Each refusal is an
:class:`FrameError` (an :class:`~mwp.core.errors.MwpError`) that names the refused frame's
``frameId`` whenever that much of it could be read, and :func:`error_frame` turns any MWP error
into a schema-valid ``ERROR`` frame. A refused message changes nothing: the connection carries
on.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel

from mwp import PROTOCOL_VERSION
from mwp.contracts.command_size import MAX_COMMAND_BYTES
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.models import DocumentInvalid, validate_document
from mwp.core.models.websocket_frame import (
    AckFrame,
    CommandFrame,
    ErrorFrame,
    EventFrame,
    HelloClientInit,
    HelloClientResponse,
    HelloServerAccept,
    HelloServerChallenge,
    PingFrame,
    SubscribeFrame,
    WebSocketFrame,
)
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, encode_wire_text, parse_text
from mwp.core.wire.values import format_utc, is_identifier

CLAUSES: tuple[str, ...] = ("MWP-EVT-008",)

FRAME_SCHEMA: Final = "websocket-frame.schema.json"

# The largest frame read: the largest Command the Group accepts (command_size.py) plus room
# for the COMMAND frame's own members. Every other frame is far smaller, and large content
# travels as Artifacts (spec 17.4), so a larger frame can only be refused anyway.
MAX_FRAME_BYTES: Final = MAX_COMMAND_BYTES + 16 * 1024
# What the WebSocket layer buffers at most: frames between the two bounds get a typed ERROR
# and the connection carries on; a larger one closes it (1009), so one peer cannot make the
# gateway hold unbounded memory.
MAX_MESSAGE_BYTES: Final = 4 * MAX_FRAME_BYTES

Frame = (
    HelloClientInit
    | HelloServerChallenge
    | HelloClientResponse
    | HelloServerAccept
    | SubscribeFrame
    | CommandFrame
    | EventFrame
    | AckFrame
    | PingFrame
    | ErrorFrame
)


class FrameError(MwpError):
    """A message refused before (or at) its schema; ``related_frame_id`` when it was legible."""

    def __init__(
        self, code: ErrorCode, stage: str, reason: str, related_frame_id: str | None = None
    ) -> None:
        super().__init__(code, diagnostic=Diagnostic(stage, reason))
        self.related_frame_id = related_frame_id


def new_frame_id() -> str:
    return f"urn:uuid:{uuid.uuid4()}"


def now_text() -> str:
    return format_utc(datetime.now(UTC))


@dataclass(frozen=True)
class Incoming:
    """A frame as read: its typed model, and the JSON value it was validated from (a
    COMMAND's Command travels on as that value, so its signed content is untouched)."""

    frame: Frame
    value: dict[str, Any]


def read_frame(message: str | bytes) -> Incoming:
    """The typed frame ``message`` carries, or :class:`FrameError`."""
    if not isinstance(message, str):
        raise FrameError(ErrorCode.PROTOCOL_VIOLATION, "framing", "binary-message")
    # A character is at least one UTF-8 byte: a text this long is over the bound unencoded.
    if len(message) > MAX_FRAME_BYTES or len(encode_wire_text(message)) > MAX_FRAME_BYTES:
        raise FrameError(ErrorCode.PROTOCOL_VIOLATION, "framing", "frame-too-large")
    try:
        value = parse_text(message)
    except JsonSyntaxError as exc:
        raise FrameError(ErrorCode.PROTOCOL_VIOLATION, "parse", f"json: {exc}") from None
    related = _frame_id_of(value)
    try:
        model = validate_document(FRAME_SCHEMA, value)
    except DocumentInvalid as exc:
        if not _speaks_this_version(value):
            raise FrameError(
                ErrorCode.UNSUPPORTED_VERSION, "schema", "no-common-version", related
            ) from None
        raise FrameError(
            ErrorCode.SCHEMA_VALIDATION_FAILED, "schema", exc.reason, related
        ) from None
    assert isinstance(model, WebSocketFrame) and isinstance(value, dict)  # FRAME_SCHEMA's
    frame: Frame = model.root
    return Incoming(frame, value)


def _speaks_this_version(value: Any) -> bool:
    """False for a frame of another protocol version, or a HELLO offering only others."""
    if not isinstance(value, dict):
        return True
    version = value.get("protocolVersion")
    if isinstance(version, str) and version != PROTOCOL_VERSION:
        return False
    offered = value.get("supportedVersions")
    if value.get("phase") == "client_init" and isinstance(offered, list) and offered:
        return PROTOCOL_VERSION in offered
    return True


def _frame_id_of(value: Any) -> str | None:
    """The frame's ``frameId`` if it is one: an ERROR may name it even when the rest fails."""
    if isinstance(value, dict):
        frame_id = value.get("frameId")
        if isinstance(frame_id, str) and is_identifier(frame_id):
            return frame_id
    return None


def frame_json(frame: BaseModel) -> dict[str, Any]:
    """A validated frame model as its wire JSON value."""
    value: dict[str, Any] = frame.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return value


def encode(frame: dict[str, Any]) -> str:
    """A frame's wire text: its JCS form, so equal frames are equal bytes."""
    try:
        return canonicalize(frame).decode("utf-8")
    except JcsDataModelError as exc:  # a frame this server built: a programming error
        raise ValueError(f"not a JSON frame: {exc}") from exc


def error_frame(
    error: MwpError,
    *,
    related_frame_id: str | None = None,
    fatal: bool | None = None,
    occurred_at: str | None = None,
) -> dict[str, Any]:
    """The ``ERROR`` frame for ``error`` (schema-valid; never the protected diagnostic)."""
    wire = dict(getattr(error, "wire", None) or error.to_wire(occurred_at or now_text()))
    related = related_frame_id or getattr(error, "related_frame_id", None)
    if related is not None:
        wire["relatedFrameId"] = related
    if fatal is not None:
        wire["fatal"] = fatal
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": new_frame_id(),
        "frameType": "ERROR",
        "error": wire,
    }
