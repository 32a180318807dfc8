"""A local runner for unit tests of capabilities: the real leased run over an in-memory Group.

:class:`LocalCapabilityRunner` runs a capability with
:class:`~mwp.agent.execution.LeasedExecution`, the code the agent worker runs on Temporal,
talking to a :class:`LocalGroup` instead of a Group Authority. A capability tested this way
goes through the same ``work.start``, tool keys and ledger, checkpoint storage and resume,
publishing, submission checks, retries and budgets of its Work Contract, ``work.fail`` with
failure Evidence, and fencing (``LeaseLost``, late results kept for audit) as in production.

:class:`LocalGroup` is the :class:`~mwp.agent.execution.OwnerChannel` of one WorkItem that
the agent already owns (``queued`` under its Ownership Epoch). It records every Command it is
sent, answers an accepted one with a receipt and an Event shaped like the Authority's, and
keeps a WorkItem view that follows them (its lease after ``work.start``, its checkpoint
reference after each checkpoint, its state after a release). It refuses as the Authority
would when the item is in the wrong state (``INVALID_STATE_TRANSITION``), the Ownership Epoch
is fenced (``WORK_STALE_OWNERSHIP``), the lease is not the current one
(``WORK_LEASE_EXPIRED``) or a newer Session of the agent replaced the run's
(``AUTH_STALE_SESSION``); a test fences the run with
:meth:`LocalCapabilityRunner.fence` and asks for preemption with
:meth:`~LocalCapabilityRunner.request_preemption`, and cuts it off from the Group with
:meth:`~LocalCapabilityRunner.disconnect` (the run goes on offline, buffering into
:attr:`LocalCapabilityRunner.offline`, until :meth:`~LocalCapabilityRunner.reconnect` hands
the buffer back). It is not the Group Authority: nothing is
signed, and envelopes, Artifact manifests and timers are not checked; the Authority's rules
are proved by ``tests/unit/group``, and scheduling, renewals over time and crash recovery
across processes by the integration tests.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mwp.agent.declaration import Agent, CapabilitySpec
from mwp.agent.execution import FENCED_CODES, LeasedExecution
from mwp.agent.offline import DEFAULT_GRACE_SECONDS, Disconnected
from mwp.agent.offline_buffer import Buffered, OfflineBuffer
from mwp.agent.progress import (
    LEASE_RENEW,
    WORK_BLOCK,
    WORK_CHECKPOINT,
    WORK_FAIL,
    WORK_SUBMIT,
    OwnerCommand,
    Submission,
)
from mwp.client import utc_now
from mwp.contracts.agent import ExecutionOrder
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.api import Receipt
from mwp.core.group.clock import plus_seconds
from mwp.core.group.ids import derive_id, event_id
from mwp.core.group.policy import EXECUTION_LEASE_SECONDS
from mwp.core.group.resource_usage import RECORD_KIND as USAGE_RECORD
from mwp.core.group.resource_usage import RECORDED_KIND as USAGE_RECORDED
from mwp.core.group.resource_usage import charge_work_item
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import ObjectStore

Json = dict[str, Any]
WORKER_LEASE_SECONDS = 60  # what the agent worker asks for unless told otherwise


@dataclass(frozen=True)
class LocalOutcome:
    """How a local run ended, as :class:`LeasedExecution` reported it: ``submitted``,
    ``blocked``, ``preempted``, ``failed``, ``fenced`` or ``not_started``.

    ``command`` is the last Command the Group was sent (the submission, block, checkpoint,
    failure, or the one refused); ``submission`` what the capability returned; ``state`` the
    state it last checkpointed or resumed from; ``detail`` the outcome's detail (refusal,
    failure code, ``lateResult``...)."""

    status: str
    command: OwnerCommand
    submission: Submission | None = None
    state: Any = None
    lease_id: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


class LocalGroup:
    """An in-memory Group Authority for one owned WorkItem (see the module docstring)."""

    def __init__(
        self,
        agent_id: str,
        contract: Mapping[str, Any],
        *,
        mission_id: str,
        group_id: str,
        work_item_id: str,
        ownership_epoch: int,
        session_epoch: int,
        clock: Callable[[], str],
    ) -> None:
        self.agent_id = agent_id
        self.session_epoch = session_epoch
        self.session_replaced = False
        self.unreachable = False
        self.clock = clock
        self.commands: list[OwnerCommand] = []
        self.preempt = False
        self.sequence = 0
        self.view: Json = {
            "workItemId": work_item_id,
            "missionId": mission_id,
            "groupId": group_id,
            "revision": 1,
            "state": "queued",
            "contract": copy.deepcopy(dict(contract)),
            "owner": {"agentId": agent_id, "ownershipEpoch": ownership_epoch},
            "ownershipEpoch": ownership_epoch,
        }

    # --- the OwnerChannel ------------------------------------------------------------------

    async def send(self, command: OwnerCommand) -> Json:
        if self.unreachable:
            raise Disconnected("the local Group is disconnected")
        self.commands.append(command)
        kind = self._check(command)
        now = self.clock()
        receipt = self._accept(command, kind, kind.payload(self, command.payload, now), now)
        if "executionLease" not in self.view:
            self.preempt = False  # the item is no longer running: the request is answered
        return receipt

    async def work_item(self, work_item_id: str) -> Json:
        if self.unreachable:
            raise Disconnected("the local Group is disconnected")
        self._require_item(work_item_id)
        return copy.deepcopy(self.view)

    async def preemption_requested(self) -> bool:
        return self.preempt

    # --- what a test does to the Group -----------------------------------------------------

    def fence(self, code: ErrorCode) -> None:
        """``WORK_LEASE_EXPIRED``: the lease ran out (not renewed in time); its holder's
        Commands are refused from now on. ``WORK_STALE_OWNERSHIP``: the owner was fenced (its
        grant expired, the item may go to a higher Ownership Epoch). ``AUTH_STALE_SESSION``: a
        newer Session of the agent opened (it revoked this one's leases)."""
        if code not in FENCED_CODES:
            raise ValueError(f"{code} does not fence a run")
        if code is ErrorCode.AUTH_STALE_SESSION:
            self.session_replaced = True
            return
        lease = self.view.get("executionLease")
        if code is ErrorCode.WORK_LEASE_EXPIRED:
            if lease is None:
                raise ValueError("no Execution Lease is running")
            lease.update(state="expired", closureReason="lease expired")
        else:
            self.view["ownerFencedReason"] = "execution_lease_expired"
            self.view.pop("executionLease", None)

    # --- deciding --------------------------------------------------------------------------

    def _check(self, command: OwnerCommand) -> _Kind:
        """Refuse what the Authority refuses before any Event: state, epoch, lease."""
        self._require_item(command.work_item_id)
        kind = _KINDS.get(command.kind)
        if kind is None:
            raise MwpError(ErrorCode.INVALID_COMMAND, f"{command.kind} is not an owner Command")
        p, view = command.payload, self.view
        if self.session_replaced:
            raise MwpError(ErrorCode.AUTH_STALE_SESSION, "a newer Session of the agent opened")
        if view["state"] not in ((kind.state,) if isinstance(kind.state, str) else kind.state):
            raise MwpError(
                ErrorCode.INVALID_STATE_TRANSITION,
                f"{command.kind} is not permitted while the WorkItem is {view['state']}",
                details={"state": view["state"]},
            )
        fenced = "owner" not in view or "ownerFencedReason" in view
        if fenced or p.get("ownershipEpoch") != view["ownershipEpoch"]:
            raise MwpError(ErrorCode.WORK_STALE_OWNERSHIP, "the Ownership Epoch is fenced")
        lease = view.get("executionLease")
        if (
            kind.leased
            and view["state"] == "active"
            and (
                lease is None or lease["leaseId"] != p.get("leaseId") or lease["state"] != "active"
            )
        ):
            raise MwpError(ErrorCode.WORK_LEASE_EXPIRED, "not the current Execution Lease")
        return kind

    def _accept(self, command: OwnerCommand, kind: _Kind, payload: Json, now: str) -> Json:
        self.sequence += 1
        self.view["revision"] += 1
        group_id = self.view["groupId"]
        action_id = derive_id(group_id, "local-action", self.sequence)
        event: Json = {
            "protocolVersion": "0.1",
            "eventId": event_id(group_id, self.sequence),
            "groupId": group_id,
            "sequence": self.sequence,
            "aggregateRevision": self.view["revision"],
            "kind": kind.event,
            "actor": {"type": "agent", "id": self.agent_id},
            "cause": {"type": "command", "id": action_id},
            "workItemId": command.work_item_id,
            "occurredAt": now,
            "payload": payload,
        }
        kind.evolve(self.view, event)
        receipt = Receipt(
            action_id=action_id,
            actor_id=self.agent_id,
            # Nothing is signed locally: the hash of the unsigned Command stands in.
            signing_hash=sha256_ref(canonicalize({"kind": command.kind, **command.payload})),
            group_id=group_id,
            first_sequence=self.sequence,
            last_sequence=self.sequence,
            event_ids=(event["eventId"],),
            aggregate_revision=self.view["revision"],
            accepted_at=now,
        )
        return {"receipt": receipt.to_json(), "events": [copy.deepcopy(event)]}

    def _require_item(self, work_item_id: str) -> None:
        if work_item_id != self.view["workItemId"]:
            raise LookupError(f"this local Group holds no WorkItem {work_item_id}")

    def lease_document(self, lease_id: str, now: str, seconds: int, renewals: int) -> Json:
        v = self.view
        return {
            "leaseId": lease_id,
            "leaseType": "execution",
            "missionId": v["missionId"],
            "groupId": v["groupId"],
            "workItemId": v["workItemId"],
            "holderAgentId": self.agent_id,
            "sessionEpoch": self.session_epoch,
            "ownershipEpoch": v["ownershipEpoch"],
            "issuedAt": now,
            "startsAt": now,
            "expiresAt": plus_seconds(now, seconds),
            "state": "active",
            "renewalCount": renewals,
        }


# --- each owner Command: what it needs, its Event, and how the view follows (as the Authority)


@dataclass(frozen=True)
class _Kind:
    state: str | tuple[str, ...]  # the WorkItem state(s) the Command needs
    event: str  # the Event kind it is recorded as
    leased: bool  # whether, while active, it must name the current, unexpired Execution Lease
    payload: Callable[[LocalGroup, Json, str], Json]  # the Event payload (Group, payload, now)
    evolve: Callable[[Json, Json], None]  # how the view follows the Event


def _as_sent(group: LocalGroup, payload: Json, now: str) -> Json:
    return copy.deepcopy(payload)


def _unchanged(view: Json, event: Json) -> None:
    """An Artifact is the Mission's, not the WorkItem's: the view does not change."""


def _released(view: Json, state: str, event: Json) -> None:
    view.pop("executionLease", None)
    view["state"] = state
    if "progress" in event["payload"]:
        view["progress"] = event["payload"]["progress"]


def _checkpoint(view: Json, event: Json, lease_id: str) -> None:
    view["checkpoint"] = {
        "checkpointRef": event["payload"].get("checkpointRef"),
        "leaseId": lease_id,
        "checkpointedAt": event["occurredAt"],
    }


def _started(group: LocalGroup, payload: Json, now: str) -> Json:
    view = group.view
    lease_id = derive_id(view["groupId"], "execution-lease", view["workItemId"], group.sequence + 1)
    seconds = payload.get("leaseSeconds", EXECUTION_LEASE_SECONDS)
    lease = group.lease_document(lease_id, now, seconds, 0)
    return {"ownershipEpoch": payload["ownershipEpoch"], "executionLease": lease}


def _evolve_started(view: Json, event: Json) -> None:
    view["executionLease"] = event["payload"]["executionLease"]
    view["state"] = "active"


def _renewed(group: LocalGroup, payload: Json, now: str) -> Json:
    old = group.view["executionLease"]
    seconds = payload.get("leaseSeconds", EXECUTION_LEASE_SECONDS)
    lease = group.lease_document(old["leaseId"], now, seconds, old["renewalCount"] + 1)
    lease.update(issuedAt=old["issuedAt"], startsAt=old["startsAt"], lastRenewedAt=now)
    event: Json = {"executionLease": lease}
    event.update({k: payload[k] for k in ("progress", "checkpointRef") if k in payload})
    return event


def _evolve_progressed(view: Json, event: Json) -> None:
    p = event["payload"]
    view["executionLease"] = p["executionLease"]
    if "progress" in p:
        view["progress"] = p["progress"]
    if "checkpointRef" in p:  # a safe point that keeps the lease: a retried run resumes here
        _checkpoint(view, event, p["executionLease"]["leaseId"])


def _evolve_checkpointed(view: Json, event: Json) -> None:
    _checkpoint(view, event, event["payload"]["leaseId"])
    _released(view, "queued", event)


def _evolve_blocked(view: Json, event: Json) -> None:
    _released(view, "blocked", event)


def _submitted(group: LocalGroup, payload: Json, now: str) -> Json:
    evidence = copy.deepcopy(payload["evidence"])
    submission = {
        "artifactHashes": list(payload["artifactHashes"]),
        "evidenceIds": [e["evidenceId"] for e in evidence],
        "evidence": evidence,
        "submittedAt": now,
        "ownershipEpoch": payload["ownershipEpoch"],
        "leaseId": payload["leaseId"],
    }
    return {"submission": submission}


def _evolve_submitted(view: Json, event: Json) -> None:
    view["submission"] = event["payload"]["submission"]
    _released(view, "submitted", event)


def _failed(group: LocalGroup, payload: Json, now: str) -> Json:
    return {"reportedBy": "owner", **copy.deepcopy(payload)}


def _evolve_failed(view: Json, event: Json) -> None:
    view["failure"] = {"failedAt": event["occurredAt"], **event["payload"]}
    view.pop("owner", None)  # a failed item has no owner
    _released(view, "failed", event)


def _usage_recorded(group: LocalGroup, payload: Json, now: str) -> Json:
    usage = group.view.get("resourceUsage", {}).get("cumulative", {})
    line = charge_work_item(usage, group.view["contract"]["budget"], payload["delta"])
    return {**copy.deepcopy(payload), **line}


def _evolve_usage(view: Json, event: Json) -> None:
    # As the Group's view shows it; the local Group knows no ancestry beyond the contract.
    p = event["payload"]
    view["resourceUsage"] = {"cumulative": p["cumulative"], "remaining": p["remaining"]}


_KINDS: dict[str, _Kind] = {
    "work.start": _Kind("queued", "work.started", False, _started, _evolve_started),
    LEASE_RENEW: _Kind("active", "work.progressed", True, _renewed, _evolve_progressed),
    WORK_CHECKPOINT: _Kind("active", "work.checkpointed", True, _as_sent, _evolve_checkpointed),
    WORK_BLOCK: _Kind("active", "work.blocked", True, _as_sent, _evolve_blocked),
    WORK_SUBMIT: _Kind("active", "work.submitted", True, _submitted, _evolve_submitted),
    # The owner may also give up queued or blocked work (no lease to name then).
    WORK_FAIL: _Kind(("queued", "active", "blocked"), "work.failed", True, _failed, _evolve_failed),
    "artifact.publish": _Kind("active", "artifact.published", True, _as_sent, _unchanged),
    USAGE_RECORD: _Kind("active", USAGE_RECORDED, True, _usage_recorded, _evolve_usage),
}


# --- the runner ------------------------------------------------------------------------------


@dataclass
class LocalOffline:
    """The :class:`~mwp.agent.offline.OfflineSupport` of a local run: what it buffers while
    disconnected, with ``grace_seconds`` from ``lost_at`` (set by ``disconnect``)."""

    grace_seconds: int = DEFAULT_GRACE_SECONDS
    lost_at: str | None = None
    buffer: OfflineBuffer = field(default_factory=OfflineBuffer)

    def disconnected_at(self) -> str:
        return self.lost_at or utc_now()

    def membership_epoch(self, group_id: str) -> int | None:
        return None  # a local Group has no Membership

    def keep(self, session_epoch: int, entry: Buffered) -> None:
        self.buffer.keep(session_epoch, entry)

    def ended(self, session_epoch: int) -> bool:
        return self.buffer.sealed(session_epoch)

    def reachable(self) -> bool:
        return self.lost_at is None


class LocalCapabilityRunner:
    """Runs one WorkItem's capability locally, for unit tests (see the module docstring).

    Each :meth:`run` is one :class:`LeasedExecution` against the same :class:`LocalGroup`,
    so a run after a preemption starts under a new lease and resumes from the checkpoint the
    Group names, with the tool results recorded in ``store``."""

    def __init__(
        self,
        agent: Agent,
        contract: Mapping[str, Any],
        store: ObjectStore,
        *,
        mission_id: str = "urn:mwp:mission:local",
        group_id: str = "urn:mwp:group:local",
        work_item_id: str = "urn:mwp:work-item:local",
        ownership_epoch: int = 1,
        session_epoch: int = 1,
        lease_seconds: int = WORKER_LEASE_SECONDS,
        clock: Callable[[], str] = utc_now,
        offline_grace_seconds: int = DEFAULT_GRACE_SECONDS,
    ) -> None:
        spec = agent.capability_for(contract["requiredCapabilities"])
        if spec is None:
            raise LookupError(f"{agent.agent_id} declares none of the required capabilities")
        self.agent = agent
        self.spec: CapabilitySpec = spec
        self.contract = contract
        self.store = store
        self.artifacts = ArtifactStore(store)  # to read what the capability published
        self.mission_id = mission_id
        self.group_id = group_id
        self.work_item_id = work_item_id
        self.ownership_epoch = ownership_epoch
        self.clock = clock
        self.offline = LocalOffline(offline_grace_seconds)
        self.order = ExecutionOrder(
            agent.agent_id,
            session_epoch,
            group_id,
            mission_id,
            work_item_id,
            ownership_epoch,
            lease_seconds=lease_seconds,
        )
        self.group = LocalGroup(
            agent.agent_id,
            contract,
            mission_id=mission_id,
            group_id=group_id,
            work_item_id=work_item_id,
            ownership_epoch=ownership_epoch,
            session_epoch=session_epoch,
            clock=clock,
        )

    @property
    def commands(self) -> list[OwnerCommand]:
        """Every Command the Group was sent, accepted or refused, in order."""
        return self.group.commands

    @property
    def work_item(self) -> Json:
        """The Group's current view of the WorkItem (a copy)."""
        return copy.deepcopy(self.group.view)

    def request_preemption(self) -> None:
        """Ask the capability to stop at its next checkpoint (as the Worker Scheduler does)."""
        self.group.preempt = True

    def fence(self, code: ErrorCode = ErrorCode.WORK_LEASE_EXPIRED) -> None:
        """Fence the run: the Group refuses its next Commands with ``code``."""
        self.group.fence(code)

    def disconnect(self, *, lost_at: str | None = None) -> None:
        """Cut the run off from the Group (at ``lost_at``, default now): every Command and
        read fails as unreachable until :meth:`reconnect`."""
        self.group.unreachable = True
        self.offline.lost_at = lost_at or self.clock()

    def reconnect(self) -> list[Buffered]:
        """Reach the Group again under the next Session: what the run buffered, in order
        (a run still going buffers no more)."""
        self.group.unreachable = False
        self.offline.lost_at = None
        return self.offline.buffer.drain(self.order.session_epoch + 1)

    async def run(self) -> LocalOutcome:
        """One run of the capability, until it submits, blocks, is preempted, fails, is
        fenced or ends offline (``not_started`` if the Group refuses to start it)."""
        run = LeasedExecution(
            self.agent, self.order, self.group, self.store, clock=self.clock, offline=self.offline
        )
        outcome = await run.run()
        return LocalOutcome(
            outcome.status,
            self.commands[-1],  # every run from ``queued`` sends work.start first
            run.submission,
            run.resume_state,
            outcome.lease_id,
            outcome.detail,
        )
