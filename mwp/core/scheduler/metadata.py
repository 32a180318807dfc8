"""The scheduling metadata of a Group Event: all a Scheduler may read of it (MWP-WRK-028).

A Scheduler orders and admits work by IDs, epochs, leases, deadlines, urgency, budgets,
capabilities, risk and estimates. The goal, the rest of a Work Contract, Conversations,
Messages, progress reports, block and failure reasons, reviews, approvals' comments and
Context Package content are the Mission's, so they never cross into a Scheduler's inputs: an
inbox hands it only :func:`scheduling_metadata` of each Event, and a GroupQueue fed that
projects exactly what it projects from the whole Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mwp.core.scheduler.group_queue import (
    LEASE_REVOKED,
    OWNERSHIP_EXPIRED,
    SCHEDULE_DISCLOSED,
)
from mwp.core.scheduler.model import TERMS_MEMBERS

CLAUSES: tuple[str, ...] = ("MWP-WRK-028",)

Json = dict[str, Any]
# A shape: the members kept, each whole (``None``), by its own shape (a mapping), or, for a
# list, each element by the shape in a one-element tuple.
Shape = Mapping[str, Any]

KEEP: Final = None
_TERMS: Final[Shape] = {member: KEEP for member in TERMS_MEMBERS}
_OFFER: Final[Shape] = {
    "offerId": KEEP,
    "agentId": KEEP,
    "agentCardVersion": KEEP,
    "expiresAt": KEEP,
    "selectionBasis": KEEP,  # capabilities, availability, expected cost, rules applied
}

# Per Event kind a Scheduler reads, the payload members it reads; any other kind's payload is
# dropped whole.
SHAPES: Final[Mapping[str, Shape]] = {
    "work.authorized": {"workItem": {"contract": _TERMS}},
    "work.contract.revised": {"contract": _TERMS},
    "work.offer.created": {
        "offers": (_OFFER,),
        "startWithinSeconds": KEEP,
        "withdrawnOfferIds": KEEP,
        "fencedOwnership": {"agentId": KEEP, "ownershipEpoch": KEEP},
        "contextPackageId": KEEP,
    },
    "work.offer.accepted": {
        "owner": {"agentId": KEEP, "acceptedAt": KEEP, "startBy": KEEP, "ownershipEpoch": KEEP},
        "scheduleEstimate": KEEP,
    },
    "approval.execution.granted": {"contractVersion": KEEP},
    "work.started": {"executionLease": {"leaseId": KEEP}},
    "work.progressed": {"checkpointRef": KEEP},
    "work.checkpointed": {"checkpointRef": KEEP, "startBy": KEEP},
    "work.blocked": {},
    "work.unblocked": {"nextState": KEEP, "startBy": KEEP},
    "work.submitted": {},
    "work.result.accepted": {},
    "work.failed": {},
    "work.cancelled": {},
    OWNERSHIP_EXPIRED: {"agentId": KEEP},
    LEASE_REVOKED: {"startBy": KEEP},
    SCHEDULE_DISCLOSED: {"scheduleEstimate": KEEP},
}


def scheduling_metadata(event: Mapping[str, Any]) -> Json:
    """``event``'s kind, sequence, WorkItem and the payload members a Scheduler reads."""
    shape = SHAPES.get(str(event["kind"]), {})
    return {
        "kind": event["kind"],
        "sequence": event["sequence"],
        "workItemId": event.get("workItemId"),
        "payload": _kept(event.get("payload", {}), shape),
    }


def _kept(value: Mapping[str, Any], shape: Shape) -> Json:
    kept: Json = {}
    for member, inner in shape.items():
        if member not in value:
            continue
        found = value[member]
        if inner is KEEP:
            kept[member] = found
        elif isinstance(inner, tuple) and isinstance(found, list):
            kept[member] = [_kept(e, inner[0]) if isinstance(e, Mapping) else e for e in found]
        elif isinstance(found, Mapping):
            kept[member] = _kept(found, inner)
    return kept
