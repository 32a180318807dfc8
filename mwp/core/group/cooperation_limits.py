"""Organization cooperation policy: the limits of the runaway controls (spec 20).

A plain model, with no Group imports, so the Authority's context can carry it
(``AuthorityContext.cooperation_limits``). Each limit has a soft threshold, at which an accepted
transition also notifies the Coordinator, and a binding limit, past which the transition is
refused unless a Cooperation Override Grant names it (``runaway.py``, ``override_grant.py``).
The defaults are guardrails for runaway agents, not protocol ceilings: an Organization sets
its own, in the JSON form a Mission's workflow input carries (``to_json``, ``from_json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

CLAUSES: tuple[str, ...] = ("MWP-EXT-006",)

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
BUDGET_SOFT_PERCENT: Final = "budgetSoftPercent"  # the JSON member of budget_soft_percent

# Rates are counted in fixed windows of the Authority's clock: the count resets when a new
# window starts, so a Group keeps one counter per actor and rate, never a list of times.
RATE_WINDOW_SECONDS: Final = 60


class CooperationLimitsError(ValueError):
    """Organization policy whose limits cannot be used; ``member`` names the offending one."""

    def __init__(self, member: str, reason: str) -> None:
        self.member = member
        super().__init__(f"cooperation limits: {member}: {reason}")


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
    # None: no limit. Rates and the amount of work are the Organization's to set (a busy
    # Group posts thousands of Messages a minute); only runaway decomposition is limited by
    # default, far beyond what a planned graph needs.
    message_rate: Limit | None = None
    proposal_rate: Limit | None = None
    open_proposals: Limit | None = None
    active_work: Limit | None = None
    work_item_depth: Limit | None = field(default_factory=lambda: Limit(8, 16))
    duplicate_work: Limit | None = field(default_factory=lambda: Limit(10, 20))
    # Percent of a WorkItem's or the Mission's limit, in any dimension, from which a usage
    # record notifies. Off unless the Organization sets it: the agent runtime already reports
    # what a run has left, and a budget spent to the last unit is normal work.
    budget_soft_percent: int | None = None

    def __post_init__(self) -> None:
        if self.budget_soft_percent is not None and not 1 <= self.budget_soft_percent <= 100:
            raise ValueError("budget_soft_percent is a percentage of the limit")

    def of(self, policy: str) -> Limit | None:
        return {
            MESSAGE_RATE: self.message_rate,
            PROPOSAL_RATE: self.proposal_rate,
            OPEN_PROPOSALS: self.open_proposals,
            ACTIVE_WORK: self.active_work,
            WORK_ITEM_DEPTH: self.work_item_depth,
            DUPLICATE_WORK: self.duplicate_work,
        }[policy]

    def to_json(self) -> dict[str, Any]:
        """Every limit by its policy name (``null``: none); the budget share only when the
        Organization set it."""
        value: dict[str, Any] = {name: _limit_to_json(self.of(name)) for name in _FIELDS}
        if self.budget_soft_percent is not None:
            value[BUDGET_SOFT_PERCENT] = self.budget_soft_percent
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> CooperationLimits:
        """Organization policy as JSON; a limit left out keeps its default, ``null`` is none.

        Strict, so a misspelt policy never silently leaves its default in force."""
        if not isinstance(value, Mapping):
            raise CooperationLimitsError("(document)", "expected a JSON object")
        unknown = sorted(set(value) - set(_FIELDS) - {BUDGET_SOFT_PERCENT})
        if unknown:
            raise CooperationLimitsError(unknown[0], "not a cooperation limit")
        limits: dict[str, Any] = {
            _FIELDS[name]: _limit_from_json(name, value[name]) for name in _FIELDS if name in value
        }
        percent = value.get(BUDGET_SOFT_PERCENT)
        if percent is not None and (not _is_int(percent) or not 1 <= percent <= 100):
            raise CooperationLimitsError(BUDGET_SOFT_PERCENT, "a whole percentage, 1 to 100")
        return cls(**limits, budget_soft_percent=percent)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _limit_to_json(limit: Limit | None) -> dict[str, int] | None:
    return None if limit is None else {"soft": limit.soft, "binding": limit.binding}


def _limit_from_json(name: str, value: Any) -> Limit | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"soft", "binding"}:
        raise CooperationLimitsError(name, 'expected {"soft": N, "binding": N}')
    soft, binding = value["soft"], value["binding"]
    if not _is_int(soft) or not _is_int(binding):
        raise CooperationLimitsError(name, "soft and binding are whole numbers")
    if not 1 <= soft <= binding:
        raise CooperationLimitsError(
            name, f"the soft threshold ({soft}) must be from 1 to the binding limit ({binding})"
        )
    return Limit(soft, binding)


POLICY_NAMES: Final[frozenset[str]] = frozenset(
    {MESSAGE_RATE, PROPOSAL_RATE, OPEN_PROPOSALS, ACTIVE_WORK, WORK_ITEM_DEPTH, DUPLICATE_WORK}
)
# Each limit's field, by its policy name: the JSON form's members, in the order written.
_FIELDS: Final[dict[str, str]] = {
    MESSAGE_RATE: "message_rate",
    PROPOSAL_RATE: "proposal_rate",
    OPEN_PROPOSALS: "open_proposals",
    ACTIVE_WORK: "active_work",
    WORK_ITEM_DEPTH: "work_item_depth",
    DUPLICATE_WORK: "duplicate_work",
}
assert len(fields(CooperationLimits)) == len(POLICY_NAMES) + 1 and set(_FIELDS) == POLICY_NAMES
