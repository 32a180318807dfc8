"""What a run consumes, counted by the runtime and charged to the budget ledger (spec 12).

A run counts, per dimension under the budget's names: one ``toolCallLimit`` for each tool call
it actually executes (a call the tool ledger answers because it already ran is not charged
again), what a tool declares (``ctx.tool(..., spend=ResourceUsage(...))`` before the call, a
tool returning :class:`Spent` after it), and its wall-clock seconds (whole seconds, rounded
up, per run). :class:`RunUsage` keeps what is not yet recorded and what the WorkItem has left
(the WorkItem view's ``resourceUsage.remaining``, else its contract budget), so a call whose
cost would pass that is never run (MWP-AUT-004).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.allocation import DIMENSIONS, allocation, figures
from mwp.core.group.resource_usage import FINANCIAL, ResourceUsage
from mwp.core.organization.performance import BUDGET_EXHAUSTED

CLAUSES: tuple[str, ...] = ("MWP-AUT-004",)

Json = dict[str, Any]
WALL_CLOCK = "wallClockSecondsLimit"


@dataclass(frozen=True, slots=True)
class Spent:
    """What a tool returns to declare what it consumed: ``result`` (JSON) is its result, the
    one the tool ledger records; ``usage`` is charged once, by the run that executed it."""

    result: Any
    usage: ResourceUsage


@dataclass(frozen=True, slots=True)
class Overrun:
    """The dimension a cost would pass: what it needs and what is left."""

    dimension: str
    needed: Decimal
    left: Decimal


class RunUsage:
    """One run's consumption not yet recorded, and what the WorkItem has left."""

    def __init__(self, view: Json, started: float) -> None:
        usage = view.get("resourceUsage") or {}
        budget = view["contract"].get("budget", {})
        self.left = allocation(usage.get("remaining", budget))
        self.currency: str | None = usage.get("remaining", {}).get("currency") or budget.get(
            "currency"
        )
        self.pending = dict.fromkeys(DIMENSIONS, Decimal(0))
        self.started = started
        self.wall_cap: int | None = None  # the run's own wall-clock deadline, when it has one
        self.wall_recorded = 0
        self.ledger = True  # False once the Group refuses the kind (rules before the ledger)

    def add(self, usage: ResourceUsage, sign: int = 1) -> None:
        """Count ``usage`` (``sign=-1``: take back a reservation that was not spent)."""
        doc = usage.delta()
        self.check(doc)
        self.currency = doc.get("currency") or self.currency
        for dimension, spent in allocation(doc).items():
            self.pending[dimension] += sign * spent

    def check(self, doc: Json) -> None:
        """A financial amount needs its currency, the one the budget or earlier usage names:
        refused before anything runs, as the Group would refuse its record."""
        if FINANCIAL not in doc:
            return
        currency = doc.get("currency")
        if currency is None or (self.currency is not None and currency != self.currency):
            raise MwpError(
                ErrorCode.INVALID_COMMAND,
                f"a financial amount needs the budget's currency ({self.currency or 'any'})",
                details={"member": "spend.currency", "expected": self.currency},
            )

    def overrun(self, cost: ResourceUsage) -> Overrun | None:
        """The first dimension where what is pending plus ``cost`` passes what is left."""
        doc = cost.delta()
        self.check(doc)
        for dimension, spent in allocation(doc).items():
            needed = self.pending[dimension] + spent
            if dimension in self.left and needed > self.left[dimension]:
                return Overrun(dimension, needed, self.left[dimension])
        return None

    def due(self, now: float) -> Json | None:
        """The delta to record at ``now`` (None: nothing), the wall clock included."""
        seconds = math.ceil(max(0.0, now - self.started))
        if self.wall_cap is not None:  # a run stopped at its deadline: not its stopping latency
            seconds = min(seconds, self.wall_cap)
        amounts = dict(self.pending)
        amounts[WALL_CLOCK] += max(0, seconds - self.wall_recorded)
        nonzero = {d: v for d, v in amounts.items() if v}
        return figures(nonzero, self.currency) if nonzero else None

    def recorded(self, delta: Json) -> None:
        """The run's own record of ``delta`` was accepted."""
        for dimension, spent in allocation(delta).items():
            taken = min(spent, self.pending[dimension])
            self.pending[dimension] -= taken
            if dimension == WALL_CLOCK:  # the rest is the run's own clock
                self.wall_recorded += int(spent - taken)

    def learned(self, payload: Json) -> None:
        """A recorded Event's payload (this run's or the capability's record): what is left."""
        remaining = payload.get("remaining", {})
        self.left = allocation(remaining)
        self.currency = remaining.get("currency") or self.currency


def exhausted(dimension: str, detail: str) -> str:
    """The ``requiredResolution`` of work paused because its budget is exhausted."""
    # Worded as the performance records recognize it (``budget_exceeded``).
    return (
        f"{BUDGET_EXHAUSTED}: {dimension} ({detail}); the Coordinator must raise the budget "
        "or settle the WorkItem"
    )


__all__ = ["Overrun", "RunUsage", "Spent", "exhausted"]
