"""Child Missions (spec 7.1, 10.2, 14): a WorkItem promoted to a Mission with its own Group.

Three steps, each decided by one Group Authority:

1. In the parent Group, the current Coordinator's ``mission.create_child`` promotes a WorkItem
   (``open``, ``offered``, ``queued``, ``active`` or ``blocked``). The parent records
   ``mission.child.created`` against the WorkItem: the item becomes ``blocked``, its owner is
   fenced and pending offers are withdrawn while the child runs. The Event carries the whole
   child Mission document and Coordinator lease, so the child Group can be founded from it.
2. The child Group is founded from that parent Event (:func:`found_child`): its own
   ``mission.child.created`` opens the child Mission, caused by the parent Event, with the
   Parent Coordinator as child MissionOwner.
3. When the child settles, the parent records it (:func:`settle_child`): approval verifies the
   parent WorkItem with the child Approval as Evidence and the approved Artifacts as its result;
   failure or cancellation blocks the item or fails it, as the declared failure policy says
   (``block``, ``fail``). From the ledger rules on, ``fail_mission`` declares the child
   indispensable with no alternative: its failure also fails the parent Mission
   (``mission.terminated``), and with it the parent's other unfinished WorkItems.

Children narrow downward (invariant 11): the child budget may only limit dimensions the parent
WorkItem's contract limits, each no higher, and its deadline is no later than the parent's. The
graph stays acyclic because a child gets a new Mission and Group ID that no ancestor has.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from mwp.core.errors import ErrorCode
from mwp.core.group.allocation import DIMENSIONS
from mwp.core.group.api import RULES_LEDGER, AuthorityContext, ChildSettled
from mwp.core.group.budget import item_remaining
from mwp.core.group.clock import instant, reached
from mwp.core.group.coordinator_lease import (
    assignment,
    coordinator_session,
    lease_from_payload,
    lease_payload,
    lease_seconds,
    new_lease,
)
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.mission import _evolve_created, close_drafts, found_group, validated_mission
from mwp.core.group.payload import members
from mwp.core.group.policy import MAX_CHILD_MISSION_DEPTH
from mwp.core.group.rejection import bad_transition, invalid, reject
from mwp.core.group.roles import coordinator_only
from mwp.core.group.rules import CommandRule, by_agent, work_item_target
from mwp.core.group.state import GroupState, WorkItem
from mwp.core.group.work_item_state import (
    ABANDONED,
    RUNNING,
    active_mission,
    fence_owner,
    get_item,
    running_child,
    touch,
    withdraw_pending_offers,
)
from mwp.core.kinds import PROMOTABLE_WORK_STATES

Json = dict[str, Any]

__all__ = [
    "ABANDONED",
    "EVOLVERS",
    "FAIL_MISSION",
    "RULES",
    "child_item",
    "found_child",
    "settle_child",
]

FAILURE_POLICIES = frozenset({"block", "fail"})
# From the ledger rules on, a child may be declared indispensable with no alternative: its
# failure fails the parent WorkItem and then the parent Mission itself (spec 7.1, 14).
FAIL_MISSION = "fail_mission"
LEDGER_FAILURE_POLICIES = FAILURE_POLICIES | {FAIL_MISSION}
# A child's MissionOwner is the Parent Coordinator, an agent: final human Approval is off.
_CHILD_APPROVAL_POLICY = {"finalHumanApproval": False, "highRiskExecutionApproval": True}

CLAUSES: tuple[str, ...] = ("MWP-AUT-004", "MWP-MSN-002", "MWP-MSN-024", "MWP-MSN-026")


# --- 1. mission.create_child in the parent Group ---------------------------------------------


def _decide_create_child(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    mission = active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state not in PROMOTABLE_WORK_STATES:
        bad_transition("WorkItem", item.state, cmd.kind)
    if running_child(item) is not None:
        bad_transition(
            "WorkItem", item.state, cmd.kind, reason="a linked child Mission is still running"
        )
    p = cmd.payload
    child_mission_id, child_group_id = p.id("childMissionId"), p.id("childGroupId")
    ancestors = {mission.mission_id, state.group_id}
    if mission.parent is not None:
        ancestors.add(mission.parent["missionId"])
    if child_mission_id in ancestors or child_group_id in ancestors:
        invalid("a child Mission needs a new Mission and Group ID (the graph is acyclic)")
    if child_mission_id == child_group_id:
        invalid("the child's Mission ID and Group ID must differ")
    depth = (mission.parent["depth"] if mission.parent is not None else 0) + 1
    if depth > MAX_CHILD_MISSION_DEPTH:
        reject(
            ErrorCode.AUTH_FORBIDDEN,
            "the child would exceed the Organization's maximum Mission depth",
            depth=depth,
            maximumDepth=MAX_CHILD_MISSION_DEPTH,
        )
    deadline = p.timestamp("deadline")
    if reached(ctx.now, deadline):
        invalid("the child Mission deadline has already passed")
    parent_deadlines = [mission.deadline, item.contract.get("deadline")]
    if any(d is not None and instant(deadline) > instant(d) for d in parent_deadlines):
        invalid("the child deadline must not be later than the parent WorkItem's or Mission's")
    budget = p.obj("budget")
    _check_budget_subset(budget, item.contract["budget"])
    if ctx.rules >= RULES_LEDGER:  # what the item (and its ancestry) has already consumed
        _check_budget_left(budget, item_remaining(state, item.work_item_id))
    policy = p.opt_obj("approvalPolicy") or dict(_CHILD_APPROVAL_POLICY)
    if policy.get("finalHumanApproval") is True:
        # Root-human approval of a child (spec 14, "when risk policy says so") is not
        # implemented: refuse it rather than approve without the human.
        invalid("root-human approval of a child Mission is not supported")
    coordinator_id = p.id("coordinatorAgentId")
    if coordinator_id == cmd.actor_id:
        invalid("the child MissionOwner (this Coordinator) cannot also coordinate the child")
    card = p.integer("coordinatorAgentCardVersion", minimum=1, default=1)
    seconds = lease_seconds(cmd)
    lease = new_lease(
        child_group_id,
        coordinator_id,
        card,
        1,
        coordinator_session(ctx, coordinator_id),
        ctx.now,
        seconds,
    )
    child_doc = validated_mission(
        {
            "missionId": child_mission_id,
            "groupId": child_group_id,
            "revision": 1,
            "objective": p.raw("objective"),
            "definitionOfDone": p.raw("definitionOfDone"),
            "missionOwner": cmd.actor,
            "coordinator": assignment(lease),
            "state": "active",
            "budget": budget,
            "deadline": deadline,
            "approvalPolicy": policy,
            "parent": {
                "missionId": mission.mission_id,
                "workItemId": item.work_item_id,
                "depth": depth,
            },
            "createdAt": ctx.now,
        }
    )
    scratch = GroupState(group_id=child_group_id)
    payload: Json = {
        "childMission": child_doc,
        **lease_payload(scratch, lease),
        "failurePolicy": p.choice(
            "failurePolicy",
            LEDGER_FAILURE_POLICIES if ctx.rules >= RULES_LEDGER else FAILURE_POLICIES,
            default="block",
        ),
        "previousState": item.state,
        "withdrawnOfferIds": [o.offer_id for o in item.offers if o.status == "pending"],
    }
    title = p.opt_text("title", max_length=500)
    if title is not None:
        payload["title"] = title
    if item.owner is not None and item.owner.live:
        payload["fencedOwnership"] = {
            "agentId": item.owner.agent_id,
            "ownershipEpoch": item.owner.epoch,
        }
    drafts.add(
        "mission.child.created",
        ("work_item", item.work_item_id),
        payload,
        work_item_id=item.work_item_id,
    )


def _check_budget_subset(budget: Json, parent: Mapping[str, Any]) -> None:
    for dimension in DIMENSIONS:
        if dimension not in budget:
            continue
        if dimension not in parent:
            invalid(
                f"the parent WorkItem does not grant {dimension}; a child cannot add it",
                dimension=dimension,
            )
        if Decimal(str(budget[dimension])) > Decimal(str(parent[dimension])):
            reject(
                ErrorCode.BUDGET_EXCEEDED,
                f"the child's {dimension} exceeds the parent WorkItem's",
                dimension=dimension,
                limit=str(parent[dimension]),
                requested=str(budget[dimension]),
            )
    if "financialLimit" in budget and budget.get("currency") != parent.get("currency"):
        invalid("the child budget's currency differs from the parent WorkItem's")


def _check_budget_left(budget: Json, remaining: Mapping[str, Decimal]) -> None:
    for dimension, left in remaining.items():
        if dimension in budget and Decimal(str(budget[dimension])) > left:
            reject(
                ErrorCode.BUDGET_EXCEEDED,
                f"the child's {dimension} exceeds what the parent WorkItem has left",
                dimension=dimension,
                remaining=str(left),
                requested=str(budget[dimension]),
            )


def _evolve_child_created(state: GroupState, event: Json) -> None:
    if state.mission is None:  # the child Group's founding Event
        _evolve_created(state, event)
        return
    payload = event["payload"]
    item = state.work_items[event["workItemId"]]
    touch(item, event)
    fence_owner(item, "the WorkItem was promoted to a child Mission")
    withdraw_pending_offers(item)
    child = payload["childMission"]
    item.child_mission = {
        "missionId": child["missionId"],
        "groupId": child["groupId"],
        "failurePolicy": payload["failurePolicy"],
        "status": RUNNING,
        "createdAt": event["occurredAt"],
    }
    item.state = "blocked"


# --- 2. founding the child Group -------------------------------------------------------------
# Its mission.child.created is evolved by _evolve_child_created, under step 1 above.


def found_child(parent_event: Mapping[str, Any], now: str, drafts: Drafts) -> None:
    """Draft the child Group's founding Events from the parent's ``mission.child.created``."""
    payload = parent_event["payload"]
    extra: Json = {
        "parentGroupId": parent_event["groupId"],
        "parentEventId": parent_event["eventId"],
        "failurePolicy": payload["failurePolicy"],
    }
    found_group(
        drafts,
        "mission.child.created",
        payload["childMission"],
        lease_from_payload(payload, 1),
        title=payload.get("title"),
        now=now,
        reason="mission.create_child",
        extra=extra,
    )


# --- 3. the child settles --------------------------------------------------------------------


def child_item(state: GroupState, child_mission_id: str) -> WorkItem | None:
    """The WorkItem waiting for that child Mission, if it still waits."""
    for item in state.work_items.values():
        if running_child(item) == child_mission_id:
            return item
    return None


def settle_child(state: GroupState, item: WorkItem, report: ChildSettled, drafts: Drafts) -> None:
    link = item.child_mission
    assert link is not None
    common: Json = {"childMissionId": report.child_mission_id, "childState": report.state}
    target = ("work_item", item.work_item_id)
    if report.state == "approved":
        approval = report.approval
        assert approval is not None
        drafts.add(
            "work.result.accepted",
            target,
            {
                **common,
                "ownershipEpoch": item.ownership_epoch,
                "reviewEvidenceIds": [approval["approvalId"]],
                "childApproval": approval,
            },
            work_item_id=item.work_item_id,
        )
    elif link["failurePolicy"] in ("fail", FAIL_MISSION):
        drafts.add(
            "work.failed",
            target,
            {
                **common,
                "reportedBy": "child_mission",
                "reason": report.reason or f"the child Mission ended {report.state}",
                "failureEvidenceIds": [report.event_id],
            },
            work_item_id=item.work_item_id,
        )
        # Only a failure propagates: a cancelled child was given up, not lost.
        if link["failurePolicy"] == FAIL_MISSION and report.state == "failed":
            _fail_parent_mission(state, item, report, drafts)
    else:
        drafts.add(
            "work.blocked",
            target,
            {
                **common,
                "requiredResolution": "the child Mission ended "
                f"{report.state}: replan, re-offer, fail or cancel the WorkItem",
                "failureEvidenceIds": [report.event_id],
            },
            work_item_id=item.work_item_id,
        )


def _fail_parent_mission(
    state: GroupState, item: WorkItem, report: ChildSettled, drafts: Drafts
) -> None:
    """The declared child-failure propagation (spec 7.1, 10.2): the parent Mission fails, and
    its failure propagates to its other unfinished WorkItems, each citing the child's terminal
    Event as its failure Evidence."""
    why = f": {report.reason}" if report.reason else ""
    close_drafts(
        state,
        drafts,
        "work.failed",
        "mission.terminated",
        f"the indispensable child Mission {report.child_mission_id} failed{why}",
        evidence_ids=[report.event_id],
        failed_first=item.work_item_id,
        extra={
            "childMissionId": report.child_mission_id,
            "failurePolicy": FAIL_MISSION,
            "failureEvidenceIds": [report.event_id],
        },
    )


def close_for_parent(state: GroupState, drafts: Drafts) -> None:
    """The parent WorkItem ended before this child settled: cancel the child (spec 7.1)."""
    close_drafts(
        state,
        drafts,
        "work.cancelled",
        "mission.cancelled",
        "the parent WorkItem ended before this child Mission settled",
    )


RULES = (
    CommandRule(
        "mission.create_child",
        _decide_create_child,
        coordinator_only,
        target=work_item_target,
        coordinator=by_agent,
        payload=members(
            "childMissionId",
            "childGroupId",
            "objective",
            "definitionOfDone",
            "budget",
            "deadline",
            "coordinatorAgentId",
            "coordinatorAgentCardVersion",
            "leaseSeconds",
            "title",
            "approvalPolicy",
            "failurePolicy",
        ),
        clauses=("MWP-EVT-002", "MWP-MSN-004", "MWP-MSN-024", "MWP-MSN-025"),
    ),
)

EVOLVERS = {"mission.child.created": _evolve_child_created}
