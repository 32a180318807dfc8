"""Small WorkItem state helpers shared by the WorkItem, lease and Membership evolvers."""

from __future__ import annotations

from typing import Any

from mwp.core.group.clock import reached
from mwp.core.group.incoming import Incoming
from mwp.core.group.rejection import bad_transition, invalid
from mwp.core.group.state import GroupState, Mission, SettledWorkItem, WorkItem

CLAUSES: tuple[str, ...] = ("MWP-WRK-003",)


def active_mission(state: GroupState, cmd: Incoming) -> Mission:
    """Work moves only while the Mission is active (not awaiting approval, not terminal)."""
    mission = state.mission
    assert mission is not None
    if mission.state != "active":
        bad_transition("Mission", mission.state, cmd.kind)
    return mission


def get_item(state: GroupState, cmd: Incoming) -> WorkItem:
    if cmd.work_item_id is None:
        invalid(f"{cmd.kind} must name its WorkItem in workItemId")
    item = state.work_items.get(cmd.work_item_id)
    if item is None:
        settled = state.settled.get(cmd.work_item_id)
        if settled is not None:  # verified or cancelled: no Command moves it any more
            bad_transition("WorkItem", settled.state, cmd.kind)
        invalid("no such WorkItem in this Group", workItemId=cmd.work_item_id)
    return item


def touch(item: WorkItem, event: dict[str, Any]) -> None:
    """Every WorkItem Event sets the item's revision (from the Event) and update time."""
    item.revision = event["aggregateRevision"]
    item.updated_at = event["occurredAt"]


def fence_owner(item: WorkItem, reason: str) -> None:
    """The owner keeps its record (queued/active/blocked need one) but can no longer act."""
    if item.owner is not None and item.owner.live:
        item.owner.fenced_reason = reason
    item.execution_lease = None
    item.blocked_lease = None


def release_ownership(item: WorkItem) -> None:
    """Ownership ends: the item returns to the Coordinator (its epoch counter stays)."""
    item.owner = None
    item.execution_lease = None
    item.blocked_lease = None


def withdraw_pending_offers(item: WorkItem) -> list[str]:
    withdrawn = []
    for offer in item.offers:
        if offer.status == "pending":
            offer.status = "withdrawn"
            withdrawn.append(offer.offer_id)
    return withdrawn


def expiry_of(item: WorkItem) -> tuple[str, str] | None:
    """The deadline of the live owner's current grant and why it would fence, if any."""
    owner = item.owner
    if owner is None or not owner.live:
        return None
    if item.state == "queued":
        return owner.start_by, "start_by_missed"
    if item.state == "active" and item.execution_lease is not None:
        return item.execution_lease.expires_at, "execution_lease_expired"
    if item.state == "blocked" and item.blocked_lease is not None:
        return item.blocked_lease.expires_at, "blocked_lease_expired"
    return None


def has_live_owner(item: WorkItem, now: str) -> bool:
    """A live owner holds an unfenced grant whose lease has not run out at ``now``."""
    owner = item.owner
    if owner is None or not owner.live:
        return False
    deadline = expiry_of(item)
    return deadline is None or not reached(now, deadline[0])


def settle(state: GroupState, item: WorkItem) -> None:
    """A verified or cancelled WorkItem never changes again: the Group keeps only its
    SettledWorkItem record; the full item goes to ``state.retired`` for whoever hands its final
    view on (the Group Event log has every Event of it in any case)."""
    del state.work_items[item.work_item_id]
    state.settled[item.work_item_id] = SettledWorkItem.of(item)
    state.retired.append(item)


# --- the link to a child Mission (spec 14; see child_mission.py) ---------------------------------

RUNNING = "running"
ABANDONED = "abandoned"  # the parent item ended first: the child is cancelled by propagation


def running_child(item: WorkItem) -> str | None:
    """The ID of the child Mission the item waits for, if one runs."""
    link = item.child_mission
    return link["missionId"] if link is not None and link["status"] == RUNNING else None


def settle_link(item: WorkItem, event: dict[str, Any]) -> None:
    """A child's outcome Event ends the item's wait for it."""
    if item.child_mission is not None:
        item.child_mission = {**item.child_mission, "status": event["payload"]["childState"]}


def abandon_or_settle(item: WorkItem, event: dict[str, Any]) -> None:
    """The item failed or was cancelled: by its child's outcome, or first (abandoning it)."""
    if running_child(item) is None:
        return
    if "childState" in event["payload"]:
        settle_link(item, event)
    else:
        assert item.child_mission is not None
        item.child_mission = {**item.child_mission, "status": ABANDONED}
