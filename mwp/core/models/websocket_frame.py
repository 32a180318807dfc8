"""Frames of the WebSocket binding: handshake, subscription, Commands, Events, acks, liveness.

Every frame kind is told apart by its `frameType` (and a HELLO frame by its `phase`); since
each kind forbids unknown members and fixes those constants, a frame can match at most one
kind, so dispatching on them gives exactly the schema's one-of verdict.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, RootModel, Tag

from mwp.core.models._base import WireModel
from mwp.core.models.command import Command
from mwp.core.models.common import (
    Base64Url,
    Identifier,
    Kind,
    NonEmptyList,
    NonEmptyUniqueList,
    PositiveInteger,
    ProtocolVersion,
    SafeInteger,
    Timestamp,
    UniqueList,
    text,
)
from mwp.core.models.error import WireError
from mwp.core.models.event import Event
from mwp.core.models.presence_record import PresenceRecord


class Frame(WireModel):
    protocol_version: ProtocolVersion
    frame_id: Identifier


class HelloClientInit(Frame):
    frame_type: Literal["HELLO"]
    phase: Literal["client_init"]
    agent_id: Identifier
    key_id: Identifier
    client_nonce: Base64Url
    supported_versions: NonEmptyUniqueList[ProtocolVersion]


class HelloServerChallenge(Frame):
    frame_type: Literal["HELLO"]
    phase: Literal["server_challenge"]
    selected_version: ProtocolVersion
    client_nonce: Base64Url
    server_nonce: Base64Url
    challenge: Base64Url


class HelloClientResponse(Frame):
    frame_type: Literal["HELLO"]
    phase: Literal["client_response"]
    agent_id: Identifier
    key_id: Identifier
    client_nonce: Base64Url
    server_nonce: Base64Url
    challenge_signature: Base64Url


class HelloServerAccept(Frame):
    frame_type: Literal["HELLO"]
    phase: Literal["server_accept"]
    selected_version: ProtocolVersion
    session_token: Annotated[str, text(16, 8192)]
    session_epoch: PositiveInteger
    expires_at: Timestamp


class Attention(WireModel):
    """What a subscriber wants to be woken for within one Group."""

    event_kinds: UniqueList[Kind] | None = None
    conversation_ids: UniqueList[Identifier] | None = None
    work_item_ids: UniqueList[Identifier] | None = None
    mentions_only: bool | None = None
    announcements: bool | None = None


class GroupSubscription(WireModel):
    group_id: Identifier
    after_sequence: SafeInteger
    attention: Attention | None = None


class SubscribeFrame(Frame):
    frame_type: Literal["SUBSCRIBE"]
    subscription_id: Identifier
    groups: NonEmptyList[GroupSubscription]


class CommandFrame(Frame):
    frame_type: Literal["COMMAND"]
    command: Command


class EventFrame(Frame):
    frame_type: Literal["EVENT"]
    event: Event


class Acknowledgement(WireModel):
    group_id: Identifier
    sequence: SafeInteger


class AckFrame(Frame):
    frame_type: Literal["ACK"]
    acknowledgements: NonEmptyList[Acknowledgement]
    sent_at: Timestamp


class PingFrame(Frame):
    frame_type: Literal["PING"]
    nonce: Base64Url
    reply_to_nonce: Base64Url | None = None
    sent_at: Timestamp
    presence: PresenceRecord | None = None


class ErrorFrame(Frame):
    frame_type: Literal["ERROR"]
    error: WireError


# Discriminator tags: a frame's type, and for HELLO frames its phase too.
FRAME_TAGS: frozenset[str] = frozenset(
    {
        "HELLO/client_init",
        "HELLO/server_challenge",
        "HELLO/client_response",
        "HELLO/server_accept",
        "SUBSCRIBE",
        "COMMAND",
        "EVENT",
        "ACK",
        "PING",
        "ERROR",
    }
)


def _frame_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        frame_type, phase = value.get("frameType"), value.get("phase")
    elif isinstance(value, Frame):
        frame_type, phase = getattr(value, "frame_type", None), getattr(value, "phase", None)
    else:
        return None
    if frame_type == "HELLO" and isinstance(phase, str):
        return f"HELLO/{phase}"
    return frame_type if isinstance(frame_type, str) else None


AnyFrame = Annotated[
    Annotated[HelloClientInit, Tag("HELLO/client_init")]
    | Annotated[HelloServerChallenge, Tag("HELLO/server_challenge")]
    | Annotated[HelloClientResponse, Tag("HELLO/client_response")]
    | Annotated[HelloServerAccept, Tag("HELLO/server_accept")]
    | Annotated[SubscribeFrame, Tag("SUBSCRIBE")]
    | Annotated[CommandFrame, Tag("COMMAND")]
    | Annotated[EventFrame, Tag("EVENT")]
    | Annotated[AckFrame, Tag("ACK")]
    | Annotated[PingFrame, Tag("PING")]
    | Annotated[ErrorFrame, Tag("ERROR")],
    Discriminator(
        _frame_tag,
        custom_error_type="unknown_frame",
        custom_error_message="not a known frame type (and HELLO phase)",
    ),
]


class WebSocketFrame(RootModel[AnyFrame]):
    """Any one frame; ``.root`` is the concrete frame model."""

    model_config = ConfigDict(strict=True, frozen=True, ser_json_inf_nan="constants")
