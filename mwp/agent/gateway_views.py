"""What an agent in gateway mode knows of its Groups, projected from the Events the gateway
delivers: each WorkItem's view as a run reads it (contract, state, owner, Execution Lease,
latest checkpoint), the agent's own Membership Epoch per Group, and each Group's Mission ID.

In gateway mode the agent has no Temporal query of the MissionWorkflow, so these views stand
in for ``MissionHandle.work_item`` and ``MissionHandle.epochs``. They are built only from the
signed Events of the Group log (verified by the gateway), so they hold what the Authority
decided, as far as this agent may see it: a WorkItem authorized before the agent's visibility
start has no contract here (:class:`UnknownWorkItemError`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.execution_lease import LEASE_REVOKED_KIND, OWNERSHIP_EXPIRED_KIND

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-WRK-027")

# Where an Event payload names its Mission (Events themselves carry only the Group).
_MISSION_HOLDERS = ("mission", "membership", "workItem")


class UnknownWorkItemError(MwpError):
    """The agent's Groups never showed this WorkItem's authorization."""

    def __init__(self, group_id: str, work_item_id: str) -> None:
        super().__init__(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"WorkItem {work_item_id} was not authorized within this agent's view of the Group",
            group_id=group_id,
            details={"workItemId": work_item_id},
        )


def mission_of(event: Mapping[str, Any]) -> str | None:
    """The Mission ID an Event's payload names, if any."""
    payload = event.get("payload")
    if not isinstance(payload, dict):
        return None
    for holder in _MISSION_HOLDERS:
        value = payload.get(holder)
        if isinstance(value, dict) and isinstance(value.get("missionId"), str):
            return str(value["missionId"])
    return None


class GroupViews:
    """One Group's projection for one agent (see the module docstring)."""

    def __init__(self, group_id: str, agent_id: str) -> None:
        self.group_id = group_id
        self.agent_id = agent_id
        self.mission_id: str | None = None
        self.membership_epoch: int | None = None
        self.coordinator: Json | None = None
        self.sequence = 0
        self._items: dict[str, Json] = {}

    def apply(self, event: Mapping[str, Any]) -> None:
        sequence = int(event["sequence"])
        if sequence <= self.sequence:
            return  # at least once: a duplicate, or a receipt's Event the feed brings again
        self.sequence = sequence
        if self.mission_id is None:
            self.mission_id = mission_of(event)
        kind = str(event["kind"])
        payload: Json = dict(event.get("payload") or {})
        if kind in ("membership.changed", "membership.ended"):
            doc = payload.get("membership") or {}
            if (doc.get("member") or {}).get("id") == self.agent_id:
                self.membership_epoch = int(doc["membershipEpoch"])
            return
        work_item_id = event.get("workItemId")
        if not isinstance(work_item_id, str):
            return
        if kind == "work.authorized":
            self._items[work_item_id] = copy.deepcopy(payload["workItem"])
            return
        item = self._items.get(work_item_id)
        if item is None:
            return
        _evolve(item, kind, payload)

    def unknown_offer(self, event: Mapping[str, Any]) -> str | None:
        """The Context Package an offer to this agent names for a WorkItem it does not know
        (authorized before its visibility start): the package cites the WorkItem's contract
        Events, which the agent may retrieve. None for any other Event."""
        payload = event.get("payload") or {}
        package = payload.get("contextPackageId")
        if (
            event.get("kind") != "work.offer.created"
            or event.get("workItemId") in self._items
            or not isinstance(package, str)
        ):
            return None
        offered = {o.get("agentId") for o in payload.get("offers") or ()}
        return package if self.agent_id in offered else None

    def learn(self, cited: Mapping[str, Any]) -> None:
        """Take a cited Event from before this agent's visibility start (a WorkItem's
        authorization or contract revision, retrieved in Group order)."""
        work_item_id = cited.get("workItemId")
        if not isinstance(work_item_id, str):
            return
        if self.mission_id is None:
            self.mission_id = mission_of(cited)
        payload: Json = dict(cited.get("payload") or {})
        kind = cited["kind"]
        if kind == "work.authorized":
            self._items.setdefault(work_item_id, copy.deepcopy(payload["workItem"]))
            return
        item = self._items.get(work_item_id)
        if item is None:
            return
        if kind == "work.contract.revised":
            _evolve(item, kind, payload)
        elif kind in ("work.progressed", "work.checkpointed") and payload.get("checkpointRef"):
            lease = payload.get("leaseId") or (payload.get("executionLease") or {}).get("leaseId")
            item["checkpoint"] = {"checkpointRef": payload["checkpointRef"], "leaseId": lease}

    def work_item(self, work_item_id: str) -> Json:
        item = self._items.get(work_item_id)
        if item is None:
            raise UnknownWorkItemError(self.group_id, work_item_id)
        return copy.deepcopy(item)

    def epochs(self) -> Json:
        """As ``MissionHandle.epochs`` answers, for signing this agent's Commands."""
        if self.membership_epoch is None:
            raise MwpError(
                ErrorCode.MEMBERSHIP_REQUIRED,
                "no Membership of this agent was delivered in the Group yet",
                group_id=self.group_id,
            )
        return {"membershipEpoch": self.membership_epoch, "coordinator": self.coordinator}


def _evolve(item: Json, kind: str, payload: Json) -> None:
    """The members of a WorkItem view a run reads, as each Event changes them."""
    if kind == "work.contract.revised":
        item["contract"] = payload["contract"]
    elif kind == "work.offer.created":
        item["state"] = "offered"
        item.pop("executionLease", None)
    elif kind == "work.offer.accepted":
        item["owner"] = payload["owner"]
        item["ownershipEpoch"] = payload["owner"]["ownershipEpoch"]
        item["state"] = "queued"
    elif kind == "work.started":
        item["executionLease"] = payload["executionLease"]
        item["state"] = "active"
    elif kind == "work.progressed":
        item["executionLease"] = payload["executionLease"]
        if "checkpointRef" in payload:
            item["checkpoint"] = {
                "checkpointRef": payload["checkpointRef"],
                "leaseId": payload["executionLease"]["leaseId"],
            }
    elif kind == "work.checkpointed":
        item.pop("executionLease", None)
        item["checkpoint"] = {
            "checkpointRef": payload.get("checkpointRef"),
            "leaseId": payload["leaseId"],
        }
        item["state"] = "queued"
    elif kind == "work.blocked":
        item.pop("executionLease", None)
        item["state"] = "blocked"
    elif kind == "work.unblocked":
        item["state"] = payload["nextState"]
    elif kind == "work.submitted":
        item.pop("executionLease", None)
        item["submission"] = payload["submission"]
        item["state"] = "submitted"
    elif kind == "work.result.accepted":
        item["state"] = "verified"
    elif kind in ("work.failed", "work.cancelled"):
        item.pop("executionLease", None)
        item["state"] = "failed" if kind == "work.failed" else "cancelled"
    elif kind in (OWNERSHIP_EXPIRED_KIND, LEASE_REVOKED_KIND):
        item.pop("executionLease", None)
