"""Conversations of a Group and who may read them."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Extensions,
    Identifier,
    NonEmptyList,
    SafeInteger,
    Timestamp,
    text,
)


class ConversationAccess(WireModel):
    mode: Literal["group", "restricted"]
    members: NonEmptyList[Actor] | None = None

    @model_validator(mode="after")
    def _restricted_has_members(self) -> Self:
        if self.mode == "restricted":
            self._require("members", when="access is restricted")
        return self


class Conversation(WireModel):
    conversation_id: Identifier
    mission_id: Identifier
    group_id: Identifier
    type: Literal["group", "work_item", "review", "restricted"]
    primary_work_item_id: Identifier | None = None
    title: Annotated[str, text(1, 500)]
    access: ConversationAccess
    created_by: Actor
    created_at: Timestamp
    state: Literal["active", "closed"]
    revision: SafeInteger
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _type_rules(self) -> Self:
        if self.type == "work_item":
            self._require("primary_work_item_id", when="the Conversation is about a WorkItem")
        if self.type == "restricted" and self.access.mode != "restricted":
            raise ValueError("a restricted Conversation needs restricted access")
        return self
