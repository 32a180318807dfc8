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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mwp.client import ClientError, Identity, MwpClient, OrganizationRegistryClient
from mwp.client.missions import MissionHandle
from mwp.contracts.messages import group_authority
from mwp.contracts.mission import mission_workflow_id
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import VerificationError, verify
from mwp.log.delivery import CursorStore, ObjectCursorStore
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore

# Visibility (the GroupId search attribute) lags a new Mission by a moment.
GROUP_LOOKUP_SECONDS = 3.0
# How long an accepted Command's Events may take to appear in the Group log (the mirror
# runs as an activity after the Update returns).
RECEIPT_SECONDS = 15.0
_LOG_POLL_SECONDS = 0.05


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

    async def decide(self, command: Mapping[str, Any]) -> Decided: ...


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
        return await self.registry.open_session(agent_id)

    async def session_epoch(self, agent_id: str) -> int | None:
        return (await self.registry.session_epochs()).get(agent_id)

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
        receipt: dict[str, Any] = result["receipt"]
        events = await self._signed_events(group_id, receipt)
        return Decided(receipt, events, bool(result.get("duplicate")))

    async def _mission_workflow(self, group_id: str) -> str:
        known = self._workflows.get(group_id)
        if known is not None:
            return known
        query = f"WorkflowType = 'MissionWorkflow' AND GroupId = '{_quoted(group_id)}'"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.group_lookup_seconds
        while True:
            found = {e.id async for e in self.client.temporal.list_workflows(query)}
            if len(found) == 1:
                workflow_id = found.pop()
                self._workflows[group_id] = workflow_id
                return workflow_id
            if found or loop.time() >= deadline:
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
                await asyncio.sleep(_LOG_POLL_SECONDS)
                entry = await asyncio.to_thread(log.get, sequence)
            entries.append(entry)
        evidence = await self.evidence()
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


def _log_fault(group_id: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The Group log could not be read.",
        group_id=group_id,
        diagnostic=Diagnostic("gateway", reason),
    )


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
