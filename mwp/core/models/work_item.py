"""The WorkItem: its state, Work Contract, offers, owner, schedule, progress and submission."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import model_validator

from mwp.core.kinds import OWNED_WORK_STATES, SUBMITTED_WORK_STATES, WorkItemState
from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    CapabilityRef,
    Extensions,
    Identifier,
    NonEmptyList,
    NonEmptyUniqueList,
    NonNegativeNumber,
    PositiveInteger,
    SafeInteger,
    Sha256,
    Timestamp,
    UniqueList,
    UnitInterval,
    text,
)
from mwp.core.models.work_contract import WorkContract

DeclineReason = Literal[
    "capacity", "deadline", "capability", "authorization", "dependency", "budget", "other"
]
PhaseText = Annotated[str, text(1, 500)]


class Offer(WireModel):
    offer_id: Identifier
    agent_id: Identifier
    agent_card_version: PositiveInteger
    expires_at: Timestamp
    status: Literal["pending", "accepted", "declined", "withdrawn", "expired", "lost_race"]
    decline_reason: DeclineReason | None = None


class Owner(WireModel):
    agent_id: Identifier
    agent_card_version: PositiveInteger
    capability_pins: NonEmptyList[CapabilityRef]
    ownership_epoch: PositiveInteger
    ownership_lease_id: Identifier
    accepted_at: Timestamp


class SelectionBasis(WireModel):
    required_capabilities: NonEmptyList[CapabilityRef]
    verified_matches: NonEmptyList[CapabilityRef]
    authorization_eligible: bool
    availability_estimate: Timestamp
    expected_cost: NonNegativeNumber
    reliability_evidence: list[Identifier]
    policy_rules_applied: NonEmptyList[Annotated[str, text(1, 200)]]


class ScheduleEstimate(WireModel):
    estimated_start: Timestamp
    estimated_completion: Timestamp
    confidence: UnitInterval
    capacity_status: Literal["available", "queued", "constrained", "blocked"]
    last_calculated_at: Timestamp


class Progress(WireModel):
    current_phase: PhaseText
    completed_milestones: list[PhaseText]
    next_checkpoint: PhaseText
    blockers: list[Annotated[str, text(1, 2000)]]
    updated_completion_estimate: Timestamp
    evidence_ids: UniqueList[Identifier]


class Submission(WireModel):
    artifact_hashes: NonEmptyUniqueList[Sha256]
    evidence_ids: NonEmptyUniqueList[Identifier]
    submitted_at: Timestamp


class WorkItem(WireModel):
    work_item_id: Identifier
    mission_id: Identifier
    group_id: Identifier
    conversation_id: Identifier
    revision: SafeInteger
    state: WorkItemState
    exclusive: bool
    contract: WorkContract
    offers: list[Offer] | None = None
    owner: Owner | None = None
    selection_basis: SelectionBasis | None = None
    schedule_estimate: ScheduleEstimate | None = None
    progress: Progress | None = None
    submission: Submission | None = None
    created_by: Actor
    authorized_by: Actor | None = None
    created_at: Timestamp
    updated_at: Timestamp | None = None
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _state_requirements(self) -> Self:
        if self.state in OWNED_WORK_STATES:
            self._require("owner", "selection_basis", when=f"the WorkItem is {self.state}")
        if self.state in SUBMITTED_WORK_STATES:
            self._require("submission", when=f"the WorkItem is {self.state}")
        return self
