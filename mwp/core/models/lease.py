"""Fenced leases: Coordinator, ownership, execution and blocked leases of a Group."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Identifier,
    PositiveInteger,
    SafeInteger,
    Timestamp,
    has_non_space,
    predicate,
)

LeaseType = Literal["coordinator", "ownership", "execution", "blocked"]
ClosureReason = Annotated[str, predicate(has_non_space, "closure reason", max_length=512)]


class Lease(WireModel):
    lease_id: Identifier
    lease_type: LeaseType
    mission_id: Identifier
    group_id: Identifier
    work_item_id: Identifier | None = None
    holder_agent_id: Identifier
    session_epoch: PositiveInteger
    coordinator_epoch: PositiveInteger | None = None
    ownership_epoch: PositiveInteger | None = None
    start_by: Timestamp | None = None
    issued_at: Timestamp
    starts_at: Timestamp
    expires_at: Timestamp
    grace_expires_at: Timestamp | None = None
    state: Literal["active", "expired", "revoked", "released"]
    renewal_count: SafeInteger
    last_renewed_at: Timestamp | None = None
    closed_at: Timestamp | None = None
    closure_reason: ClosureReason | None = None

    @model_validator(mode="after")
    def _lease_rules(self) -> Self:
        kind = self.lease_type
        if kind == "coordinator":
            self._require("coordinator_epoch", when="the lease is a Coordinator lease")
        else:
            self._require("work_item_id", "ownership_epoch", when=f"the lease is {kind}")
        if kind == "ownership":
            self._require("start_by", when="the lease is an ownership lease")
        if kind == "execution":
            # An execution lease is fenced by ownership alone and has no start or grace window.
            self._forbid(
                "coordinator_epoch",
                "start_by",
                "grace_expires_at",
                when="the lease is an execution lease",
            )
        if self.renewal_count >= 1:
            self._require("last_renewed_at", when="the lease has been renewed")
        else:
            self._forbid("last_renewed_at", when="the lease was never renewed")
        if self.state == "active":
            self._forbid("closed_at", "closure_reason", when="the lease is active")
        else:
            self._require("closed_at", "closure_reason", when=f"the lease is {self.state}")
        return self
