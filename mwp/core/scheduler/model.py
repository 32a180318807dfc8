"""What the Scheduler knows of one WorkItem: the contract terms that affect order and admission."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from mwp.core.scheduler.clock import seconds

Json = dict[str, Any]

# Used when a contract sets no wall-clock budget: a conservative duration for estimates.
DEFAULT_DURATION_SECONDS = 600


class Urgency(Enum):
    """A Coordinator's requested urgency. Its only effect is a bounded head start *inside its own
    Group* (aging): an item can be overtaken only by items enqueued less than the credit
    difference after it, so no urgency is unbounded strict priority."""

    ROUTINE = ("routine", 0)
    NORMAL = ("normal", 15 * 60)
    HIGH = ("high", 60 * 60)
    CRITICAL = ("critical", 4 * 60 * 60)

    def __init__(self, wire: str, credit_seconds: int) -> None:
        self.wire = wire
        self.credit_seconds = credit_seconds

    @classmethod
    def parse(cls, wire: str) -> Urgency:
        for member in cls:
            if member.wire == wire:
                return member
        raise ValueError(f"unknown urgency {wire!r}")


MAX_URGENCY_CREDIT = max(u.credit_seconds for u in Urgency)


class SideEffectRisk(Enum):
    NONE = "none"
    REVERSIBLE = "reversible"
    EXTERNAL = "external"
    HIGH_RISK = "high_risk"
    DESTRUCTIVE = "destructive"

    @property
    def rank(self) -> int:
        return list(SideEffectRisk).index(self)


class Phase(StrEnum):
    """Where an item stands *for this Worker* (the Group log stays authoritative)."""

    OFFERED = "offered"
    QUEUED = "queued"
    DISPATCHED = "dispatched"  # a slot is reserved; the shell is sending work.start
    ACTIVE = "active"
    BLOCKED = "blocked"
    SUBMITTED = "submitted"


# The Work Contract members ``Terms.from_contract`` reads: an inbox may pass on only these.
TERMS_MEMBERS = frozenset(
    {
        "contractVersion",
        "requestedUrgency",
        "deadline",
        "requiredCapabilities",
        "dependencyWorkItemIds",
        "budget",
        "sideEffectRisk",
        "executionApproval",
    }
)


@dataclass(frozen=True, slots=True)
class Terms:
    """The Work Contract members the Scheduler reads, parsed once."""

    contract_version: int
    urgency: Urgency
    deadline: int
    capabilities: tuple[tuple[str, str], ...]
    dependencies: frozenset[str]
    budget: Mapping[str, float]
    risk: SideEffectRisk
    gated: bool  # an execution approval must be granted before start

    @property
    def duration(self) -> int:
        limit = self.budget.get("wallClockSecondsLimit")
        return int(limit) if limit else DEFAULT_DURATION_SECONDS

    @classmethod
    def from_contract(cls, contract: Json) -> Terms:
        budget = {k: float(v) for k, v in contract["budget"].items() if k != "currency"}
        return cls(
            contract_version=int(contract["contractVersion"]),
            urgency=Urgency.parse(contract["requestedUrgency"]),
            deadline=seconds(contract["deadline"]),
            capabilities=tuple((c["id"], c["version"]) for c in contract["requiredCapabilities"]),
            dependencies=frozenset(contract["dependencyWorkItemIds"]),
            budget=budget,
            risk=SideEffectRisk(contract["sideEffectRisk"]),
            gated=contract["executionApproval"] != "not_required",
        )


@dataclass(slots=True)
class Offer:
    offer_id: str
    agent_card_version: int
    expires_at: int
    start_within: int
    selection_basis: Json


@dataclass(slots=True)
class Entry:
    """One WorkItem in a Group queue. ``accepted_at`` is its age for aging and never resets on
    checkpoint or preemption, so resumed work keeps its place."""

    work_item_id: str
    terms: Terms
    phase: Phase
    offer: Offer | None = None
    accepted_at: int = 0
    start_by: int | None = None
    ownership_epoch: int | None = None
    lease_id: str | None = None
    checkpoint_ref: str | None = None
    approved_version: int | None = None
    preemption_requested: bool = False
    disclosed: Json | None = None  # the schedule estimate the Group last recorded for it
    version: int = 0  # bumps on every re-key: stale heap entries are skipped

    @property
    def key(self) -> int:
        """Lower runs first: acceptance time minus the urgency's bounded credit."""
        return self.accepted_at - self.terms.urgency.credit_seconds
