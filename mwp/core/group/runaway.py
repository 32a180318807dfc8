"""Runaway controls (spec 20, MWP-EXT-006, MWP-EXT-007): cooperation limits at the Authority.

From rules ``RULES_OVERSIGHT`` on, the Authority step measures, for the Command it is about to
accept, each limit of Organization policy the Command's kind moves
(``cooperation_limits.py``): the count the Group would hold once the Command is accepted.

* At or past the soft threshold the transition is accepted and notifies the Coordinator: the
  Events of the Command start with one ``cooperation_threshold_reached`` (an
  ``ext.missionweaveprotocol.core`` kind) per such limit, naming the policy, the count, both
  thresholds and the current Coordinator, so the escalation is auditable in the Group log and
  the Policy Log.
* Past the binding limit the Command is refused (``RATE_LIMITED``, the code for a policy rate
  or recursion threshold, with ``details.policy``) and nothing changes, unless it cites a
  Cooperation Override Grant for exactly that policy (``override_grant.py``). Limits only ever
  refuse new transitions: accepted work is never discarded.

Cyclic delegation and Mission ancestry are refused outright elsewhere (``delegation.py``,
``dependencies.py``, ``child_mission.py``); here a WorkItem that repeats the goal of one of its
ancestors counts as circular decomposition, one that repeats a live sibling's as duplicate.
Budgets notify when a usage record brings a WorkItem's or the Mission's use of a dimension to
a share of its limit (``budget``, in percent) and bind through the ledger
(``resource_usage.py``, ``BUDGET_EXCEEDED``), which no grant lifts.

Unresolved clarification rounds: the core defines no clarification Command (a profile may,
spec 15), so the rounds counted are an actor's open Work Proposals, each awaiting the
Coordinator's decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.allocation import allocation
from mwp.core.group.budget import ancestry
from mwp.core.group.clock import instant
from mwp.core.group.cooperation_limits import (
    ACTIVE_WORK,
    BUDGET,
    DUPLICATE_WORK,
    MESSAGE_RATE,
    OPEN_PROPOSALS,
    PROPOSAL_RATE,
    RATE_WINDOW_SECONDS,
    WORK_ITEM_DEPTH,
    CooperationLimits,
)
from mwp.core.group.drafts import EventDraft
from mwp.core.group.incoming import Incoming
from mwp.core.group.rejection import reject
from mwp.core.group.resource_usage import DELTA_MEMBER, RECORD_KIND, read_delta
from mwp.core.group.rules import CommandRule
from mwp.core.group.state import GroupState

CLAUSES: tuple[str, ...] = ("MWP-EXT-006", "MWP-EXT-007")

Json = dict[str, Any]

THRESHOLD_KIND: Final = "ext.missionweaveprotocol.core.cooperation_threshold_reached"

# The Events whose count a rate limit reads, by the policy counting them.
_RATED_EVENTS: Final = {"message.posted": MESSAGE_RATE, "work.proposed": PROPOSAL_RATE}


@dataclass(frozen=True, slots=True)
class Measure:
    policy: str
    observed: int  # the count once the Command is accepted
    soft: int
    binding: int

    @property
    def notifies(self) -> bool:
        return self.observed >= self.soft

    @property
    def exceeded(self) -> bool:
        return self.observed > self.binding


@dataclass(frozen=True, slots=True)
class Assessment:
    measures: tuple[Measure, ...]

    @property
    def exceeded(self) -> frozenset[str]:
        return frozenset(m.policy for m in self.measures if m.exceeded)

    @property
    def notices(self) -> tuple[Measure, ...]:
        return tuple(m for m in self.measures if m.notifies)


NOTHING = Assessment(())


def assess(state: GroupState, cmd: Incoming, limits: CooperationLimits, now: str) -> Assessment:
    """What the Command would bring each limit its kind moves to. Reads the payload
    defensively: the kind's own rule refuses a malformed one."""
    found: list[tuple[str, int]] = []
    if cmd.kind == "message.post":
        found.append((MESSAGE_RATE, rate(state, MESSAGE_RATE, cmd.actor_id, now) + 1))
    elif cmd.kind == "work.propose":
        found.append((PROPOSAL_RATE, rate(state, PROPOSAL_RATE, cmd.actor_id, now) + 1))
        open_rounds = sum(p.proposed_by.get("id") == cmd.actor_id for p in state.proposals.values())
        found.append((OPEN_PROPOSALS, open_rounds + 1))
    elif cmd.kind == "work.accept_offer":
        busy = sum(item.state in ("queued", "active") for item in state.work_items.values())
        found.append((ACTIVE_WORK, busy + 1))
    elif cmd.kind == "work.authorize":
        found.extend(_decomposition(state, cmd.payload.data))
    measures = []
    for policy, observed in found:
        limit = limits.of(policy)
        if limit is not None:  # the Organization limits it
            measures.append(Measure(policy, observed, limit.soft, limit.binding))
    if cmd.kind == RECORD_KIND and limits.budget_soft_percent is not None:
        share = _budget_share(state, cmd)
        if share is not None:
            measures.append(Measure(BUDGET, share, limits.budget_soft_percent, 100))
    return Assessment(tuple(measures))


