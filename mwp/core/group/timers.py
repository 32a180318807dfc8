"""Durable timers the current state needs, for the WorkItemWorkflows to hold.

* ``offer_expiry`` per pending offer (token: the offer ID). Firing it records nothing: offer
  expiry invalidates acceptance without an Event (spec 10.2); it lets the shell refresh views.
* ``start_by`` for a queued owner (token: the ownership lease ID),
* ``execution_lease`` for an active owner (token: the Execution Lease ID),
* ``blocked_lease`` for a blocked owner (token: the blocked lease ID).

A renewal or checkpoint moves the due time under the same token; a timer that fires early or
for a superseded grant is stale and records nothing.
"""

from __future__ import annotations

from mwp.core.group.api import TimerRequest
from mwp.core.group.clock import instant
from mwp.core.group.execution_lease import timer_token
from mwp.core.group.state import GroupState, WorkItem


def item_timers(state: GroupState, item: WorkItem) -> list[TimerRequest]:
    """The timers one WorkItem needs now (what its WorkItemWorkflow should hold)."""
    mission = state.mission
    if mission is None or mission.state != "active":
        return []
    timers: list[TimerRequest] = []
    if item.state == "offered":
        timers.extend(
            TimerRequest(item.work_item_id, "offer_expiry", o.expires_at, o.offer_id)
            for o in item.offers
            if o.status == "pending"
        )
    running = timer_token(item)
    if running is not None:
        kind, due, token = running
        timers.append(TimerRequest(item.work_item_id, kind, due, token))
    return timers


def timer_requests(state: GroupState) -> list[TimerRequest]:
    timers = [t for item in state.work_items.values() for t in item_timers(state, item)]
    timers.sort(key=lambda t: (instant(t.due_at), t.work_item_id, t.kind))
    return timers
