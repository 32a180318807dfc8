"""One Group's inbox Cursor and Work queue for one Agent (MWP-WRK-008): a projection of that
Group's accepted Events, so replaying the log from the start rebuilds it exactly.

Only this Group's Events ever reach a ``GroupQueue``; nothing here refers to another Group.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from mwp.core.kinds import EventKind
from mwp.core.scheduler.clock import seconds
from mwp.core.scheduler.model import Entry, Offer, Phase, Terms

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-WRK-008", "MWP-WRK-014", "MWP-WRK-019")

Json = dict[str, Any]

OWNERSHIP_EXPIRED: Final = "ext.missionweaveprotocol.core.ownership_expired"
LEASE_REVOKED: Final = "ext.missionweaveprotocol.core.execution_lease_revoked"
SCHEDULE_DISCLOSED: Final = "ext.missionweaveprotocol.core.schedule_disclosed"
# Every Event kind a GroupQueue reads (an inbox may pass on only these).
SCHEDULED_KINDS: frozenset[EventKind] = frozenset(
    {
        "work.authorized",
        "work.contract.revised",
        "work.offer.created",
        "work.offer.accepted",
        "approval.execution.granted",
        "work.started",
        "work.progressed",
        "work.checkpointed",
        "work.blocked",
        "work.unblocked",
        "work.submitted",
        "work.result.accepted",
        "work.failed",
        "work.cancelled",
        OWNERSHIP_EXPIRED,
        LEASE_REVOKED,
        SCHEDULE_DISCLOSED,
    }
)


@dataclass(frozen=True, slots=True)
class Change:
    """How one Event moved one of this Agent's items (``None``: not held)."""

    work_item_id: str
    before: Phase | None
    after: Phase | None


