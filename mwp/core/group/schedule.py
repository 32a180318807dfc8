"""Schedule disclosure in the Group (spec 11.2, MWP-WRK-012): the owner's estimate of when it
will start and finish a WorkItem, kept as the item's ``scheduleEstimate``.

It arrives with ``work.accept_offer`` (optional ``scheduleEstimate``, carried by
``work.offer.accepted``) and, on a material change while the item waits (``queued`` or
``blocked``), with ``ext.missionweaveprotocol.core.schedule_disclose`` from the owner under its
Ownership Epoch, recorded as ``ext.missionweaveprotocol.core.schedule_disclosed``. An estimate is
advisory: it authorizes nothing and never changes the item's state. The estimate's shape is the
WorkItem's ``scheduleEstimate``; it can say nothing about other Groups, having no member that
could (the Worker's Scheduler computes it from aggregates).
"""

from __future__ import annotations

from typing import Any, Final

from mwp.core.group.api import AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.ownership import require_owner
from mwp.core.group.payload import Payload, members
from mwp.core.group.rejection import bad_transition, invalid
from mwp.core.group.roles import working_agent
from mwp.core.group.rules import CommandRule, work_item_target
from mwp.core.group.state import GroupState
from mwp.core.group.work_item_state import active_mission, get_item, touch

Json = dict[str, Any]

SCHEDULE_DISCLOSE_KIND: Final = "ext.missionweaveprotocol.core.schedule_disclose"
SCHEDULE_DISCLOSED_KIND: Final = "ext.missionweaveprotocol.core.schedule_disclosed"
CAPACITY_STATUSES = frozenset({"available", "queued", "constrained", "blocked"})
_MEMBERS = frozenset(
    {"estimatedStart", "estimatedCompletion", "confidence", "capacityStatus", "lastCalculatedAt"}
)
_WAITING = frozenset({"queued", "blocked"})


def schedule_estimate(value: Any, path: str = "payload.scheduleEstimate") -> Json:
    """A valid ``scheduleEstimate`` (exactly its five members), else ``INVALID_COMMAND``."""
    if not isinstance(value, dict):
        invalid(f"{path} must be an object", member=path)
    unknown = sorted(set(value) - _MEMBERS)
    if unknown:
        invalid(f"{path} has unknown members", member=path, unknown=unknown)
    p = Payload(value, path)
    start, completion = p.timestamp("estimatedStart"), p.timestamp("estimatedCompletion")
    confidence = p.raw("confidence")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        invalid(f"{path}.confidence must be a number from 0 to 1", member=f"{path}.confidence")
    return {
        "estimatedStart": start,
        "estimatedCompletion": completion,
        "confidence": confidence,
        "capacityStatus": p.choice("capacityStatus", CAPACITY_STATUSES),
        "lastCalculatedAt": p.timestamp("lastCalculatedAt"),
    }


# --- ext.missionweaveprotocol.core.schedule_disclose ---------------------------------------------


def _decide_disclose(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state not in _WAITING:
        bad_transition("WorkItem", item.state, cmd.kind, reason="only waiting work is scheduled")
    owner = require_owner(item, cmd)
    estimate = schedule_estimate(cmd.payload.raw("scheduleEstimate"))
    drafts.add(
        SCHEDULE_DISCLOSED_KIND,
        ("work_item", item.work_item_id),
        {"ownershipEpoch": owner.epoch, "scheduleEstimate": estimate},
        work_item_id=item.work_item_id,
    )


def _evolve_disclosed(state: GroupState, event: Json) -> None:
    item = state.work_items[event["workItemId"]]
    touch(item, event)
    item.schedule_estimate = event["payload"]["scheduleEstimate"]


RULES = (
    CommandRule(
        SCHEDULE_DISCLOSE_KIND,
        _decide_disclose,
        working_agent,
        target=work_item_target,
        payload=members("ownershipEpoch", "scheduleEstimate"),
        clauses=("MWP-FND-017", "MWP-WRK-012"),
    ),
)

EVOLVERS = {SCHEDULE_DISCLOSED_KIND: _evolve_disclosed}
