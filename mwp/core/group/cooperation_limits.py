"""Organization cooperation policy: the limits of the runaway controls (spec 20).

A plain model, with no Group imports, so the Authority's context can carry it
(``AuthorityContext.cooperation_limits``). Each limit has a soft threshold, at which an accepted
transition also notifies the Coordinator, and a binding limit, past which the transition is
refused unless a Cooperation Override Grant names it (``runaway.py``, ``override_grant.py``).
The defaults are guardrails for runaway agents, not protocol ceilings: an Organization sets
its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Final

# The policy names an exceeded limit and a grant's ``policyName`` use.
MESSAGE_RATE: Final = "messageRate"  # Messages one actor posts per rate window
PROPOSAL_RATE: Final = "proposalRate"  # Work Proposals one actor makes per rate window
OPEN_PROPOSALS: Final = "openProposals"  # one actor's proposals still awaiting a decision
ACTIVE_WORK: Final = "activeWork"  # the Group's queued and active WorkItems
WORK_ITEM_DEPTH: Final = "workItemDepth"  # decomposition depth through parent links
DUPLICATE_WORK: Final = "duplicateWork"  # the same goal among siblings or ancestors
# Budgets notify at a share of a limit; they bind through the ledger (``BUDGET_EXCEEDED``),
# which no grant lifts, so ``budget`` is not a policy a grant may name.
BUDGET: Final = "budget"

# Rates are counted in fixed windows of the Authority's clock: the count resets when a new
# window starts, so a Group keeps one counter per actor and rate, never a list of times.
RATE_WINDOW_SECONDS: Final = 60


@dataclass(frozen=True, slots=True)
class Limit:
    """``soft``: from this count on the transition notifies; ``binding``: the most allowed."""

    soft: int
    binding: int

    def __post_init__(self) -> None:
        if not 1 <= self.soft <= self.binding:
            raise ValueError("a limit needs 1 <= soft <= binding")


@dataclass(frozen=True, slots=True)
class CooperationLimits:
    message_rate: Limit = field(default_factory=lambda: Limit(60, 120))
    proposal_rate: Limit = field(default_factory=lambda: Limit(20, 40))
    open_proposals: Limit = field(default_factory=lambda: Limit(25, 50))
    active_work: Limit = field(default_factory=lambda: Limit(100, 200))
    work_item_depth: Limit = field(default_factory=lambda: Limit(8, 16))
    duplicate_work: Limit = field(default_factory=lambda: Limit(10, 20))
    # Percent of a WorkItem's or the Mission's limit, in any dimension, from which a usage
    # record notifies. Off unless the Organization sets it: the agent runtime already reports
    # what a run has left, and a budget spent to the last unit is normal work.
    budget_soft_percent: int | None = None

    def __post_init__(self) -> None:
        if self.budget_soft_percent is not None and not 1 <= self.budget_soft_percent <= 100:
            raise ValueError("budget_soft_percent is a percentage of the limit")

    def of(self, policy: str) -> Limit:
        return {
            MESSAGE_RATE: self.message_rate,
            PROPOSAL_RATE: self.proposal_rate,
            OPEN_PROPOSALS: self.open_proposals,
            ACTIVE_WORK: self.active_work,
            WORK_ITEM_DEPTH: self.work_item_depth,
            DUPLICATE_WORK: self.duplicate_work,
        }[policy]


POLICY_NAMES: Final[frozenset[str]] = frozenset(
    {MESSAGE_RATE, PROPOSAL_RATE, OPEN_PROPOSALS, ACTIVE_WORK, WORK_ITEM_DEPTH, DUPLICATE_WORK}
)
assert len(fields(CooperationLimits)) == len(POLICY_NAMES) + 1
