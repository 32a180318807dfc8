"""Signed Context Packages: a summary of a Group's history with its Event provenance."""

from __future__ import annotations

from typing import Annotated

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    AgentActor,
    Extensions,
    Identifier,
    NonEmptyUniqueList,
    PositiveInteger,
    Sha256,
    Signature,
    Timestamp,
    UniqueList,
    text,
)

Statement = Annotated[str, text(1, 4000)]


class SourceEventRange(WireModel):
    from_sequence: PositiveInteger
    to_sequence: PositiveInteger
    event_ids: NonEmptyUniqueList[Identifier]


class Decision(WireModel):
    description: Statement
    source_event_ids: NonEmptyUniqueList[Identifier]


class ContextPackage(WireModel):
    context_package_id: Identifier
    version: PositiveInteger
    previous_context_package_id: Identifier | None = None
    mission_id: Identifier
    group_id: Identifier
    work_item_id: Identifier | None = None
    source_event_range: SourceEventRange
    artifact_hashes: UniqueList[Sha256]
    summary: Annotated[str, text(1, 50000)]
    decisions: list[Decision]
    constraints: list[Statement]
    unresolved_questions: list[Statement]
    generated_by: AgentActor
    generated_at: Timestamp
    extensions: Extensions | None = None
    signature: Signature
