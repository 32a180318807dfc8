"""The Mission: objective, definition of done, ownership, Coordinator, budget and approval."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import model_validator

from mwp.core.kinds import MissionState
from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    AcceptanceCriterion,
    Actor,
    Budget,
    Extensions,
    Identifier,
    NonEmptyList,
    PositiveInteger,
    SafeInteger,
    SemVer,
    Timestamp,
    UniqueList,
    text,
)


class CoordinatorAssignment(WireModel):
    agent_id: Identifier
    agent_card_version: PositiveInteger
    coordinator_epoch: PositiveInteger
    lease_id: Identifier


class ApprovalPolicy(WireModel):
    final_human_approval: bool
    high_risk_execution_approval: bool
    policy_version: SemVer | None = None


class ParentLink(WireModel):
    """Where a child Mission hangs in its parent: the parent WorkItem and nesting depth."""

    mission_id: Identifier
    work_item_id: Identifier
    depth: PositiveInteger


class PinnedProfile(WireModel):
    profile_uri: Identifier
    major_version: SafeInteger


class Mission(WireModel):
    mission_id: Identifier
    group_id: Identifier
    revision: SafeInteger
    objective: Annotated[str, text(1, 10000)]
    definition_of_done: NonEmptyList[AcceptanceCriterion]
    mission_owner: Actor
    coordinator: CoordinatorAssignment
    state: MissionState
    budget: Budget
    deadline: Timestamp
    approval_policy: ApprovalPolicy
    parent: ParentLink | None = None
    follow_up_to_mission_id: Identifier | None = None
    pinned_profiles: UniqueList[PinnedProfile] | None = None
    created_at: Timestamp
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _ownership(self) -> Self:
        # A top-level Mission belongs to a human and ends with human approval; a child
        # Mission belongs to the parent's Coordinator agent.
        if self.parent is None:
            if self.mission_owner.type != "human":
                raise ValueError("a top-level Mission must be owned by a human")
            if self.approval_policy.final_human_approval is not True:
                raise ValueError("a top-level Mission requires final human approval")
        elif self.mission_owner.type != "agent":
            raise ValueError("a child Mission must be owned by an agent")
        return self
