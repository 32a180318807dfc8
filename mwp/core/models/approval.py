"""Signed Approval decisions: final Mission approval, child Missions and work execution."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    Identifier,
    SafeInteger,
    SemVer,
    Sha256,
    Signature,
    Timestamp,
    UniqueList,
    text,
)


class Approval(WireModel):
    approval_id: Identifier
    kind: Literal["mission_final", "child_mission", "work_execution"]
    decision: Literal["approved", "changes_requested", "denied", "revoked"]
    mission_id: Identifier
    group_id: Identifier
    work_item_id: Identifier | None = None
    mission_revision: SafeInteger
    artifact_hashes: UniqueList[Sha256]
    acceptance_policy_version: SemVer
    approver: Actor
    comments: Annotated[str, text(0, 10000)]
    conditions: list[Annotated[str, text(1, 2000)]]
    revokes_approval_id: Identifier | None = None
    occurred_at: Timestamp
    signature: Signature

    @model_validator(mode="after")
    def _decision_rules(self) -> Self:
        # Approving a Mission's result means approving specific Artifacts, by hash.
        if (
            self.kind in ("mission_final", "child_mission")
            and self.decision == "approved"
            and not self.artifact_hashes
        ):
            raise ValueError("an approved Mission decision must name at least one Artifact hash")
        if self.kind == "mission_final" and self.approver.type != "human":
            raise ValueError("final Mission approval is a human decision")
        if self.kind == "work_execution":
            self._require("work_item_id", when="approving work execution")
        if self.decision == "revoked":
            self._require("revokes_approval_id", when="the decision revokes an approval")
        return self
