"""What a budget allocates, dimension by dimension, summed as decimals of the JSON text (so
0.1 + 0.2 is exactly 0.3). The ledger's checks are in :mod:`mwp.core.group.budget`."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

DIMENSIONS = (
    "financialLimit",
    "modelTokenLimit",
    "toolCallLimit",
    "computeSecondsLimit",
    "wallClockSecondsLimit",
    "externalSideEffectLimit",
)


def amount(value: Any) -> Decimal:
    return Decimal(str(value))


def allocation(budget: dict[str, Any]) -> dict[str, Decimal]:
    return {d: amount(budget[d]) for d in DIMENSIONS if d in budget}


def total(budgets: Iterable[dict[str, Any]]) -> dict[str, Decimal]:
    """What ``budgets`` allocate together, per dimension (the ledger rebuilt after a restore;
    evolvers keep it current incrementally)."""
    totals = dict.fromkeys(DIMENSIONS, Decimal(0))
    for budget in budgets:
        for dimension, amount in allocation(budget).items():
            totals[dimension] += amount
    return totals


def number(value: Decimal) -> int | float:
    """A JSON number of ``value``: an integer when it is whole."""
    return int(value) if value == value.to_integral_value() else float(value)


def figures(amounts: dict[str, Decimal], currency: str | None = None) -> dict[str, Any]:
    """Amounts as a budget-shaped JSON object (the currency named with a financial amount)."""
    doc: dict[str, Any] = {d: number(amounts[d]) for d in DIMENSIONS if d in amounts}
    if "financialLimit" in doc and currency is not None:
        doc = {"currency": currency, **doc}
    return doc
