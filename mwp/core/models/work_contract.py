"""The Work Contract: the machine-readable terms a WorkItem is executed and judged by."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    AcceptanceCriterion,
    Budget,
    CapabilityRef,
    CriterionId,
    Duration,
    Extensions,
    FailureCode,
    Identifier,
    JsonObject,
    MediaType,
    NonEmptyList,
    PositiveInteger,
    ResourceGrant,
    Sha256,
    Timestamp,
    UniqueList,
    Uri,
    text,
)


class Deliverable(WireModel):
    deliverable_id: CriterionId
    description: Annotated[str, text(1, 4000)]
    media_type: MediaType
    schema_uri: Uri = Field(alias="schema")


class RetryPolicy(WireModel):
    max_attempts: PositiveInteger
    backoff: Literal["none", "fixed", "exponential"]
    max_delay: Duration
    retryable_failures: UniqueList[FailureCode]


class WorkContract(WireModel):
    contract_version: PositiveInteger
    goal: Annotated[str, text(1, 10000)]
    required_deliverables: NonEmptyList[Deliverable]
    acceptance_criteria: NonEmptyList[AcceptanceCriterion]
    input_artifacts: UniqueList[Sha256]
    dependency_work_item_ids: UniqueList[Identifier]
    allowed_resources: list[ResourceGrant]
    required_capabilities: NonEmptyList[CapabilityRef]
    deadline: Timestamp
    requested_urgency: Literal["routine", "normal", "high", "critical"]
    business_impact: Annotated[str, text(1, 4000)]
    retry_policy: RetryPolicy
    budget: Budget
    side_effect_risk: Literal["none", "reversible", "external", "high_risk", "destructive"]
    execution_approval: Literal["not_required", "policy_required", "human_required"]
    constraints: JsonObject | None = None
    extensions: Extensions | None = None
