"""Committed Messages: context for the Group, never authority to act."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Extensions,
    FalseConst,
    Identifier,
    NonEmptyList,
    Sha256,
    Timestamp,
    UniqueList,
    Uri,
    text,
)

MessageText = Annotated[str, text(1, 100000)]


class TextContent(WireModel):
    type: Literal["text"]
    text: MessageText


class ArtifactRefContent(WireModel):
    type: Literal["artifact_ref"]
    artifact_hash: Sha256


class DataRefContent(WireModel):
    """Structured data with the URI of its schema; the data itself is any JSON value."""

    nullable_members = frozenset({"data"})

    type: Literal["data_ref"]
    schema_uri: Uri = Field(alias="schema")
    data: Any


# The three shapes differ in their `type` constant, so at most one can ever match.
MessageContent = Annotated[
    TextContent | ArtifactRefContent | DataRefContent, Field(discriminator="type")
]


class Message(WireModel):
    message_id: Identifier
    mission_id: Identifier
    group_id: Identifier
    conversation_id: Identifier
    author: Actor
    kind: Literal["message", "correction", "retraction", "redaction"]
    authority: FalseConst
    target_message_id: Identifier | None = None
    content: NonEmptyList[MessageContent]
    mentions: UniqueList[Actor] | None = None
    references: UniqueList[Identifier] | None = None
    reason: Annotated[str, text(1, 4000)] | None = None
    committed_at: Timestamp
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _amendments_name_their_target(self) -> Self:
        if self.kind != "message":
            self._require("target_message_id", "reason", when=f"the Message is a {self.kind}")
        return self
