"""One leased run of a capability: start (or continue) under an Execution Lease, renew it,
run the capability with a :class:`CapabilityContext`, and end it with the matching Command.

Temporal-free: it talks to the Group Authority through an :class:`OwnerChannel` (the agent
worker's capability activity passes one that signs Commands with the agent's key and sends them
as Updates), so its rules are the same wherever it runs.

* **Start.** ``work.start`` under the dispatched Ownership Epoch gives a new Execution Lease.
  A retried run (the same Session, the item still ``active`` under its lease) continues under
  that lease instead; anything else (another owner, a higher epoch, a settled item) ends the
  run as ``not_started``.
* **Renewal.** Every ``lease_seconds / 3`` the lease is renewed; progress reports and
  checkpoints ride on renewals. A renewal refused with ``WORK_LEASE_EXPIRED`` or
  ``WORK_STALE_OWNERSHIP`` means this runtime is fenced: from then on ``ctx.tool`` refuses new
  side effects (spec 11.5) and the outcome is ``fenced``.
* **Budgets.** Each run stops with ``work.fail`` when it exceeds the contract's
  ``toolCallLimit`` (``TOOL_BUDGET_EXHAUSTED``; every ``ctx.tool`` call of the run counts) or
  ``wallClockSecondsLimit`` (``WALL_CLOCK_BUDGET_EXHAUSTED``; retries included). Both count per
  run: a resumed run starts counting again.
* **Usage** (``mwp.agent.usage``). The run counts what it consumes (each tool call it
  executes, what a tool declares, its wall-clock seconds) and records what is not yet recorded
  with one ``resource_usage_record`` before the Command that releases or ends the lease
  (``work.checkpoint``, ``work.block``, ``work.submit``, ``work.fail``). A tool call whose cost
  would pass what the WorkItem has left is not run, and a record the Group refuses as
  ``BUDGET_EXCEEDED`` stops the run: either way the item is blocked with a resolution naming
  the exhausted dimension (MWP-AUT-004). A Group deciding under rules before the ledger refuses
  the kind; the run then records nothing more and keeps its per-run limits.
* **Checkpoints** are JSON states stored content-addressed in the object store
  (``checkpoints/<sha256 hex>``) and named in the Group by their ``sha256:`` reference, so any
  later owner, on any machine sharing the store, resumes from the latest one. In gateway
  mode (:class:`RunContent` over the gateway) they are Artifacts of the Group instead.
* **Late results.** A submission refused because the run was fenced is kept for audit
  (``late-results/...`` in the store) and never completes the item (spec 11.5).
* **Offline** (spec 11.5, gateway mode: an :class:`~mwp.agent.offline.OfflineSupport`,
  consulted through ``mwp.agent.offline_guard``). A run whose channel raises
  :class:`~mwp.agent.offline.Disconnected` while it holds its lease goes on alone until its
  grace deadline: ``ctx.checkpoint`` and ``ctx.progress`` are buffered, signed with the
  bounded-offline-execution binding and the usage not recorded yet (its state kept in the
  store and uploaded on reconnect); ``ctx.tool`` runs only tools declared ``reversible``,
  checked against the token already held; publishing, blocking, recording usage and
  submitting need the Group, so the run ends there as ``offline``, as it does at the grace
  deadline. The reconnecting runtime reconciles what it buffered before the new Session
  starts the work again from the latest checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn, Protocol

from mwp.agent.actions import (
    WorkItemFacts,
    accepts_idempotency_key,
    publish_command,
    resolve_tool,
    tool_name,
)
from mwp.agent.context import (
    Blocked,
    CapabilityContext,
    CapabilityFailure,
    Preempted,
    ResourceAccess,
)
from mwp.agent.declaration import Agent, CapabilitySpec
from mwp.agent.ledger import ToolLedger
from mwp.agent.offline import Disconnected, OfflineRun, OfflineSupport
from mwp.agent.offline_guard import OfflineGuard
from mwp.agent.progress import (
    OwnerCommand,
    Progress,
    Submission,
    block_command,
    checkpoint_command,
    progress_command,
    submit_command,
)
from mwp.agent.usage import RunUsage, Spent, exhausted
from mwp.client import utc_now
from mwp.contracts.agent import ExecutionOrder, ExecutionOutcome
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.resource_usage import RECORD_KIND, RECORDED_KIND, ResourceUsage
from mwp.core.idempotency import tool_key
from mwp.core.log.event_log import group_segment
from mwp.core.trust.resource_scope import ResourceScope
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.stores.artifacts import ArtifactStore, StoredContent
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = (
    "MWP-AUT-004",
    "MWP-IDN-003",
    "MWP-WRK-013",
    "MWP-WRK-015",
    "MWP-WRK-017",
    "MWP-WRK-018",
    "MWP-WRK-019",
)

Json = dict[str, Any]
log = logging.getLogger(__name__)

# Refusals that mean "this run no longer holds the item": stop acting, keep results for audit.
# A newer Session of the agent revoked the leases of the run's (a reconnected runtime's runs).
FENCED_CODES = frozenset(
    {ErrorCode.WORK_LEASE_EXPIRED, ErrorCode.WORK_STALE_OWNERSHIP, ErrorCode.AUTH_STALE_SESSION}
)
CHECKPOINT_PREFIX = "checkpoints/"
LATE_RESULT_PREFIX = "late-results/"
# The failure code of work given back after an upgrade of the agent its pins cannot follow.
INCOMPATIBLE_UPGRADE = "AGENT_CARD_INCOMPATIBLE"
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


class LeaseLost(Exception):  # noqa: N818 (a state, like Preempted)
    """Raised by ``ctx.tool`` and other side effects once the run is fenced."""


class OwnerChannel(Protocol):
    """How a run reaches its Group Authority (signing and sending are the channel's job)."""

    async def send(self, command: OwnerCommand) -> Json:
        """The receipt of the signed Command; a refusal raises :class:`MwpError`."""
        ...

    async def work_item(self, work_item_id: str) -> Json:
        """The Authority's current view of the WorkItem."""
        ...

    async def preemption_requested(self) -> bool:
        """Whether the Worker Scheduler asked this run to stop at its next checkpoint."""
        ...


class ToolAuthorizer(Protocol):
    """What allows a tool call's side effect in gateway mode: the run's capability token
    (:class:`mwp.agent.tokens.TokenHolder`), checked locally and presented to the gateway."""

    async def authorize(
        self, tool: str, cost: ResourceUsage, lease_id: str, access: ResourceAccess | None
    ) -> None:
        """Return when the call may run; a refusal raises :class:`MwpError`."""
        ...

    def authorize_offline(
        self, tool: str, cost: ResourceUsage, lease_id: str, access: ResourceAccess | None
    ) -> None:
        """The same, while the Group is unreachable: checked against what is held."""
        ...


class RunContent(Protocol):
    """Where a run reads and writes Artifact bytes and checkpoints (the object store, or the
    gateway's Artifact routes in gateway mode)."""

    async def put_artifact(self, data: bytes) -> StoredContent: ...

    async def get_artifact(self, content_hash: str) -> bytes:
        """The bytes, hash-checked."""
        ...

    async def put_checkpoint(self, state: Any) -> str:
        """Store ``state`` (JSON); its ``sha256:`` reference."""
        ...

    async def get_checkpoint(self, ref: str) -> Any: ...


class StoreContent:
    """:class:`RunContent` in an object store shared by every runtime of the Organization."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.artifacts = ArtifactStore(store)

    async def put_artifact(self, data: bytes) -> StoredContent:
        return await asyncio.to_thread(self.artifacts.put, data)

    async def get_artifact(self, content_hash: str) -> bytes:
        return await asyncio.to_thread(self.artifacts.get, content_hash)

    async def put_checkpoint(self, state: Any) -> str:
        return await asyncio.to_thread(store_checkpoint, self.store, state)

    async def get_checkpoint(self, ref: str) -> Any:
        return await asyncio.to_thread(load_checkpoint, self.store, ref)


def checkpoint_key(ref: str) -> str:
    return CHECKPOINT_PREFIX + ref.removeprefix("sha256:")


def store_checkpoint(store: ObjectStore, state: Any) -> str:
    """Store ``state`` (JSON) content-addressed; its ``sha256:`` reference."""
    data = canonicalize(state)
    ref = "sha256:" + hashlib.sha256(data).hexdigest()
    store.put_if_absent(checkpoint_key(ref), data)
    return ref


def load_checkpoint(store: ObjectStore, ref: str) -> Any:
    """The state behind ``ref``, hash-checked (``LookupError`` if absent or altered)."""
    data = store.get(checkpoint_key(ref))
    if data is None:
        raise LookupError(f"checkpoint {ref} is not in the store")
    if "sha256:" + hashlib.sha256(data).hexdigest() != ref:
        raise LookupError(f"checkpoint {ref} does not match its hash")
    return parse_bytes(data)


def retry_delay(policy: Mapping[str, Any], attempt: int) -> float:
    """Seconds before attempt ``attempt + 1`` under a Work Contract's ``retryPolicy``."""
    backoff = policy.get("backoff", "none")
    if backoff == "none":
        return 0.0
    ceiling = _duration_seconds(str(policy.get("maxDelay", "PT5M")))
    delay = 1.0 if backoff == "fixed" else 2.0 ** min(attempt - 1, 64)  # no float overflow
    return min(delay, ceiling)


def _duration_seconds(text: str) -> float:
    """An ISO 8601 duration of days, hours, minutes and seconds (``P1DT2H3M4.5S``)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        return 300.0
    d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return ((d * 24 + h) * 60 + m) * 60 + s


def refusal(error: MwpError) -> Json:
    """What the Authority said, as JSON (for outcomes and audit records)."""
    return {"code": error.code.value, "message": error.message}


@contextlib.contextmanager
def _lease_lost_when_fenced() -> Iterator[None]:
    """Inside a capability, a fenced refusal is :class:`LeaseLost` (stop acting), not a
    failure of the capability; other refusals pass unchanged."""
    try:
        yield
    except MwpError as error:
        if _fenced(error):
            raise LeaseLost(str(error)) from error
        raise


@contextlib.contextmanager
def _needs_the_group(run: LeasedExecution) -> Iterator[None]:
    """What a run cannot do offline (publish, block, record usage) ends it there."""
    try:
        yield
    except Disconnected as lost:
        run.lost_group(lost)
        raise LeaseLost(f"offline: {lost.message}") from lost


def _already_published(error: MwpError, content_hash: str) -> bool:
    """The Group already holds this exact content as an Artifact (published by another
    WorkItem, or by this one before a retry): Artifacts are immutable and known by their hash,
    so this one may name it in its submission as it is."""
    return (
        error.code is ErrorCode.INVALID_STATE_TRANSITION
        and (error.details or {}).get("contentHash") == content_hash
        and "artifactId" in (error.details or {})
    )


def _fenced(error: MwpError) -> bool:
    return error.code in FENCED_CODES


def _no_ledger(error: MwpError) -> bool:
    """The Group decides under rules before the ledger: the record kind is unknown there."""
    return error.code is ErrorCode.INVALID_COMMAND and "not a Command" in error.message


def _budget_dimension(error: MwpError) -> str:
    return str((error.details or {}).get("dimension", "a budget dimension"))


def _budget_detail(error: MwpError) -> str:
    d = error.details or {}
    where = d.get("workItemId") or d.get("missionId") or "the WorkItem"
    return f"limit {d.get('limit')} at {where}, {d.get('used')} used, {d.get('requested')} more"


def recorded_payload(receipt: Json) -> Json:
    """The ``resource_usage_recorded`` Event's payload in a receipt."""
    payload: Json = next(e for e in receipt["events"] if e["kind"] == RECORDED_KIND)["payload"]
    return payload


class LeasedExecution:
    """One run of ``agent``'s capability for ``order`` (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        order: ExecutionOrder,
        channel: OwnerChannel,
        store: ObjectStore,
        *,
        beat: Callable[[], None] = lambda: None,
        clock: Callable[[], str] = utc_now,
        card_version: int | None = None,
        content: RunContent | None = None,
        authorizer: ToolAuthorizer | None = None,
        offline: OfflineSupport | None = None,
    ) -> None:
        self.agent = agent
        self.authorizer = authorizer  # None: the operators' trusted mode (no tokens)
        self.guard = OfflineGuard(offline, agent, order)  # no support: a lost Group stops it
        # The Agent Card version the Registry holds (a registered card may be newer than the
        # declaration's): what the Authority checks a published manifest's producer against.
        self.card_version = card_version or agent.card_info.card_version
        self.order = order
        self.channel = channel
        self.store = store
        self.artifacts = ArtifactStore(store)
        # Artifacts and checkpoints; the tool ledger and audit records stay in ``store``.
        self.content: RunContent = content or StoreContent(store)
        self.ledger = ToolLedger(store, artifacts=self.artifacts)
        self.beat = beat
        self.now = clock
        self.lease_id: str | None = None
        self.lease_expires_at: str | None = None
        self.checkpoint_ref: str | None = None  # the latest this run resumed from or took
        self.fenced: MwpError | None = None
        self.contract: Json = {}
        self.spec: CapabilitySpec | None = None
        self.resume_state: Any = None
        self.submission: Submission | None = None  # what the capability returned
        self.preempt = False
        self.tool_calls = 0
        self.usage: RunUsage | None = None  # set when the capability starts
        self.released: str | None = None  # why the run gave its lease back, once it did
        self._renewal_lock = asyncio.Lock()

    # --- the run ---------------------------------------------------------------------------

    async def run(self) -> ExecutionOutcome:
        view = await self.channel.work_item(self.order.work_item_id)
        self.contract = view["contract"]
        self.usage = RunUsage(view, asyncio.get_running_loop().time())
        unserved = self._unserved_pins(view)
        if unserved:
            return await self._give_back(view, unserved)
        self.spec = self.agent.capability_for(self.contract["requiredCapabilities"])
        if self.spec is None:
            return ExecutionOutcome("not_started", detail={"reason": "no declared capability"})
        started = await self._start(view)
        if started is not None:
            return started
        ref = self.order.resume_from or (view.get("checkpoint") or {}).get("checkpointRef")
        if ref is not None:
            self.resume_state = await self.content.get_checkpoint(ref)
            self.checkpoint_ref = ref
        renewals = asyncio.create_task(self._renew_forever())
        try:
            return await self._run_capability(self.spec)
        finally:
            renewals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewals

    def _unserved_pins(self, view: Json) -> list[str]:
        """MWP-IDN-003 across an upgrade of the agent: the assignment pinned an Agent Card and
        capability versions. A runtime serving another card version continues the work when it
        still declares every pinned capability version (a compatible upgrade: its Artifacts
        record the pinned card), and names the pins it no longer serves otherwise."""
        owner = view.get("owner") or {}
        pinned = owner.get("agentCardVersion")
        if pinned is None or pinned == self.card_version:
            return []
        unserved = [
            f"{pin['id']}@{pin['version']}"
            for pin in owner.get("capabilityPins", [])
            if self.agent.find_capability(pin["id"], pin["version"]) is None
        ]
        if not unserved:
            self.card_version = int(pinned)
        return unserved

    async def _give_back(self, view: Json, unserved: list[str]) -> ExecutionOutcome:
        """An incompatible upgrade: execution must not go on under the old acceptance. The
        work's latest checkpoint stays named in the Group; the owner fails the item, which
        returns it to the Coordinator to offer again at the new card (renewed acceptance)."""
        lease = view.get("executionLease") or {}
        if view["state"] == "active" and lease.get("holderAgentId") == self.order.agent_id:
            self.lease_id = lease.get("leaseId")
        pinned = (view.get("owner") or {}).get("agentCardVersion")
        failure = CapabilityFailure(
            f"the assignment pins Agent Card v{pinned} with {', '.join(unserved)}; this runtime "
            f"serves Agent Card v{self.card_version}, which does not: offer the WorkItem again",
            code=INCOMPATIBLE_UPGRADE,
        )
        return await self._fail(INCOMPATIBLE_UPGRADE, failure, 0)

    async def _start(self, view: Json) -> ExecutionOutcome | None:
        """None once a lease is held; otherwise why this run cannot start."""
        o = self.order
        lease = view.get("executionLease")
        if (
            view["state"] == "active"
            and lease is not None
            and lease["holderAgentId"] == o.agent_id
            and lease["ownershipEpoch"] == o.ownership_epoch
            and lease["sessionEpoch"] == o.session_epoch
        ):
            self.lease_id = lease["leaseId"]  # a retried run of this Session continues
            self.lease_expires_at = lease.get("expiresAt")
            return None
        payload: Json = {"ownershipEpoch": o.ownership_epoch, "leaseSeconds": o.lease_seconds}
        try:
            receipt = await self.channel.send(OwnerCommand("work.start", o.work_item_id, payload))
        except MwpError as error:
            return ExecutionOutcome("not_started", detail={"refusal": refusal(error)})
        started = next(e for e in receipt["events"] if e["kind"] == "work.started")
        self.lease_id = started["payload"]["executionLease"]["leaseId"]
        self.lease_expires_at = started["payload"]["executionLease"]["expiresAt"]
        return None

    async def _run_capability(self, spec: CapabilitySpec) -> ExecutionOutcome:
        context: CapabilityContext = _LeasedContext(self)
        policy = self.contract.get("retryPolicy") or {}
        wall_clock = self.contract.get("budget", {}).get("wallClockSecondsLimit")
        deadline = None if wall_clock is None else asyncio.get_running_loop().time() + wall_clock
        if wall_clock is not None:
            self.run_usage.wall_cap = math.ceil(wall_clock)
        attempt = 1
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    self.submission = submission = await spec.fn(context)
                break
            except TimeoutError as exc:  # the contract's wall-clock budget ran out
                failure = CapabilityFailure(
                    f"the run exceeded wallClockSecondsLimit {wall_clock}",
                    code="WALL_CLOCK_BUDGET_EXHAUSTED",
                )
                failure.__cause__ = exc
                return await self._fail(failure.code, failure, attempt)
            except Preempted:
                return self._outcome("preempted")
            except Blocked as blocked:
                return self._outcome("blocked", resolution=blocked.required_resolution)
            except LeaseLost:
                return self._outcome(self.released or "fenced")
            except Exception as exc:  # the capability failed: retried or reported
                code = exc.code if isinstance(exc, CapabilityFailure) else "CAPABILITY_ERROR"
                if (
                    self.fenced is None
                    and code in policy.get("retryableFailures", ())
                    and attempt < int(policy.get("maxAttempts", 1))
                ):
                    # Same op IDs, same tool keys: what already succeeded is not redone.
                    await asyncio.sleep(retry_delay(policy, attempt))
                    attempt += 1
                    continue
                return await self._fail(code, exc, attempt)
        assert self.lease_id is not None
        if self.released is not None:  # it caught Blocked and returned: the block stands
            return self._outcome(self.released)
        self.guard.notice(self.lease_id, self.lease_expires_at)
        if self.offline_run is not None:  # a submission waits for the Group: a later run
            return self._outcome("offline", unsent="submission")
        command = submit_command(
            self.order.work_item_id,
            ownership_epoch=self.order.ownership_epoch,
            lease_id=self.lease_id,
            submission=submission,
            contract=self.contract,
        )
        try:
            await self.settle_usage()
        except Blocked as blocked:  # the run consumed past the budget: it may not submit
            return self._outcome("blocked", resolution=blocked.required_resolution)
        except LeaseLost:
            return self._outcome("fenced")
        except Disconnected:  # lost just now: the submission waits for a later run
            if self.offline_run is None:
                raise
            return self._outcome("offline", unsent="submission")
        except MwpError as error:  # the Group refused the record otherwise: not submitted
            return await self._fail("USAGE_NOT_RECORDED", error, attempt)
        try:
            await self._send_locked(command)
        except MwpError as error:
            if not _fenced(error):
                raise
            self.fenced = error
            await asyncio.to_thread(self._keep_late_result, command)
            return self._outcome("fenced", lateResult=True)
        return self._outcome("submitted")

    async def _fail(self, code: str, exc: Exception, attempts: int) -> ExecutionOutcome:
        """``work.fail`` with Evidence of the failure (stored in the object store)."""
        if self.fenced is not None or self.offline_run is not None:
            return self._outcome("fenced", failure=code)
        o = self.order
        record = {
            "workItemId": o.work_item_id,
            "ownershipEpoch": o.ownership_epoch,
            "leaseId": self.lease_id,
            "failureCode": code,
            "error": f"{type(exc).__name__}: {exc}"[:2000],
            "attempts": attempts,
            "recordedAt": self.now(),
        }
        data = canonicalize(record)
        digest = hashlib.sha256(data).hexdigest()
        await asyncio.to_thread(self.store.put_if_absent, f"failure-evidence/{digest}.json", data)
        attempted = f" after {attempts} attempt(s)" if attempts else ""
        payload = {
            "ownershipEpoch": o.ownership_epoch,
            "reason": f"{code}{attempted}: {exc}"[:1000],
            "failureCode": code,
            "failureEvidenceIds": [f"urn:mwp:evidence:failure:{digest}"],
        }
        if self.lease_id is not None:  # named when the item is active under this run's lease
            payload["leaseId"] = self.lease_id
        try:
            await self.record_pending()
        except MwpError as error:  # the failure ends the item all the same
            log.warning("usage of a failed run not recorded: %s", error.code.value)
        try:
            await self._send_locked(OwnerCommand("work.fail", o.work_item_id, payload))
        except MwpError as error:
            if not _fenced(error):
                raise
            return self._outcome("fenced", failure=code)
        return self._outcome("failed", failure=code, attempts=attempts)

    def _outcome(self, status: str, **detail: Any) -> ExecutionOutcome:
        if self.fenced is not None:
            detail["refusal"] = refusal(self.fenced)
        if self.offline_run is not None:
            # Ended alone: what it buffered is reconciled on reconnect, then a run of the new
            # Session continues from the latest checkpoint.
            detail.update(self.guard.detail())
            if status != "preempted":
                status = "offline"
        elif self.fenced is not None and status != "fenced" and status != "preempted":
            status = "fenced"
        return ExecutionOutcome(status, self.lease_id, detail)

    def _keep_late_result(self, command: OwnerCommand) -> None:
        """A fenced run's result, kept for audit; it can never complete the item."""
        o = self.order
        record = {
            "agentId": o.agent_id,
            "groupId": o.group_id,
            "workItemId": o.work_item_id,
            "ownershipEpoch": o.ownership_epoch,
            "leaseId": self.lease_id,
            "refusal": refusal(self.fenced) if self.fenced else None,
            "command": {"kind": command.kind, "payload": command.payload},
            "keptAt": self.now(),
        }
        key = "/".join(
            (
                LATE_RESULT_PREFIX.rstrip("/"),
                group_segment(o.group_id),
                group_segment(o.work_item_id),
                f"{o.ownership_epoch}-{hashlib.sha256(canonicalize(record)).hexdigest()[:16]}",
            )
        )
        self.store.put_if_absent(key + ".json", canonicalize(record))

    # --- the lease -------------------------------------------------------------------------

    async def _renew_forever(self) -> None:
        interval = max(0.5, self.order.lease_seconds / 3)
        while self.fenced is None:
            await asyncio.sleep(interval)
            self.beat()
            if self.offline_run is not None:  # nobody renews a lease offline: it runs out
                self._stop_when_over()
                continue
            with contextlib.suppress(MwpError):  # a fenced renewal is recorded by _renew
                await self.renew()
            with contextlib.suppress(Exception):  # the query is advisory; the next one retries
                self.preempt = self.preempt or await self.channel.preemption_requested()

    async def renew(
        self, progress: Progress | None = None, checkpoint_ref: str | None = None
    ) -> None:
        assert self.lease_id is not None
        command = progress_command(
            self.order.work_item_id,
            ownership_epoch=self.order.ownership_epoch,
            lease_id=self.lease_id,
            progress=progress,
            lease_seconds=self.order.lease_seconds,
        )
        if checkpoint_ref is not None:
            command.payload["checkpointRef"] = checkpoint_ref
        await self._send_locked(command)

    async def _send_locked(self, command: OwnerCommand) -> Json:
        """Send one owner Command at a time (renewals must not race a release)."""
        if self.fenced is not None:
            raise self.fenced
        if self.offline_run is not None:
            raise Disconnected("this run went on offline")
        async with self._renewal_lock:
            try:
                receipt = await self.channel.send(command)
            except Disconnected as lost:
                self.lost_group(lost)
                raise
            except MwpError as error:
                if _fenced(error):
                    self.fenced = error
                raise
        for event in receipt["events"]:  # a renewal moves the lease's expiry on
            lease = event.get("payload", {}).get("executionLease")
            if event.get("kind") == "work.progressed" and isinstance(lease, dict):
                self.lease_expires_at = lease.get("expiresAt", self.lease_expires_at)
        return receipt

    # --- offline (mwp.agent.offline_guard) ----------------------------------------------------

    @property
    def offline_run(self) -> OfflineRun | None:
        return self.guard.run

    def lost_group(self, lost: Disconnected) -> None:
        """Go on offline (once); a run that cannot raises ``lost``."""
        self.guard.lose(lost, self.lease_id, self.lease_expires_at)

    def _stop_when_over(self) -> None:
        """An offline run past its grace, or whose runtime reconnected, does nothing more."""
        if self.fenced is None:
            self.fenced = self.guard.over(self.now())

    async def buffer(self, progress: Progress, state: Any = None) -> None:
        """Buffer a checkpoint (or, without ``state``, progress) of this offline run, with
        the usage it has not recorded yet."""
        if state is not None:  # a local copy too, in the agent's own store
            await asyncio.to_thread(store_checkpoint, self.store, state)
        due = self.run_usage.due(asyncio.get_running_loop().time()) or {}
        try:
            ref, delta = self.guard.buffer(
                progress.to_json(), state, latest_ref=self.checkpoint_ref, due=due
            )
        except MwpError as error:
            if _fenced(error):  # past the grace, or the runtime reconnected meanwhile
                self.fenced = error
                raise LeaseLost(str(error)) from error
            raise
        self.run_usage.recorded(delta)  # charged when the buffer is reconciled
        self.checkpoint_ref = ref
        if state is not None:
            self.resume_state = state

    async def authorize_tool(
        self,
        fn: Callable[..., Awaitable[Any]] | str,
        cost: ResourceUsage,
        access: ResourceAccess | None,
    ) -> None:
        """The capability token allows the call: presented to the gateway, or, offline, a
        reversible call checked against the token held."""
        assert self.authorizer is not None
        name = tool_name(self.agent, fn)
        if self.offline_run is None:
            try:
                with _lease_lost_when_fenced():
                    await self.authorizer.authorize(name, cost, self.require_lease(), access)
                return
            except Disconnected as lost:
                self.lost_group(lost)
                self.guard.require_reversible(fn)
        self.authorizer.authorize_offline(name, cost, self.require_lease(), access)

    # --- usage -----------------------------------------------------------------------------

    @property
    def run_usage(self) -> RunUsage:
        assert self.usage is not None, "the run has not read its WorkItem yet"
        return self.usage

    async def record_pending(self) -> None:
        """One ``resource_usage_record`` of what the run consumed and did not record yet
        (nothing when there is nothing, no lease, or the Group keeps no ledger)."""
        usage = self.run_usage
        delta = usage.due(asyncio.get_running_loop().time())
        if delta is None or not usage.ledger or self.lease_id is None:
            return
        o = self.order
        payload = {"ownershipEpoch": o.ownership_epoch, "leaseId": self.lease_id, "delta": delta}
        try:
            receipt = await self._send_locked(OwnerCommand(RECORD_KIND, o.work_item_id, payload))
        except MwpError as error:
            if not _no_ledger(error):
                raise
            usage.ledger = False
            log.info("the Group of %s keeps no usage ledger", o.work_item_id)
            return
        usage.recorded(delta)
        usage.learned(recorded_payload(receipt))

    async def settle_usage(self) -> None:
        """Record what is pending before a Command that releases or ends the lease. A record
        refused as ``BUDGET_EXCEEDED`` blocks the item (:class:`Blocked`); a fenced one is
        left to that Command, which is refused the same way."""
        try:
            await self.record_pending()
        except MwpError as error:
            if _fenced(error):
                return
            if error.code is not ErrorCode.BUDGET_EXCEEDED:
                raise
            await self.block_exhausted(_budget_dimension(error), _budget_detail(error))

    async def record_effects(self) -> None:
        """An external side effect is charged as soon as it is made: no offline checkpoint
        may carry one (the Group refuses those), so it must not wait for one."""
        if self.offline_run is not None:
            return
        with _lease_lost_when_fenced(), contextlib.suppress(Disconnected):
            await self.settle_usage()

    async def block_exhausted(self, dimension: str, detail: str) -> NoReturn:
        """``work.block`` of work whose budget is exhausted in ``dimension``."""
        resolution = exhausted(dimension, detail)
        command = block_command(
            self.order.work_item_id,
            ownership_epoch=self.order.ownership_epoch,
            lease_id=self.require_lease(),
            required_resolution=resolution,
        )
        with _lease_lost_when_fenced(), _needs_the_group(self):
            await self._send_locked(command)
        self.released = "blocked"
        raise Blocked(resolution)

    async def admit_tool_call(self, cost: ResourceUsage) -> None:
        """Block instead of running a tool call whose ``cost`` would pass what is left."""
        over = self.run_usage.overrun(cost)
        if over is None:
            return
        if self.offline_run is not None:  # blocking needs the Group: refused here
            raise MwpError(
                ErrorCode.BUDGET_EXCEEDED,
                f"this tool call needs {over.needed} {over.dimension}, {over.left} left",
            )
        await self.settle_usage()  # what the run consumed so far is charged first
        detail = f"this tool call needs {over.needed}, {over.left} left"
        await self.block_exhausted(over.dimension, detail)

    def charge_tool_call(self) -> None:
        """Count a tool call against the contract's ``toolCallLimit`` (per run)."""
        self.tool_calls += 1
        limit = self.contract.get("budget", {}).get("toolCallLimit")
        if limit is not None and self.tool_calls > limit:
            raise CapabilityFailure(
                f"tool call {self.tool_calls} exceeds toolCallLimit {limit}",
                code="TOOL_BUDGET_EXHAUSTED",
            )

    def require_lease(self) -> str:
        self.guard.notice(self.lease_id, self.lease_expires_at)
        self._stop_when_over()
        if self.fenced is not None:
            raise LeaseLost(f"the Execution Lease is lost: {self.fenced.code.value}")
        if self.released is not None:  # a capability that caught Blocked acts no more
            raise LeaseLost(f"the run released its Execution Lease: {self.released}")
        assert self.lease_id is not None
        return self.lease_id


class _LeasedContext(WorkItemFacts):
    """The :class:`CapabilityContext` of one leased run."""

    def __init__(self, run: LeasedExecution) -> None:
        o = run.order
        super().__init__(o.mission_id, o.group_id, o.work_item_id, o.ownership_epoch, run.contract)
        self._run = run

    @property
    def resume_state(self) -> Any:
        return self._run.resume_state

    @property
    def preemption_requested(self) -> bool:
        return self._run.preempt

    async def read_artifact(self, content_hash: str) -> bytes:
        return await self._run.content.get_artifact(content_hash)

    async def tool(
        self,
        op_id: str,
        fn: Callable[..., Awaitable[Any]] | str,
        /,
        *args: Any,
        spend: ResourceUsage | None = None,
        access: ResourceAccess | None = None,
        **kwargs: Any,
    ) -> Any:
        r = self._run
        r.require_lease()  # no new side effect without a valid lease (spec 11.5)
        if access is not None:  # nothing outside the Work Contract runs, whatever the token
            ResourceScope.of(r.contract).check_access(access.operation, access.resources)
        if r.offline_run is not None:
            r.guard.require_reversible(fn)
        r.charge_tool_call()
        tool = resolve_tool(r.agent, fn)
        key = tool_key(r.order.mission_id, r.order.work_item_id, r.order.ownership_epoch, op_id)
        done = await r.ledger.recorded(key)
        if done is not None:  # it already ran (this run or an earlier one): charged then
            return done.result
        cost = ResourceUsage(tool_calls=1)
        if spend is not None:  # the call itself is one more tool call
            cost = replace(spend, tool_calls=spend.tool_calls + 1)
        await r.admit_tool_call(cost)
        usage = r.run_usage
        usage.add(cost)  # reserved at once, so concurrent calls see it
        executed = False
        effects = cost.external_side_effects

        async def charged(*a: Any, **k: Any) -> Any:
            nonlocal executed, effects
            if r.authorizer is not None:  # refused: nothing runs, nothing is recorded
                await r.authorize_tool(fn, cost, access)
            executed = True  # charged once it runs, raising or not: the call was made
            result = await tool(*a, **k)
            if isinstance(result, Spent):
                usage.add(result.usage)
                effects += result.usage.external_side_effects
                return result.result
            return result

        try:
            return await r.ledger.run_once(
                key, charged, *args, pass_key=accepts_idempotency_key(tool), **kwargs
            )
        finally:
            if not executed:  # another caller recorded it first: it ran there, not here
                usage.add(cost, sign=-1)
            elif effects:
                await r.record_effects()

    async def publish(
        self,
        data: bytes,
        *,
        media_type: str,
        schema_uri: str,
        source_hashes: Sequence[str] = (),
    ) -> str:
        r = self._run
        lease_id = r.require_lease()
        assert r.spec is not None
        with _needs_the_group(r):
            content = await r.content.put_artifact(data)
        command = publish_command(
            r.agent,
            r.spec,
            content,
            media_type=media_type,
            schema_uri=schema_uri,
            source_hashes=source_hashes,
            mission_id=r.order.mission_id,
            group_id=r.order.group_id,
            work_item_id=r.order.work_item_id,
            ownership_epoch=r.order.ownership_epoch,
            lease_id=lease_id,
            created_at=r.now(),
            card_version=r.card_version,
        )
        with _lease_lost_when_fenced(), _needs_the_group(r):
            try:
                await r._send_locked(command)
            except Disconnected:
                raise
            except MwpError as error:
                if not _already_published(error, content.content_hash):
                    raise
        return content.content_hash

    async def progress(self, progress: Progress) -> None:
        r = self._run
        if r.offline_run is None:
            try:
                with _lease_lost_when_fenced():
                    await r.renew(progress)
                return
            except Disconnected as lost:
                r.lost_group(lost)
        r.require_lease()
        await r.buffer(progress)

    async def checkpoint(self, progress: Progress, state: Any = None) -> None:
        r = self._run
        lease_id = r.require_lease()
        if r.offline_run is None:
            try:
                return await self._checkpoint(progress, state, lease_id)
            except Disconnected as lost:
                r.lost_group(lost)
        # Offline: buffered; preemption waits too (nothing new may start meanwhile).
        await r.buffer(progress, state)

    async def _checkpoint(self, progress: Progress, state: Any, lease_id: str) -> None:
        r = self._run
        # Asked of the Scheduler while the state is stored; an answer still pending then is
        # awaited beside the renewal (each is a round trip), and a late "yes" releases the
        # lease at this same checkpoint.
        asking = None if r.preempt else asyncio.ensure_future(r.channel.preemption_requested())
        try:
            ref = None if state is None else await r.content.put_checkpoint(state)
            r.resume_state = state
            r.checkpoint_ref = ref or r.checkpoint_ref
            with _lease_lost_when_fenced():
                if asking is not None and not asking.done():
                    await asyncio.gather(r.renew(progress, ref), asking)
                    if not asking.result():
                        return
                    r.preempt = True
                elif asking is not None:
                    r.preempt = asking.result()
                if r.preempt:
                    await r.settle_usage()
                    command = checkpoint_command(
                        r.order.work_item_id,
                        ownership_epoch=r.order.ownership_epoch,
                        lease_id=lease_id,
                        progress=progress,
                        checkpoint_ref=ref,
                    )
                    await r._send_locked(command)  # releases the lease: queued again
                    raise Preempted(state)
                await r.renew(progress, ref)
        finally:
            if asking is not None and not asking.done():
                asking.cancel()  # the checkpoint ended otherwise (fenced, offline, failed)

    async def block(self, resolution: str, *, progress: Progress | None = None) -> NoReturn:
        r = self._run
        r.require_lease()
        with _lease_lost_when_fenced(), _needs_the_group(r):
            try:
                await r.record_pending()
            except MwpError as error:
                if error.code is not ErrorCode.BUDGET_EXCEEDED:
                    raise
                detail = _budget_detail(error)
                resolution = f"{resolution}; {exhausted(_budget_dimension(error), detail)}"
        command = block_command(
            r.order.work_item_id,
            ownership_epoch=r.order.ownership_epoch,
            lease_id=r.require_lease(),
            required_resolution=resolution,
            progress=progress,
        )
        with _lease_lost_when_fenced(), _needs_the_group(r):
            await r._send_locked(command)
        r.released = "blocked"
        raise Blocked(resolution)

    async def record_usage(self, usage: ResourceUsage) -> Mapping[str, Any]:
        r = self._run
        payload = {
            "ownershipEpoch": r.order.ownership_epoch,
            "leaseId": r.require_lease(),
            "delta": usage.delta(),
        }
        with _lease_lost_when_fenced(), _needs_the_group(r):
            receipt = await r._send_locked(OwnerCommand(RECORD_KIND, r.order.work_item_id, payload))
        recorded = recorded_payload(receipt)
        r.run_usage.learned(recorded)
        return recorded
