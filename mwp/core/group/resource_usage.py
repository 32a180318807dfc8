"""The budget ledger of consumption (spec 12, 11.5; MWP-AUT-004, MWP-AUT-005).

``ext.missionweaveprotocol.core.resource_usage_record``, signed by the owner of an ``active``
WorkItem under its current Ownership Epoch and Execution Lease, records a nonzero delta over
the six budget dimensions, named as the budget names them (``financialLimit`` with its
``currency``, ``modelTokenLimit``, ``toolCallLimit``, ``computeSecondsLimit``,
``wallClockSecondsLimit``, ``externalSideEffectLimit``). Its Event ``..._recorded`` carries
the delta, the WorkItem's cumulative usage and what it may still consume, and the same
figures for every parent WorkItem and the Mission: one Event charges the whole ancestry, so
the charge is atomic. A dimension that would pass the contract budget of the WorkItem or of
any ancestor, or the Mission's limit, refuses the whole Command as ``BUDGET_EXCEEDED``.
Amounts add as decimals of their JSON text (0.1 + 0.2 is exactly 0.3).

A child Mission's limits are a subset of its parent WorkItem's contract budget
(``child_mission.py``). Before rules ``RULES_CHILD_USAGE`` it charges its own Group only; from
them on its usage is charged to the parent Group as well, in the same decision
(``child_usage.py``): the parent's Event names the child in its ``childMission`` member.

Groups deciding under rules older than ``RULES_LEDGER`` refuse the kind as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from mwp.core.errors import ErrorCode
from mwp.core.group.allocation import DIMENSIONS, allocation, amount, figures, number
from mwp.core.group.api import RULES_LEDGER, AuthorityContext
from mwp.core.group.budget import ancestry, least, left
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.ownership import require_lease, require_owner
from mwp.core.group.payload import members
from mwp.core.group.rejection import bad_transition, invalid, reject
from mwp.core.group.roles import working_agent
from mwp.core.group.rules import CommandRule, work_item_target
from mwp.core.group.state import GroupState, WorkItem
from mwp.core.group.work_item_state import active_mission, get_item, touch
from mwp.core.wire.values import MAX_SAFE_INTEGER

Json = dict[str, Any]

RECORD_KIND: Final = "ext.missionweaveprotocol.core.resource_usage_record"
RECORDED_KIND: Final = "ext.missionweaveprotocol.core.resource_usage_recorded"
DELTA_MEMBER: Final = "delta"
CHILD_MEMBER: Final = "childMission"
PARENT_MEMBER: Final = "parentCharge"
FINANCIAL: Final = "financialLimit"
_CURRENCY = re.compile(r"[A-Z]{3}")

CLAUSES: tuple[str, ...] = ("MWP-AUT-004", "MWP-AUT-005")


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """A usage delta as a client or capability states it; :meth:`delta` is the payload's."""

    financial: Decimal | int | float = 0
    currency: str | None = None
    model_tokens: int = 0
    tool_calls: int = 0
    compute_seconds: int = 0
    wall_clock_seconds: int = 0
    external_side_effects: int = 0

    def delta(self) -> Json:
        """The nonzero dimensions under their budget names."""
        values = (
            self.financial,
            self.model_tokens,
            self.tool_calls,
            self.compute_seconds,
            self.wall_clock_seconds,
            self.external_side_effects,
        )
        doc: Json = {d: v for d, v in zip(DIMENSIONS, values, strict=True) if v}
        if FINANCIAL in doc:
            doc[FINANCIAL] = number(amount(doc[FINANCIAL]))
            if self.currency is not None:
                doc["currency"] = self.currency
        return doc


# --- reading the delta ---------------------------------------------------------------------------


def _bad(dimension: str, reason: str) -> None:
    invalid(
        f"payload.{DELTA_MEMBER}.{dimension}: {reason}",
        member=f"payload.{DELTA_MEMBER}.{dimension}",
        reason=reason,
    )


