"""Signed Evidence: one check's result mapped to the acceptance criteria it supports."""

from __future__ import annotations

from typing import Annotated, Literal

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    CriterionId,
    Identifier,
    IdentifierOrSha256,
    JsonObject,
    NonEmptyUniqueList,
    Sha256,
    Signature,
    Timestamp,
    UniqueList,
    text,
)

VersionText = Annotated[str, text(0, 500)]
# Every kind of evidence a criterion can demand, plus the report of a failed attempt.
EvidenceKind = Literal[
    "artifact_integrity",
    "schema_validation",
    "deterministic_test",
    "business_rule",
    "reviewer_assessment",
    "human_review",
    "policy_check",
    "failure_report",
]


class EvidenceSubject(WireModel):
    """What was checked: a WorkItem or Mission by ID, an Artifact by ID or content hash."""

    type: Literal["work_item", "artifact", "mission"]
    id: IdentifierOrSha256


class Evidence(WireModel):
    evidence_id: Identifier
    mission_id: Identifier
    group_id: Identifier
    work_item_id: Identifier
    type: EvidenceKind
    subject: EvidenceSubject
    criterion_ids: NonEmptyUniqueList[CriterionId]
    method: Annotated[str, text(1, 4000)]
    result: Literal["passed", "failed", "inconclusive"]
    details: JsonObject | None = None
    artifact_hashes: UniqueList[Sha256]
    generated_by: Actor
    tool_version: VersionText | None = None
    model_version: VersionText | None = None
    created_at: Timestamp
    signature: Signature
