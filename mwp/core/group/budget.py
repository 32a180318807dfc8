"""The Mission budget ledger of allocations: budgets narrow downward (invariant 11, spec 12).

Every WorkItem that is not cancelled holds its contract budget against the Mission's limits,
dimension by dimension; a dimension the Mission does not limit is not limited. One dimension
over its limit refuses the whole transition as ``BUDGET_EXCEEDED``. Amounts are summed as
decimals of their JSON text so 0.1 + 0.2 is exactly 0.3.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from mwp.core.errors import ErrorCode
from mwp.core.group.allocation import DIMENSIONS, allocation, amount
from mwp.core.group.rejection import invalid, reject
from mwp.core.group.state import GroupState

CLAUSES: tuple[str, ...] = ("MWP-AUT-004",)


def book(state: GroupState, budget: dict[str, Any], sign: int) -> None:
    for dimension, share in allocation(budget).items():
        state.allocated[dimension] = state.allocated.get(dimension, Decimal(0)) + sign * share


def check_allocation(state: GroupState, budget: dict[str, Any], work_item_id: str) -> None:
    mission = state.mission
    assert mission is not None
    limits = mission.budget
    if (
        "financialLimit" in budget
        and "financialLimit" in limits
        and budget.get("currency") != limits.get("currency")
    ):
        invalid("the WorkItem budget's currency differs from the Mission's")
    item = state.work_items.get(work_item_id)
    held = allocation(item.contract["budget"]) if item and item.state != "cancelled" else {}
    for dimension in DIMENSIONS:
        if dimension not in limits or dimension not in budget:
            continue
        limit, requested = amount(limits[dimension]), amount(budget[dimension])
        current = state.allocated.get(dimension, Decimal(0)) - held.get(dimension, Decimal(0))
        if current + requested > limit:
            reject(
                ErrorCode.BUDGET_EXCEEDED,
                f"allocating {dimension} would exceed the Mission budget",
                dimension=dimension,
                limit=str(limit),
                allocated=str(current),
                requested=str(requested),
            )


# --- the ledger of consumption (recorded by resource_usage.py) ------------------------------------


def ancestry(state: GroupState, work_item_id: str) -> list[str]:
    """The WorkItem and its parent WorkItems (spec 9.1 links), nearest first."""
    chain: list[str] = []
    current: str | None = work_item_id
    while current is not None and current not in chain:
        chain.append(current)
        record = state.item_record(current)
        current = record.parent_work_item_id if record is not None else None
    return chain


def left(limits: dict[str, Any], usage: dict[str, Any]) -> dict[str, Decimal]:
    """What ``limits`` leave after ``usage``, in each dimension they limit."""
    spent = allocation(usage)
    return {d: amount(limits[d]) - spent.get(d, Decimal(0)) for d in DIMENSIONS if d in limits}


def least(*remainders: dict[str, Decimal]) -> dict[str, Decimal]:
    """Per dimension, the smallest of the remainders that limit it."""
    out: dict[str, Decimal] = {}
    for remainder in remainders:
        for dimension, value in remainder.items():
            out[dimension] = min(value, out.get(dimension, value))
    return {d: out[d] for d in DIMENSIONS if d in out}


def item_remaining(state: GroupState, work_item_id: str) -> dict[str, Decimal]:
    """What the WorkItem may still consume: the least of what its contract, each ancestor's
    and the Mission's limits leave (a capability token is capped by it, spec 12)."""
    mission = state.mission
    assert mission is not None
    return least(
        *(
            left(state.item_budget(i), state.usage.get(i, {}))
            for i in ancestry(state, work_item_id)
        ),
        left(mission.budget, state.mission_usage),
        allocation(state.parent_remaining),  # a child Mission: what its parent Group left
    )