def _amounts(raw: Json) -> dict[str, Decimal]:
    amounts: dict[str, Decimal] = {}
    for dimension in DIMENSIONS:
        if dimension not in raw:
            continue
        value = raw[dimension]
        if dimension == FINANCIAL:
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                _bad(dimension, "must be a non-negative number")
        elif type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
            _bad(dimension, "must be a non-negative safe integer")
        amounts[dimension] = amount(value)
    return amounts


def _delta(cmd: Incoming) -> tuple[Json, dict[str, Decimal], str | None]:
    """The delta as sent, its amounts, and the currency of its financial amount."""
    return read_delta(cmd.payload.obj(DELTA_MEMBER))


def read_delta(raw: Json) -> tuple[Json, dict[str, Decimal], str | None]:
    """``raw`` (a payload's ``delta``), its amounts, and the currency of its financial
    amount; a zero, mistyped or currency-less delta is refused as ``INVALID_COMMAND``."""
    amounts = _amounts(raw)
    if not any(amounts.values()):
        invalid("a usage record needs a nonzero delta", member=f"payload.{DELTA_MEMBER}")
    currency = raw.get("currency")
    if FINANCIAL in amounts and not (isinstance(currency, str) and _CURRENCY.fullmatch(currency)):
        _bad("currency", "a financial amount needs its ISO 4217 currency code")
    if FINANCIAL not in amounts and "currency" in raw:
        _bad("currency", "names the currency of a financial amount, and there is none")
    return raw, amounts, currency


# --- charging one level of the ancestry ----------------------------------------------------------


def _charged(
    usage: Json, limits: Json, delta: dict[str, Decimal], currency: str | None, **where: str
) -> dict[str, Decimal]:
    """``usage`` plus ``delta``, refused when one dimension would pass ``limits``."""
    if currency is not None:
        for stated in (
            limits.get("currency") if FINANCIAL in limits else None,
            usage.get("currency"),
        ):
            if stated is not None and stated != currency:
                invalid(
                    "the usage's currency differs from the budget's",
                    member=f"payload.{DELTA_MEMBER}.currency",
                    expected=stated,
                    **where,
                )
    cumulative = allocation(usage)
    for dimension, spent in delta.items():
        total = cumulative.get(dimension, Decimal(0)) + spent
        if dimension in limits and total > amount(limits[dimension]):
            reject(
                ErrorCode.BUDGET_EXCEEDED,
                f"recording this usage would exceed the {dimension} budget",
                dimension=dimension,
                limit=str(amount(limits[dimension])),
                used=str(cumulative.get(dimension, Decimal(0))),
                requested=str(spent),
                **where,
            )
        cumulative[dimension] = total
    return cumulative


def _money(currency: str | None, usage: Json, limits: Json) -> str | None:
    """The currency a level's financial figures are in."""
    stated = limits.get("currency") if FINANCIAL in limits else None
    return currency or usage.get("currency") or stated


def _line(
    usage: Json, limits: Json, delta: dict[str, Decimal], currency: str | None, **where: str
) -> tuple[Json, dict[str, Decimal]]:
    """One level charged: its figures for the Event, and what it has left."""
    cumulative = _charged(usage, limits, delta, currency, **where)
    remaining = left(limits, cumulative)
    money = _money(currency, usage, limits)
    return {
        "cumulative": figures(cumulative, money),
        "remaining": figures(remaining, money),
    }, remaining


def charge_work_item(usage: Json, budget: Json, raw_delta: Json) -> Json:
    """One WorkItem's ``cumulative`` and ``remaining`` after ``raw_delta``, refused as the
    Group refuses it: for a Group that knows only the item (the agent SDK's local runner)."""
    _, delta, currency = read_delta(raw_delta)
    line, _ = _line(usage, budget, delta, currency)
    return line


