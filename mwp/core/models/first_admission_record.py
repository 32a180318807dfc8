"""The First-Admission Record: trusted admission facts of a Signed Document, itself unsigned."""

from __future__ import annotations

from typing import Literal

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Identifier,
    ProtocolVersion,
    ServiceActor,
    Sha256,
    Timestamp,
)

CLAUSES: tuple[str, ...] = ("MWP-ADM-001",)

DocumentKind = Literal[
    "agent-card",
    "approval",
    "artifact",
    "command",
    "context-package",
    "event",
    "evidence",
    "extension-profile",
    "group-snapshot",
]


class FirstAdmissionRecord(WireModel):
    protocol_version: ProtocolVersion
    admission_record_id: Identifier
    organization_id: Identifier
    document_kind: DocumentKind
    signing_hash: Sha256
    key_id: Identifier
    principal: Actor
    trusted_accepted_at: Timestamp
    accepted_by: ServiceActor