class GroupQueue:
    __slots__ = (
        "_handlers",
        "_ready",
        "agent_id",
        "checkpoints",
        "cursor",
        "dead",
        "entries",
        "group_id",
        "terms",
        "verified",
    )

    def __init__(self, group_id: str, agent_id: str) -> None:
        self.group_id = group_id
        self.agent_id = agent_id
        self.cursor = 0  # the last applied Group sequence: the inbox Cursor
        self.terms: dict[str, Terms] = {}  # every WorkItem of the Group (dependencies, offers)
        self.entries: dict[str, Entry] = {}  # the items offered to or owned by this Agent
        self.verified: set[str] = set()
        self.dead: set[str] = set()  # failed or cancelled: a dependency that cannot be met
        # The latest checkpoint of every item, whoever recorded it: a new owner resumes there.
        self.checkpoints: dict[str, str] = {}
        self._ready: list[tuple[int, str, int]] = []  # (key, work item, entry version)
        self._handlers: dict[str, Callable[[str, Json, Json], None]] = {
            "work.authorized": self._authorized,
            "work.contract.revised": self._revised,
            "work.offer.created": self._offered,
            "work.offer.accepted": self._accepted,
            "approval.execution.granted": self._granted,
            "work.started": self._started,
            "work.progressed": self._progressed,
            "work.checkpointed": self._checkpointed,
            "work.blocked": self._blocked,
            "work.unblocked": self._unblocked,
            "work.submitted": self._submitted,
            "work.result.accepted": self._result_accepted,
            "work.failed": self._ended,
            "work.cancelled": self._ended,
            OWNERSHIP_EXPIRED: self._expired,
            LEASE_REVOKED: self._revoked,
            SCHEDULE_DISCLOSED: self._disclosed,
        }
        assert self._handlers.keys() == SCHEDULED_KINDS

    # --- projection -----------------------------------------------------------------------

    def apply(self, event: Json) -> Change | None:
        """Apply one accepted Event of this Group; a redelivered one (at or before the Cursor)
        changes nothing, so at-least-once delivery and replay give the same queue."""
        if event.get("cited"):
            self._cited(event)
            return None
        sequence = int(event["sequence"])
        if sequence <= self.cursor:
            return None
        self.cursor = sequence
        handler = self._handlers.get(event["kind"])
        item_id = event.get("workItemId")
        if handler is None or item_id is None:
            return None
        entry = self.entries.get(item_id)
        before = entry.phase if entry else None
        handler(item_id, event["payload"], event)
        entry = self.entries.get(item_id)
        after = entry.phase if entry else None
        return Change(item_id, before, after) if (before, after) != (None, None) else None

    def _cited(self, event: Json) -> None:
        """An Event from before this Agent's visibility start that a Context Package of an
        offer cites (its inbox retrieved it): the item's terms, or where its last owner
        checkpointed, or that a dependency of it was verified. It moves no Cursor and no queue
        entry; only the gateway inbox sends such Events (``"cited": true``), so no earlier
        history holds one."""
        item_id, payload = event.get("workItemId"), event["payload"]
        if item_id is None:
            return
        if event["kind"] == "work.authorized":
            self.terms.setdefault(item_id, Terms.from_contract(payload["workItem"]["contract"]))
        elif event["kind"] == "work.contract.revised":
            self.terms[item_id] = Terms.from_contract(payload["contract"])
        elif event["kind"] in ("work.progressed", "work.checkpointed") and payload.get(
            "checkpointRef"
        ):
            self.checkpoints[item_id] = payload["checkpointRef"]
        elif event["kind"] == "work.result.accepted":
            self.verified.add(item_id)

    def _authorized(self, item_id: str, payload: Json, _: Json) -> None:
        self.terms[item_id] = Terms.from_contract(payload["workItem"]["contract"])

    def _revised(self, item_id: str, payload: Json, _: Json) -> None:
        terms = Terms.from_contract(payload["contract"])
        self.terms[item_id] = terms
        entry = self.entries.get(item_id)
        if entry is not None:
            entry.terms = terms  # a new urgency re-keys queued work at once
            self._requeue(entry)

    def _offered(self, item_id: str, payload: Json, _: Json) -> None:
        self.dead.discard(item_id)  # a failed item may be offered again
        entry = self.entries.get(item_id)
        if entry is not None and (
            "fencedOwnership" in payload
            or (entry.offer is not None and entry.offer.offer_id in payload["withdrawnOfferIds"])
        ):
            self._drop(item_id)
        for doc in payload["offers"]:
            if doc["agentId"] == self.agent_id and item_id in self.terms:
                self.entries[item_id] = Entry(
                    work_item_id=item_id,
                    terms=self.terms[item_id],
                    phase=Phase.OFFERED,
                    offer=Offer(
                        offer_id=doc["offerId"],
                        agent_card_version=int(doc["agentCardVersion"]),
                        expires_at=seconds(doc["expiresAt"]),
                        start_within=int(payload["startWithinSeconds"]),
                        selection_basis=doc["selectionBasis"],
                    ),
                    checkpoint_ref=self.checkpoints.get(item_id),
                )

    def _accepted(self, item_id: str, payload: Json, _: Json) -> None:
        owner = payload["owner"]
        entry = self.entries.get(item_id)
        if owner["agentId"] != self.agent_id:
            if entry is not None:
                self._drop(item_id)  # another candidate won the race
            return
        if entry is None:
            entry = self.entries[item_id] = Entry(item_id, self.terms[item_id], Phase.QUEUED)
            entry.checkpoint_ref = self.checkpoints.get(item_id)
        entry.accepted_at = seconds(owner["acceptedAt"])
        entry.start_by = seconds(owner["startBy"])
        entry.ownership_epoch = int(owner["ownershipEpoch"])
        entry.disclosed = payload.get("scheduleEstimate")
        entry.offer = None
        self._requeue(entry, Phase.QUEUED)

    def _granted(self, item_id: str, payload: Json, _: Json) -> None:
        entry = self.entries.get(item_id)
        if entry is not None:
            entry.approved_version = int(payload["contractVersion"])
            self._requeue(entry)

    def _started(self, item_id: str, payload: Json, _: Json) -> None:
        entry = self._mine(item_id)
        if entry is not None:
            entry.lease_id = payload["executionLease"]["leaseId"]
            self._set(entry, Phase.ACTIVE)

    def _progressed(self, item_id: str, payload: Json, _: Json) -> None:
        ref = payload.get("checkpointRef")
        if ref is None:
            return
        self.checkpoints[item_id] = ref
        entry = self._mine(item_id)
        if entry is not None:
            entry.checkpoint_ref = ref

    def _checkpointed(self, item_id: str, payload: Json, _: Json) -> None:
        if "checkpointRef" in payload:
            self.checkpoints[item_id] = payload["checkpointRef"]
        entry = self._mine(item_id)
        if entry is not None:
            # A checkpoint ends a cooperative preemption: the item re-enters its Group queue.
            entry.checkpoint_ref = payload.get("checkpointRef", entry.checkpoint_ref)
            entry.start_by = seconds(payload["startBy"])
            entry.lease_id = None
            entry.preemption_requested = False
            self._requeue(entry, Phase.QUEUED)

    def _blocked(self, item_id: str, _payload: Json, __: Json) -> None:
        entry = self._mine(item_id)
        if entry is not None:
            entry.lease_id = None
            entry.preemption_requested = False
            self._set(entry, Phase.BLOCKED)

    def _unblocked(self, item_id: str, payload: Json, _: Json) -> None:
        entry = self._mine(item_id)
        if entry is None:
            return
        if payload["nextState"] == "queued":
            entry.start_by = seconds(payload["startBy"])
            self._requeue(entry, Phase.QUEUED)
        else:
            self._drop(item_id)  # ownership lapsed: the item goes back to the Coordinator

    def _submitted(self, item_id: str, _payload: Json, __: Json) -> None:
        entry = self._mine(item_id)
        if entry is not None:
            entry.lease_id = None
            self._set(entry, Phase.SUBMITTED)

    def _result_accepted(self, item_id: str, _payload: Json, _event: Json) -> None:
        self.verified.add(item_id)
        self._drop(item_id)
        for entry in self.entries.values():  # dependants may now be eligible
            if item_id in entry.terms.dependencies:
                self._requeue(entry)

    def _ended(self, item_id: str, _payload: Json, _event: Json) -> None:
        self.dead.add(item_id)
        self._drop(item_id)

    def _disclosed(self, item_id: str, payload: Json, _: Json) -> None:
        entry = self._mine(item_id)
        if entry is not None:
            entry.disclosed = payload["scheduleEstimate"]

    def _revoked(self, item_id: str, payload: Json, _: Json) -> None:
        entry = self._mine(item_id)
        if entry is not None:
            # A replaced Session's lease: queued again under the same ownership, to be started
            # by the new runtime (from the latest checkpoint).
            entry.start_by = seconds(payload["startBy"])
            entry.lease_id = None
            entry.preemption_requested = False
            self._requeue(entry, Phase.QUEUED)

    def _expired(self, item_id: str, payload: Json, _: Json) -> None:
        if payload.get("agentId") == self.agent_id:
            self._drop(item_id)

    # --- the ready queue ------------------------------------------------------------------

    def _mine(self, item_id: str) -> Entry | None:
        entry = self.entries.get(item_id)
        return entry if entry is not None and entry.phase is not Phase.OFFERED else None

    def _set(self, entry: Entry, phase: Phase) -> None:
        entry.phase = phase
        entry.version += 1  # any heap entry of the old phase is stale

    def _drop(self, item_id: str) -> None:
        entry = self.entries.pop(item_id, None)
        if entry is not None:
            entry.version += 1

    def _requeue(self, entry: Entry, phase: Phase | None = None) -> None:
        if phase is not None:
            entry.phase = phase
        entry.version += 1
        if self.eligible(entry):
            heapq.heappush(self._ready, (entry.key, entry.work_item_id, entry.version))

    def eligible(self, entry: Entry) -> bool:
        """Queued, its dependencies verified and any execution approval granted."""
        terms = entry.terms
        return (
            entry.phase is Phase.QUEUED
            and terms.dependencies <= self.verified
            and (not terms.gated or entry.approved_version == terms.contract_version)
        )

    def waiting_on(self, entry: Entry) -> str | None:
        if entry.phase is Phase.BLOCKED:
            return "blocked"
        if not entry.terms.dependencies <= self.verified:
            return "dependencies"
        if entry.terms.gated and entry.approved_version != entry.terms.contract_version:
            return "approval"
        return None

    def peek(self) -> Entry | None:
        """The next eligible item by urgency-with-aging, skipping stale heap entries."""
        ready = self._ready
        while ready:
            _, item_id, version = ready[0]
            entry = self.entries.get(item_id)
            if entry is not None and entry.version == version and self.eligible(entry):
                return entry
            heapq.heappop(ready)
        return None

    def take(self, entry: Entry) -> None:
        """Reserve the item for a slot (the shell then asks the Authority for ``work.start``)."""
        self._set(entry, Phase.DISPATCHED)

    def untake(self, entry: Entry) -> None:
        """Undo :meth:`take` when the item did not start (the Authority refused
        ``work.start``): queued again, unless a later Event already moved it."""
        if entry.phase is Phase.DISPATCHED:
            self._requeue(entry, Phase.QUEUED)

    def ready_entries(self) -> Iterator[Entry]:
        for entry in self.entries.values():
            if self.eligible(entry):
                yield entry

    def queued_count(self) -> int:
        return sum(1 for e in self.entries.values() if e.phase is Phase.QUEUED)

    def running_count(self) -> int:
        return sum(1 for e in self.entries.values() if e.phase in (Phase.DISPATCHED, Phase.ACTIVE))

    def snapshot(self) -> Json:
        """Comparable view of the projection (used to prove rebuild-by-replay)."""
        return {
            "cursor": self.cursor,
            "verified": sorted(self.verified),
            "dead": sorted(self.dead),
            "entries": {
                k: (
                    e.phase.value,
                    e.terms,
                    e.accepted_at,
                    e.start_by,
                    e.ownership_epoch,
                    e.lease_id,
                    e.checkpoint_ref,
                    e.approved_version,
                    e.offer.offer_id if e.offer else None,
                )
                for k, e in sorted(self.entries.items())
            },
            "ready": [e.work_item_id for e in sorted(self.ready_entries(), key=_order)],
        }


def snapshot_json(queue: GroupQueue) -> Json:
    """:meth:`GroupQueue.snapshot` as JSON (sets sorted), equal across processes."""
    snap = queue.snapshot()
    snap["entries"] = {
        item: [_terms_json(v) if isinstance(v, Terms) else v for v in values]
        for item, values in snap["entries"].items()
    }
    snap["checkpoints"] = dict(sorted(queue.checkpoints.items()))
    return snap


def _terms_json(terms: Terms) -> Json:
    return {
        "contractVersion": terms.contract_version,
        "urgency": terms.urgency.name,
        "deadline": terms.deadline,
        "capabilities": [list(c) for c in terms.capabilities],
        "dependencies": sorted(terms.dependencies),
        "budget": dict(sorted(terms.budget.items())),
        "risk": terms.risk.value,
        "gated": terms.gated,
    }


def _order(entry: Entry) -> tuple[int, str]:
    return entry.key, entry.work_item_id
