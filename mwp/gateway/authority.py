"""What the gateway asks of the authority zone, and its implementation on Temporal.

The gateway decides nothing about a Group: a Command is forwarded to the Group's
MissionWorkflow as its Update (the client SDK's :meth:`MissionHandle.send_signed`), and what
comes back is the Authority's own answer. An accepted Command's outcome travels back as the
signed Events it appended, read from the Group Event log and verified against the
Organization's Registry evidence, so the Agent receives the same facts, with the same
signatures, as any later reader of the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from temporalio.client import WorkflowExecution

from mwp.client import ClientError, Identity, MwpClient, OrganizationRegistryClient
from mwp.client.missions import MissionHandle
from mwp.contracts.messages import group_authority
from mwp.contracts.mission import MISSION_WORKFLOW_TYPE, mission_workflow_id
from mwp.contracts.names import GROUP_ID, ORGANIZATION_ID
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.log.event_log import LogEntry
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import VerificationError, verify
from mwp.gateway.waits import wait_at_most
from mwp.log.delivery import CursorStore, ObjectCursorStore
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore

T = TypeVar("T")

CLAUSES: tuple[str, ...] = ("MWP-IDN-008",)  # the Session Epochs every frame is checked against

# Visibility (the GroupId search attribute) lags a new Mission by a moment.
GROUP_LOOKUP_SECONDS = 3.0
# How long an accepted Command's Events may take to appear in the Group log (the mirror
# runs as an activity after the Update returns).
RECEIPT_SECONDS = 15.0
# Without a hint, the log is read again after this long while a receipt's Events are awaited.
_LOG_POLL_SECONDS = 0.25
# How long the gateway answers from its last look at the Agents' Session Epochs, and at the
# Registry evidence it verifies receipts with: one Registry query per window, not per frame.
# A newer Session is thus noticed here within this window; the Group Authority itself checks
# the Session Epoch of every Command, so nothing stale is ever decided.
SESSION_CHECK_SECONDS = 1.0
EVIDENCE_SECONDS = 5.0
# Visibility pages of the running Missions' listing (one request per page).
LIST_PAGE_SIZE = 1000


@dataclass(frozen=True)
class Decided:
    """An accepted Command: its receipt and its signed Events, in Group order."""

    receipt: dict[str, Any]
    events: list[dict[str, Any]]
    duplicate: bool


class Authority(Protocol):
    """The authority zone as the gateway sees it."""

    @property
    def organization_id(self) -> str: ...

    @property
    def store(self) -> ObjectStore:
        """The object store of the Group Event logs (read only by the gateway)."""
        ...

    @property
    def cursors(self) -> CursorStore:
        """Where Agents' acknowledged Cursors are kept, in the authority zone."""
        ...

    async def evidence(self) -> RegistryEvidence: ...

    async def open_session(self, agent_id: str) -> int: ...

    async def session_epoch(self, agent_id: str) -> int | None: ...

    def notify(self, group_id: str, last_sequence: int) -> None: ...

    async def agent_card(self, agent_id: str) -> dict[str, Any] | None: ...

    async def decide(self, command: Mapping[str, Any]) -> Decided: ...

    async def work_item(self, group_id: str, work_item_id: str) -> dict[str, Any]:
        """The Group Authority's current view of the WorkItem (queried, not cached)."""
        ...

    async def mission_view(self, group_id: str) -> dict[str, Any]:
        """The Group Authority's current view of the Mission (queried, not cached)."""
        ...

    async def register_binding(self, identity: Identity) -> None:
        """Register a service key of the authority zone in the Registry (idempotent)."""
        ...

    def running_groups(self) -> AsyncIterator[str]:
        """The Group IDs of the running MissionWorkflows (the standing subscriptions' search)."""
        ...


def group_not_found(group_id: str | None) -> MwpError:
    # The same answer whether the Group is absent or merely undisclosed (spec 17.2).
    return MwpError(
        ErrorCode.GROUP_NOT_FOUND,
        "No such Group.",
        group_id=group_id,
        diagnostic=Diagnostic("gateway", "group-unknown"),
    )


