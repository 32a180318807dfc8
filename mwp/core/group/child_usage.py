"""A child Mission's consumption charged to its parent Group too (spec 12, 14; MWP-AUT-005).

From rules ``RULES_CHILD_USAGE`` on, usage recorded in a child Mission's Group counts against
the parent WorkItem it was promoted from, that item's WorkItem ancestry and the parent Mission
(and so on up), and one overflow anywhere refuses it everywhere. Each Group decides alone, so
the shells make the charge one transition across Groups in three steps:

1. The child decides its Command without applying it (:func:`upward`): the usage its
   ``..._recorded`` draft would record is what it asks its parent to charge, named by a charge
   ID derived from the Command.
2. The parent charges it (:func:`decide_child_usage`) on the WorkItem waiting for that child,
   as a ``..._recorded`` Event whose ``childMission`` member names the child, its WorkItem and
   the charge; or refuses it (``BUDGET_EXCEEDED`` naming its own level, or
   ``INVALID_STATE_TRANSITION`` once no item waits for the child) and records nothing. A parent
   that is itself a child asks its own parent first, the same way.
3. Only then does the child apply its Command, under the same clock and state it decided on:
   the child's shell lets nothing else change its Group in between. Its Event cites the
   parent's (``parentCharge``: the parent Mission, its Event and what it leaves), and what the
   parent leaves caps what this Group's WorkItems may still consume (``budget.item_remaining``),
   so a capability token is capped by the whole ancestry.

A retry of a charge (the child's shell retrying its request) finds the Event recorded before.
A child has at most one charge in flight, so the parent keeps only the last one per child.
"""

from __future__ import annotations

from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.allocation import allocation, figures
from mwp.core.group.api import RULES_CHILD_USAGE, AuthorityContext, ChildUsage
from mwp.core.group.budget import least
from mwp.core.group.child_mission import child_item
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id
from mwp.core.group.rejection import reject
from mwp.core.group.resource_usage import (
    DELTA_MEMBER,
    PARENT_MEMBER,
    RECORDED_KIND,
    draft_usage,
)
from mwp.core.group.state import GroupState

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-AUT-005",)


def upward(
    state: GroupState, drafts: Drafts, ctx: AuthorityContext, *cause: str
) -> ChildUsage | None:
    """What this child Group's parent must charge before these drafts are applied, or None
    (no usage recorded, no parent, or rules before child usage). ``cause`` names the
    decision (its actor and Action ID, or the charge it relays) in the charge ID."""
    mission = state.mission
    if ctx.rules < RULES_CHILD_USAGE or mission is None or mission.parent is None:
        return None
    recorded = [d for d in drafts.items if d.kind == RECORDED_KIND]
    if not recorded:
        return None
    (draft,) = recorded  # one decision records one item's usage
    assert draft.work_item_id is not None
    return ChildUsage(
        child_mission_id=mission.mission_id,
        charge_id=derive_id(state.group_id, "usage", *cause),
        delta=dict(draft.payload[DELTA_MEMBER]),
        child_work_item_id=draft.work_item_id,
    )


def cite_parent(drafts: Drafts, ctx: AuthorityContext) -> None:
    """The usage draft cites the parent's answer, and its ``remaining`` is capped by it."""
    answer = ctx.parent_charge
    if answer is None:
        return
    for draft in drafts.items:
        if draft.kind == RECORDED_KIND:
            payload = draft.payload
            capped = least(allocation(payload["remaining"]), allocation(answer["remaining"]))
            currency = payload["remaining"].get("currency") or answer["remaining"].get("currency")
            payload["remaining"] = figures(capped, currency)
            payload[PARENT_MEMBER] = {
                "missionId": answer["missionId"],
                "eventId": answer["eventId"],
                "remaining": answer["remaining"],
            }


def prior_charge(state: GroupState, usage: ChildUsage) -> Json | None:
    """The Event this Group recorded for that very charge, if it did: ``{eventId, sequence}``."""
    last = state.child_charges.get(usage.child_mission_id)
    return last if last is not None and last["chargeId"] == usage.charge_id else None


def decide_child_usage(
    state: GroupState, usage: ChildUsage, ctx: AuthorityContext, drafts: Drafts
) -> None:
    """Draft the parent's charge of a child's usage, or refuse it with nothing drafted."""
    if ctx.rules < RULES_CHILD_USAGE:
        raise MwpError(
            ErrorCode.INVALID_COMMAND, "this Group's rules do not charge a child Mission's usage"
        )
    mission = state.mission
    if mission is None or mission.state != "active":
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            "the parent Mission is not active",
            missionState=mission.state if mission is not None else None,
        )
    item = child_item(state, usage.child_mission_id)
    if item is None:
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            "no WorkItem of the parent Group waits for that child Mission",
            childMissionId=usage.child_mission_id,
        )
    link = item.child_mission
    assert link is not None
    draft_usage(
        state,
        item,
        usage.delta,
        drafts,
        child={
            "missionId": usage.child_mission_id,
            "groupId": link["groupId"],
            "workItemId": usage.child_work_item_id,
            "chargeId": usage.charge_id,
        },
    )
