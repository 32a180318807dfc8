"""A run's ways to its Group in gateway mode: owner Commands as ``COMMAND`` frames of the
agent's current :class:`~mwp.agent.gateway_link.GatewayLink`, the WorkItem's view from the
Events the gateway delivered, and Artifacts and checkpoints over the gateway's HTTPS routes
(stored as Artifacts of the Group, so a later owner reads them the same way). While the
runtime has no link, each of them is :class:`~mwp.agent.offline.Disconnected`."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, Final

from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.gateway_views import UnknownWorkItemError
from mwp.agent.progress import OwnerCommand
from mwp.contracts.agent import ExecutionOrder
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.stores.artifacts import StoredContent

Json = dict[str, Any]

# A run may start before its Group's Events reach the runtime's link: the AgentWorkflow,
# replayed from Temporal, knows the WorkItem at once, while a new process's (or a new
# connection's) views fill only as the gateway delivers the Group again. An unknown WorkItem is
# looked up again for this long before the run fails on it.
VIEW_WAIT_SECONDS: Final = 5.0
VIEW_POLL_SECONDS: Final = 0.05


def artifact_uri(content_hash: str) -> str:
    """The manifest's ``uri``: content-addressed, fetched through the gateway by hash."""
    return "urn:mwp:artifact:" + content_hash.removeprefix("sha256:")


class GatewayChannel:
    """An :class:`~mwp.agent.execution.OwnerChannel` over the gateway."""

    def __init__(
        self,
        connection: GatewayConnection,
        order: ExecutionOrder,
        preemption_requested: Callable[[], Awaitable[bool]],
    ) -> None:
        self._connection = connection
        self._order = order
        self._preemption_requested = preemption_requested

    async def send(self, command: OwnerCommand) -> Json:
        return await self._connection.current().send(
            command.kind,
            command.payload,
            group_id=self._order.group_id,
            session_epoch=self._order.session_epoch,
            work_item_id=command.work_item_id,
        )

    async def work_item(self, work_item_id: str) -> Json:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + VIEW_WAIT_SECONDS
        while True:
            views = self._connection.current().group(self._order.group_id)
            try:
                return views.work_item(work_item_id)
            except UnknownWorkItemError:
                if loop.time() >= deadline:
                    raise
            await asyncio.sleep(VIEW_POLL_SECONDS)

    async def preemption_requested(self) -> bool:
        return await self._preemption_requested()


class GatewayContent:
    """:class:`~mwp.agent.execution.RunContent` through the gateway, for one Group."""

    def __init__(self, connection: GatewayConnection, group_id: str) -> None:
        self._connection = connection
        self._group_id = group_id

    async def put_artifact(self, data: bytes) -> StoredContent:
        content_hash = await self._connection.current().upload(self._group_id, data)
        return StoredContent(content_hash, len(data), artifact_uri(content_hash), True)

    async def get_artifact(self, content_hash: str) -> bytes:
        return await self._connection.current().download(self._group_id, content_hash)

    async def put_checkpoint(self, state: Any) -> str:
        data = canonicalize(state)
        ref = await self._connection.current().upload(self._group_id, data)
        if ref != "sha256:" + hashlib.sha256(data).hexdigest():
            raise ValueError(f"the gateway stored the checkpoint as {ref}")
        return ref

    async def get_checkpoint(self, ref: str) -> Any:
        return parse_bytes(await self._connection.current().download(self._group_id, ref))