class TemporalAuthority:
    """The authority zone of one Organization: its Temporal namespace and its object store."""

    def __init__(
        self,
        client: MwpClient,
        organization_id: str,
        registrar: Identity,
        store: ObjectStore,
        *,
        receipt_seconds: float = RECEIPT_SECONDS,
        group_lookup_seconds: float = GROUP_LOOKUP_SECONDS,
    ) -> None:
        self.client = client
        self.registry: OrganizationRegistryClient = client.registry(organization_id, registrar)
        self._store = store
        self._cursors = ObjectCursorStore(store)
        self.receipt_seconds = receipt_seconds
        self.group_lookup_seconds = group_lookup_seconds
        self._workflows: dict[str, str] = {}
        self._roots: dict[str, str | None] = {}  # a child Mission's root: its Organization
        self._epochs = SessionEpochs(self.registry.session_epochs, SESSION_CHECK_SECONDS)
        self._evidence = Recent(self.registry.evidence, EVIDENCE_SECONDS)
        self._appended: dict[str, asyncio.Event] = {}
        # Told of each decided ``work.start`` (Group, WorkItem) before its Events are awaited.
        self.started: Callable[[str, str], None] | None = None

    @property
    def organization_id(self) -> str:
        return self.registry.organization_id

    @property
    def store(self) -> ObjectStore:
        return self._store

    @property
    def cursors(self) -> CursorStore:
        return self._cursors

    async def evidence(self) -> RegistryEvidence:
        return await self.registry.evidence()

    async def open_session(self, agent_id: str) -> int:
        asked_at = asyncio.get_running_loop().time()
        epoch = await self.registry.open_session(agent_id)
        self._epochs.opened(agent_id, epoch, asked_at)  # seen at once: older sessions fenced
        return epoch

    async def session_epoch(self, agent_id: str) -> int | None:
        return await self._epochs.of(agent_id)

    async def agent_card(self, agent_id: str) -> dict[str, Any] | None:
        return await self.registry.agent_card(agent_id)

    def notify(self, group_id: str, last_sequence: int) -> None:
        """A hint that the Group's log grew: a receipt waiting for its Events reads it now."""
        appended = self._appended.pop(group_id, None)
        if appended is not None:
            appended.set()

    async def decide(self, command: Mapping[str, Any]) -> Decided:
        group_id = command.get("groupId")
        if not isinstance(group_id, str):
            raise MwpError(
                ErrorCode.INVALID_COMMAND,
                "A COMMAND frame carries a Group-scoped Command.",
                action_id=command.get("actionId"),
                diagnostic=Diagnostic("gateway", "no-group-id"),
            )
        workflow_id = await self._mission_workflow(group_id)
        mission_id = workflow_id.removeprefix(mission_workflow_id(""))
        mission = MissionHandle(self.client, mission_id, group_id)
        try:
            result = await mission.send_signed(command)
        except ClientError:  # the workflow is gone (closed, or never ran here)
            raise group_not_found(group_id) from None
        if self.started is not None and command.get("kind") == "work.start":
            self.started(group_id, str(command.get("workItemId")))
        receipt: dict[str, Any] = result["receipt"]
        events = await self._signed_events(group_id, receipt)
        return Decided(receipt, events, bool(result.get("duplicate")))

    async def work_item(self, group_id: str, work_item_id: str) -> dict[str, Any]:
        workflow_id = await self._mission_workflow(group_id)
        mission_id = workflow_id.removeprefix(mission_workflow_id(""))
        try:
            return await MissionHandle(self.client, mission_id, group_id).work_item(work_item_id)
        except ClientError:  # the workflow is gone (closed, or never ran here)
            raise group_not_found(group_id) from None

    async def mission_view(self, group_id: str) -> dict[str, Any]:
        workflow_id = await self._mission_workflow(group_id)
        mission_id = workflow_id.removeprefix(mission_workflow_id(""))
        try:
            return await MissionHandle(self.client, mission_id, group_id).view()
        except ClientError:  # the workflow is gone (closed, or never ran here)
            raise group_not_found(group_id) from None

    async def register_binding(self, identity: Identity) -> None:
        evidence = await self.registry.evidence_json()
        if identity.key_id not in {b["keyId"] for b in evidence.get("bindings", [])}:
            await self.registry.register_binding(identity)
        self._evidence.forget()

    async def running_groups(self) -> AsyncIterator[str]:
        query = (
            f"WorkflowType = '{MISSION_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' "
            f"AND {self._own_missions()}"
        )
        executions = self.client.temporal.list_workflows(query, page_size=LIST_PAGE_SIZE)
        async for execution in executions:
            group_id = execution.typed_search_attributes.get(GROUP_ID)
            # None yet for a Mission started a moment ago: its hints find it.
            if group_id and await self._ours(execution):
                yield group_id

    def _own_missions(self) -> str:
        """The visibility filter of the Missions that may be this Organization's: those it
        started, and those without the attribute (:meth:`_ours` looks closer at them). Other
        Organizations sharing the namespace are left out before any of their logs is read."""
        organization = _quoted(self.organization_id)
        return f"({ORGANIZATION_ID.name} = '{organization}' OR {ORGANIZATION_ID.name} IS NULL)"

    async def _ours(self, execution: WorkflowExecution) -> bool:
        """Whether a listed Mission may be this Organization's. A child Mission carries no
        OrganizationId (workflow code starts it, and sets none): it is its root Mission's,
        which a client started with the attribute. A Mission started before the attribute
        existed, or under such a root, may be anyone's: its log tells, read as before."""
        organization = execution.typed_search_attributes.get(ORGANIZATION_ID)
        if organization is None and execution.root_id not in (None, execution.id):
            organization = await self._root_organization(execution.root_id)
        return organization in (None, self.organization_id)

    async def _root_organization(self, root_id: str) -> str | None:
        # Set at the root's start and carried across continue-as-new: it never changes.
        if root_id not in self._roots:
            query = f"WorkflowId = '{_quoted(root_id)}'"
            found = {
                e.typed_search_attributes.get(ORGANIZATION_ID)
                async for e in self.client.temporal.list_workflows(query)
            }
            self._roots[root_id] = next(iter(found - {None}), None)
        return self._roots[root_id]

    async def _mission_workflow(self, group_id: str) -> str:
        known = self._workflows.get(group_id)
        if known is not None:
            return known
        query = (
            f"WorkflowType = '{MISSION_WORKFLOW_TYPE}' AND {GROUP_ID.name} = '{_quoted(group_id)}' "
            f"AND {self._own_missions()}"
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.group_lookup_seconds
        while True:
            found = [e async for e in self.client.temporal.list_workflows(query)]
            workflows = {e.id for e in found}
            if len(workflows) == 1 and await self._ours(found[0]):
                workflow_id = found[0].id
                self._workflows[group_id] = workflow_id
                return workflow_id
            # Another Organization's Group is answered as an unknown one is, as late.
            if len(workflows) > 1 or loop.time() >= deadline:
                raise group_not_found(group_id)
            await asyncio.sleep(0.2)

    async def _signed_events(
        self, group_id: str, receipt: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """The receipt's Events as the Group log holds them, each verified (six stages) and
        accepted by this Organization's Group Authority."""
        log = GroupEventLog(self.store, group_id)
        first, last = int(receipt["firstSequence"]), int(receipt["lastSequence"])
        event_ids = list(receipt["eventIds"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.receipt_seconds
        entries = []
        for sequence in range(first, last + 1):
            entry = await asyncio.to_thread(log.get, sequence)
            while entry is None:
                if loop.time() >= deadline:
                    # Accepted, not yet mirrored: an unchanged resend returns the same receipt.
                    raise MwpError(
                        ErrorCode.BACKPRESSURE,
                        "The Command was accepted; its Events are not in the Group log yet. "
                        "Resend it unchanged to receive them.",
                        action_id=receipt.get("actionId"),
                        group_id=group_id,
                        retry_after_ms=1000,
                        diagnostic=Diagnostic("gateway", "receipt-not-mirrored"),
                    )
                appended = self._appended.setdefault(group_id, asyncio.Event())
                await wait_at_most(appended, _LOG_POLL_SECONDS)  # a cancellation is never lost
                entry = await asyncio.to_thread(log.get, sequence)
            entries.append(entry)
        try:
            return self._verified(group_id, entries, event_ids, await self._evidence.get())
        except MwpError:  # a key newer than the evidence held: look once more
            self._evidence.forget()
            return self._verified(group_id, entries, event_ids, await self._evidence.get())

    def _verified(
        self,
        group_id: str,
        entries: list[LogEntry],
        event_ids: list[str],
        evidence: RegistryEvidence,
    ) -> list[dict[str, Any]]:
        authority = group_authority(self.organization_id)
        events: list[dict[str, Any]] = []
        for entry, event_id in zip(entries, event_ids, strict=True):
            try:
                verified = verify(entry.data, "event", evidence)
            except VerificationError:
                raise _log_fault(group_id, "event-unverified") from None
            if verified.principal != authority or entry.event_id != event_id:
                raise _log_fault(group_id, "not-the-receipts-event")
            events.append(verified.document)
        return events


class Recent(Generic[T]):
    """The answer of ``fetch``, reused for ``seconds``; one fetch at a time, shared by every
    caller that asks meanwhile."""

    def __init__(self, fetch: Callable[[], Awaitable[T]], seconds: float) -> None:
        self._fetch = fetch
        self._seconds = seconds
        self._value: T | None = None
        self._until = 0.0
        self._lock = asyncio.Lock()

    def forget(self) -> None:
        self._until = 0.0

    def fresh(self) -> bool:
        """Whether :meth:`get` would answer without fetching."""
        return self._value is not None and asyncio.get_running_loop().time() < self._until

    async def get(self) -> T:
        loop = asyncio.get_running_loop()
        async with self._lock:
            if self._value is None or loop.time() >= self._until:
                started = loop.time()
                self._value = await self._fetch()
                self._until = started + self._seconds
            return self._value


class SessionEpochs:
    """Each Agent's Session Epoch as the Registry held it at most ``seconds`` ago: from one
    look at the Registry shared by every frame, or, for an Agent whose Session this gateway
    opened within that window, from the Registry's answer to the opening itself. So a new
    Session fences the Agent's older ones here at once, with no query of a Registry that is
    just then busy telling its Groups of the new Session (measured: 0.8 s while the demo's
    agents said HELLO together)."""

    def __init__(self, fetch: Callable[[], Awaitable[dict[str, int]]], seconds: float) -> None:
        self._recent = Recent(fetch, seconds)
        self._seconds = seconds
        self._opened: dict[str, tuple[int, float]] = {}  # agent → (epoch, trusted until)

    def opened(self, agent_id: str, epoch: int, asked_at: float) -> None:
        """The Registry answered ``epoch`` to an opening asked at ``asked_at`` (loop time)."""
        now = asyncio.get_running_loop().time()
        self._opened = {a: e for a, e in self._opened.items() if e[1] > now}
        self._opened[agent_id] = (epoch, asked_at + self._seconds)

    async def of(self, agent_id: str) -> int | None:
        learned = self._opened.get(agent_id)
        if learned is not None and asyncio.get_running_loop().time() >= learned[1]:
            learned = None
        if learned is not None and not self._recent.fresh():
            return learned[0]
        current = (await self._recent.get()).get(agent_id)
        if learned is None or (current is not None and current > learned[0]):
            return current  # a Session opened since, through another gateway
        return learned[0]


def _log_fault(group_id: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The Group log could not be read.",
        group_id=group_id,
        diagnostic=Diagnostic("gateway", reason),
    )


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