def _budget_share(state: GroupState, cmd: Incoming) -> int | None:
    """The largest percent of a limit (the WorkItem's or the Mission's, in any dimension) the
    record's usage would reach; None for a record the ledger will refuse anyway."""
    item = state.work_items.get(cmd.work_item_id or "")
    delta = cmd.payload.data.get(DELTA_MEMBER)
    if item is None or state.mission is None or not isinstance(delta, dict):
        return None
    try:
        _, amounts, _ = read_delta(delta)
    except MwpError:
        return None
    levels = (
        (state.usage.get(item.work_item_id, {}), item.contract["budget"]),
        (state.mission_usage, state.mission.budget),
    )
    share = 0
    for usage, budget in levels:
        used, limits = allocation(usage), allocation(budget)
        for dimension, spent in amounts.items():
            limit = limits.get(dimension)
            if limit:
                total = used.get(dimension, Decimal(0)) + spent
                share = max(share, math.floor(total * 100 / limit))
    return share


def _decomposition(state: GroupState, payload: Mapping[str, Any]) -> list[tuple[str, int]]:
    parent = payload.get("parentWorkItemId")
    parent_id = parent if isinstance(parent, str) and state.has_item(parent) else None
    lineage = ancestry(state, parent_id) if parent_id is not None else []
    contract = payload.get("contract")
    goal = contract.get("goal") if isinstance(contract, Mapping) else None
    found = [(WORK_ITEM_DEPTH, len(lineage) + 1)] if parent_id is not None else []
    if isinstance(goal, str):
        siblings = sum(
            item.parent_work_item_id == parent_id and item.contract.get("goal") == goal
            for item in state.work_items.values()
        )
        ancestors = sum(
            item.contract.get("goal") == goal
            for item in (state.work_items.get(a) for a in lineage)
            if item is not None
        )
        found.append((DUPLICATE_WORK, siblings + ancestors + 1))
    return found


def enforce(assessment: Assessment, granted_policy: str | None) -> None:
    """Refuse the Command past a binding limit, unless its grant names that limit."""
    for measure in assessment.measures:
        if measure.exceeded and measure.policy != granted_policy:
            reject(
                ErrorCode.RATE_LIMITED,
                f"Organization policy {measure.policy} allows at most {measure.binding};"
                " the Coordinator may ask for a Cooperation Override Grant",
                policy=measure.policy,
                limit=measure.binding,
                observed=measure.observed,
            )


def notice_drafts(state: GroupState, cmd: Incoming, assessment: Assessment) -> list[EventDraft]:
    """One notification per limit at or past its soft threshold, to precede the Command's
    own Events (so those keep their derived IDs and the receipt its primary Event)."""
    coordinator = state.coordinator.agent_id if state.coordinator is not None else None
    drafts = []
    for measure in assessment.notices:
        payload: Json = {
            "policyName": measure.policy,
            "observed": measure.observed,
            "softThreshold": measure.soft,
            "limit": measure.binding,
            "commandKind": cmd.kind,
            "actionId": cmd.action_id,
        }
        if coordinator is not None:
            payload["coordinatorAgentId"] = coordinator
        if cmd.work_item_id is not None:
            payload["workItemId"] = cmd.work_item_id
        if cmd.override_grant_id is not None and measure.exceeded:
            payload["cooperationOverrideGrantId"] = cmd.override_grant_id
        drafts.append(EventDraft(THRESHOLD_KIND, ("cooperation_policy", measure.policy), payload))
    return drafts


# --- the rate counters ----------------------------------------------------------------------------


def window_of(timestamp: str) -> int:
    return instant(timestamp).seconds // RATE_WINDOW_SECONDS


def rate(state: GroupState, policy: str, actor_id: str, now: str) -> int:
    """How many counted Events the actor has in the current rate window."""
    counter = state.rates.get(f"{policy} {actor_id}")
    return counter[1] if counter is not None and counter[0] == window_of(now) else 0


def count(state: GroupState, event: Mapping[str, Any]) -> None:
    """Evolve the rate counters (every accepted Event passes here, under any rules)."""
    policy = _RATED_EVENTS.get(event["kind"])
    if policy is None:
        return
    key = f"{policy} {event['actor']['id']}"
    window = window_of(event["occurredAt"])
    counter = state.rates.get(key)
    state.rates[key] = [window, counter[1] + 1 if counter and counter[0] == window else 1]


def _evolve_notice(state: GroupState, event: Json) -> None:
    """A notification changes no Group state: the rate counters moved with the Command."""


RULES: tuple[CommandRule, ...] = ()
EVOLVERS = {THRESHOLD_KIND: _evolve_notice}
