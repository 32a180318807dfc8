"""Group Membership: role, scopes, visibility start and delegated work authority."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    AgentActor,
    CapabilityRef,
    CurrencyCode,
    Extensions,
    Identifier,
    NonEmptyUniqueList,
    NonNegativeNumber,
    PositiveInteger,
    SafeInteger,
    Scope,
    Timestamp,
    UniqueList,
)

Role = Literal["mission_owner", "coordinator", "worker", "reviewer", "observer", "work_delegate"]


class DelegationBudget(WireModel):
    """A delegated budget states every limit, so the grant is bounded in every dimension."""

    currency: CurrencyCode
    financial_limit: NonNegativeNumber
    model_token_limit: SafeInteger
    tool_call_limit: SafeInteger
    compute_seconds_limit: SafeInteger
    wall_clock_seconds_limit: SafeInteger
    external_side_effect_limit: SafeInteger


class DelegationGrant(WireModel):
    grant_id: Identifier
    grantee_agent_id: Identifier
    mission_id: Identifier
    group_id: Identifier
    target_work_item_id: Identifier
    allowed_capabilities: NonEmptyUniqueList[CapabilityRef]
    budget: DelegationBudget
    max_descendant_depth: SafeInteger
    grantee_membership_epoch: PositiveInteger
    coordinator_epoch: PositiveInteger
    granted_by: AgentActor
    granted_at: Timestamp
    expires_at: Timestamp


class Membership(WireModel):
    membership_id: Identifier
    mission_id: Identifier
    group_id: Identifier
    member: Actor
    role: Role
    state: Literal["provisional", "active", "ended"]
    membership_epoch: PositiveInteger
    scopes: NonEmptyUniqueList[Scope]
    delegation_grants: UniqueList[DelegationGrant] | None = None
    visibility_start_sequence: SafeInteger
    context_package_id: Identifier | None = None
    provisional_expires_at: Timestamp | None = None
    granted_at: Timestamp
    activated_at: Timestamp | None = None
    ended_at: Timestamp | None = None
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _state_timestamps(self) -> Self:
        # A provisional member joins through a Context Package and expires unless activated.
        if self.state == "provisional":
            self._require(
                "provisional_expires_at",
                "context_package_id",
                when="the Membership is provisional",
            )
        elif self.state == "active":
            self._require("activated_at", when="the Membership is active")
        else:
            self._require("ended_at", when="the Membership has ended")
        return self
