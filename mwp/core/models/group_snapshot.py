"""Signed Group snapshots: the Group state hash through a sequence, with its policy log."""

from __future__ import annotations

from typing import Annotated

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Identifier,
    JsonObject,
    NonEmptyList,
    NonEmptyUniqueList,
    PositiveInteger,
    ServiceActor,
    Sha256,
    Signature,
    Timestamp,
    text,
)


class PolicyLogEntry(WireModel):
    entry_id: Identifier
    decision: Annotated[str, text(1, 4000)]
    actor: Actor
    occurred_at: Timestamp
    details: JsonObject


class GroupSnapshot(WireModel):
    snapshot_id: Identifier
    group_id: Identifier
    through_sequence: PositiveInteger
    event_ids: NonEmptyUniqueList[Identifier]
    state_hash: Sha256
    policy_log: NonEmptyList[PolicyLogEntry]
    created_by: ServiceActor
    created_at: Timestamp
    signature: Signature