def _decide_record(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state != "active":
        bad_transition("WorkItem", item.state, cmd.kind)
    owner = require_owner(item, cmd)
    lease = require_lease(item, cmd, ctx)
    draft_usage(
        state,
        item,
        cmd.payload.obj(DELTA_MEMBER),
        drafts,
        ownership_epoch=owner.epoch,
        lease_id=lease.lease_id,
        session_epoch=lease.session_epoch,
    )


def draft_usage(
    state: GroupState,
    item: WorkItem,
    raw_delta: Json,
    drafts: Drafts,
    *,
    ownership_epoch: int | None = None,
    lease_id: str | None = None,
    session_epoch: int | None = None,
    reconciliation: Json | None = None,
    child: Json | None = None,
) -> None:
    """Draft the ``..._recorded`` Event charging ``raw_delta`` to the item and its whole
    ancestry, or refuse it (``BUDGET_EXCEEDED``, ``INVALID_COMMAND``) with nothing drafted.
    ``reconciliation`` names the Session (and offline window) that reported usage spent
    under an earlier one (offline_execution.py); ``child`` the child Mission whose usage
    this charges, where no owner or lease of this Group spent it (child_usage.py)."""
    mission = state.mission
    assert mission is not None
    raw, delta, currency = read_delta(raw_delta)
    # The WorkItem first, then each parent, then the Mission: every level is charged or none.
    own, *parents = [
        (i, *_line(state.usage.get(i, {}), state.item_budget(i), delta, currency, workItemId=i))
        for i in ancestry(state, item.work_item_id)
    ]
    top, top_left = _line(
        state.mission_usage, mission.budget, delta, currency, missionId=mission.mission_id
    )
    money = _money(currency, state.usage.get(item.work_item_id, {}), item.contract["budget"])
    money = money or _money(None, state.mission_usage, mission.budget)
    payload: Json = (
        {}
        if child is not None
        else {
            "ownershipEpoch": ownership_epoch,
            "leaseId": lease_id,
            "sessionEpoch": session_epoch,
        }
    )
    payload |= {
        DELTA_MEMBER: dict(raw),
        "cumulative": own[1]["cumulative"],
        # What the WorkItem may still consume, its ancestry's limits included.
        "remaining": figures(
            least(own[2], *(p[2] for p in parents), top_left, allocation(state.parent_remaining)),
            money,
        ),
        "ancestry": [{"workItemId": i, **line} for i, line, _ in parents],
        "mission": {"missionId": mission.mission_id, **top},
    }
    if reconciliation is not None:
        payload["reconciliation"] = reconciliation
    if child is not None:
        payload[CHILD_MEMBER] = child
    drafts.add(
        RECORDED_KIND, ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
    )


def _evolve_recorded(state: GroupState, event: Json) -> None:
    item = state.work_items[event["workItemId"]]
    touch(item, event)
    payload = event["payload"]
    state.usage[item.work_item_id] = payload["cumulative"]
    for line in payload["ancestry"]:
        state.usage[line["workItemId"]] = line["cumulative"]
    state.mission_usage = payload["mission"]["cumulative"]
    child = payload.get(CHILD_MEMBER)
    if child is not None:  # the last charge of each child, for its retry (child_usage.py)
        state.child_charges[child["missionId"]] = {
            "chargeId": child["chargeId"],
            "eventId": event["eventId"],
            "sequence": event["sequence"],
            "remaining": payload["remaining"],
        }
    parent = payload.get(PARENT_MEMBER)
    if parent is not None:  # what the parent Group left, as of its last charge
        state.parent_remaining = parent["remaining"]


RULES = (
    CommandRule(
        RECORD_KIND,
        _decide_record,
        working_agent,
        target=work_item_target,
        payload=members(
            "ownershipEpoch", "leaseId", **{DELTA_MEMBER: members(*DIMENSIONS, "currency")}
        ),
        clauses=CLAUSES,
        since_rules=RULES_LEDGER,
    ),
)

EVOLVERS = {RECORDED_KIND: _evolve_recorded}
