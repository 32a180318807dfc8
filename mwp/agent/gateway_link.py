"""The agent runtime's one connection to the Group gateway (the default mode of `mwp agent run`).

:class:`GatewayLink` opens a TLS 1.3 WebSocket to the gateway, authenticates with the agent's
key (the HELLO opens the agent's Session: its epoch replaces ``registry.open_session``), and
reads every frame the gateway sends on one task:

* ``EVENT`` frames complete pending Command receipts and are passed to the listener (the
  gateway inbox, which applies them in Group order to the agent's
  :class:`~mwp.agent.gateway_views.GroupViews`: the WorkItem views and epochs runs need);
* the ``ACK`` that closes a Command's receipt is consumed here; any other ``ACK`` (a
  subscription's watermark) goes to the listener;
* an ``ERROR`` naming a pending frame fails it; others go to the listener; a fatal one
  (another Session fenced this one) closes the link.

Commands go out as ``COMMAND`` frames on the same connection (:meth:`send`), and Artifacts
and checkpoints over the gateway's HTTPS routes with this connection's session token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake

from mwp import PROTOCOL_VERSION
from mwp.agent.declaration import Agent
from mwp.agent.gateway_views import GroupViews
from mwp.agent.offline import DEFAULT_GRACE_SECONDS, Disconnected
from mwp.contracts.errors import RemoteMwpError
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.models.websocket_frame import AckFrame, ErrorFrame, EventFrame
from mwp.core.organization.performance import PerformanceRecord
from mwp.core.wire.values import b64url_encode
from mwp.gateway.client import GatewayClient
from mwp.gateway.frames import Incoming, new_frame_id, now_text
from mwp.gateway.tls import client_context

Json = dict[str, Any]
T = TypeVar("T")
log = logging.getLogger(__name__)

CLAUSES: tuple[str, ...] = ("MWP-WRK-008",)

# How long a Command waits for its receipt before it is sent again (byte-equal: the same
# receipt comes back, never a second decision).
RECEIPT_SECONDS = 20.0
# How long a HELLO may wait for the gateway's answer: a gateway that accepted the connection and
# never answers (starting, or stuck on its Registry) is given up and tried again like a lost one.
HELLO_SECONDS = 30.0
# How often the link proves the agent alive (well inside the gateway's session lifetime).
PING_SECONDS = 60.0
RESENDS = 3
# An HTTPS route of the gateway answers within this once the request is sent, or the request is
# made again on a new TLS connection, up to ROUTE_TRIES times in all: a request the gateway took
# and never answered (a gateway just restarted) fails fast instead of holding the runtime.
ROUTE_ANSWER_SECONDS = 5.0
ROUTE_TRIES = 3
# The wait before asking a route again after a retryable error without ``retryAfterMs``, and
# the longest wait it may name.
ROUTE_RETRY_SECONDS = 0.5
ROUTE_RETRY_MAX_SECONDS = 5.0
# Commands whose Events may still be on their way: far more than a runtime has in flight.
OWN_ACTIONS = 4096
# Refusals that mean the epochs a Command carried are behind what the gateway delivered.
_STALE_EPOCHS = frozenset({ErrorCode.MEMBERSHIP_STALE, ErrorCode.AUTH_STALE_COORDINATOR})


@dataclass(frozen=True)
class GatewaySettings:
    """Where the agent's gateway is and how to trust it.

    ``url`` is the gateway's ``wss://HOST:PORT``; ``ca_file`` the trust anchor (``None``: the
    system's); ``artifacts_url`` its ``https://HOST:PORT`` for Artifacts (default: the same
    host, the next port, as ``mwp dev`` serves them)."""

    url: str
    ca_file: Path | None = None
    artifacts_url: str | None = None
    # How long a run that lost the gateway may go on alone (mwp.agent.offline).
    offline_grace_seconds: int = DEFAULT_GRACE_SECONDS

    def artifacts(self) -> str:
        if self.artifacts_url is not None:
            return self.artifacts_url
        url = urlsplit(self.url)
        if url.scheme != "wss" or url.hostname is None or url.port is None:
            raise ValueError(f"not a wss://HOST:PORT address: {self.url!r}")
        return f"https://{url.hostname}:{url.port + 1}"


class GatewayUnavailableError(Exception):
    """The gateway could not be reached, or refused the agent's HELLO (a user-facing line)."""


@dataclass
class _Receipt:
    """A Command waiting for its Events and the ``ACK`` that closes them."""

    action_id: str
    future: asyncio.Future[list[Json]]
    events: list[Json] = field(default_factory=list)

    def take_event(self, event: Json) -> None:
        if event.get("cause") == {"type": "command", "id": self.action_id} and all(
            e["eventId"] != event["eventId"] for e in self.events
        ):
            self.events.append(event)

    def closed_by(self, acknowledgements: Sequence[Json]) -> bool:
        if not self.events:
            return False
        last = self.events[-1]
        return list(acknowledgements) == [
            {"groupId": last["groupId"], "sequence": last["sequence"]}
        ]


class GatewayLink:
    """One authenticated gateway connection of an Agent (see the module docstring)."""

    def __init__(self, client: GatewayClient, agent: Agent, artifacts_url: str) -> None:
        self.client = client
        self.agent = agent
        self.artifacts_url = artifacts_url
        self.views: dict[str, GroupViews] = {}
        self.listener: Callable[[Incoming], None] | None = None
        # Action IDs this link sent, the latest OWN_ACTIONS (insertion-ordered): their Events
        # come as a receipt and by the subscription, and the inbox takes them in Group order.
        self.own_actions: dict[str, None] = {}
        self.closed = asyncio.Event()
        self.fatal: MwpError | None = None
        self._pending: dict[str, _Receipt] = {}
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, settings: GatewaySettings, agent: Agent) -> AsyncIterator[GatewayLink]:
        """Connect and say HELLO; :class:`GatewayUnavailableError` when either fails."""
        context = client_context(settings.ca_file)
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(
                    GatewayClient.connect(settings.url, context)
                )
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                raise GatewayUnavailableError(
                    f"cannot reach the Group gateway at {settings.url} ({exc}); is `mwp dev` "
                    "(or `mwp gateway`) running? --gateway and --gateway-ca say where it is"
                ) from None
            try:
                await asyncio.wait_for(client.hello(agent.identity), HELLO_SECONDS)
            except TimeoutError:
                raise GatewayUnavailableError(
                    f"the gateway at {settings.url} did not answer the HELLO in "
                    f"{HELLO_SECONDS:.0f} s"
                ) from None
            except MwpError as exc:
                raise GatewayUnavailableError(
                    f"the gateway refused the HELLO of {agent.agent_id}: {exc.code.value}. "
                    "Its Agent Card must be registered with this key first "
                    "(`mwp registry add-agent`)"
                ) from None
            except ConnectionClosed as exc:  # 1013: the gateway's Organization is not set up
                raise GatewayUnavailableError(
                    f"the gateway at {settings.url} closed the connection ({exc}); has "
                    "`mwp registry init` run?"
                ) from None
            client.answer_seconds = ROUTE_ANSWER_SECONDS
            link = cls(client, agent, settings.artifacts())
            tasks = [asyncio.create_task(link._read()), asyncio.create_task(link._keep_alive())]
            try:
                yield link
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    @property
    def session_epoch(self) -> int:
        epoch = self.client.session_epoch
        if epoch is None:
            raise RuntimeError("the link has not authenticated")
        return epoch

    def group(self, group_id: str) -> GroupViews:
        views = self.views.get(group_id)
        if views is None:
            views = self.views[group_id] = GroupViews(group_id, self.agent.agent_id)
        return views

    # --- reading ---------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                self._dispatch(await self.client.receive())
        except ConnectionClosed:
            log.warning("the gateway closed the connection")
        except Exception:
            log.exception("reading from the gateway failed")
        finally:
            self.closed.set()
            for receipt in self._pending.values():
                if not receipt.future.done():
                    receipt.future.set_exception(Disconnected("the gateway connection closed"))

    async def _keep_alive(self) -> None:
        """A PING every ``PING_SECONDS``: the agent's liveness, which keeps its session from
        expiring while the connection lives (docs/gateway.md, PING)."""
        while not self.closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closed.wait(), PING_SECONDS)
            if self.closed.is_set():
                return
            frame = {
                "protocolVersion": PROTOCOL_VERSION,
                "frameId": new_frame_id(),
                "frameType": "PING",
                "nonce": b64url_encode(secrets.token_bytes(16)),
                "sentAt": now_text(),
            }
            try:
                await self.client.send(frame)  # the reply is read (and dropped) by _read
            except ConnectionClosed:
                return

    def _dispatch(self, incoming: Incoming) -> None:
        frame, value = incoming.frame, incoming.value
        if isinstance(frame, EventFrame):
            event = value["event"]
            for receipt in self._pending.values():
                receipt.take_event(event)
        elif isinstance(frame, AckFrame):
            for frame_id, receipt in list(self._pending.items()):
                if receipt.closed_by(value["acknowledgements"]):
                    del self._pending[frame_id]
                    if not receipt.future.done():
                        receipt.future.set_result(receipt.events)
                    return  # a receipt's end, not a watermark of the subscription
        elif isinstance(frame, ErrorFrame):
            wire = value["error"]
            pending = self._pending.pop(str(wire.get("relatedFrameId")), None)
            if pending is not None:
                if not pending.future.done():
                    pending.future.set_exception(RemoteMwpError(wire))
                return
            if wire.get("fatal"):
                # Fenced by a newer Session: this runtime serves the agent no longer.
                self.fatal = RemoteMwpError(wire)
                self.closed.set()
            elif wire.get("code") == ErrorCode.AUTH_REQUIRED:
                self.closed.set()  # the session lapsed: the runtime says HELLO again
        else:
            return  # PING replies and the rest carry nothing for the runtime
        if self.listener is not None:
            self.listener(incoming)

    # --- Commands ----------------------------------------------------------------------------

    async def command(self, command: Mapping[str, Any]) -> list[Json]:
        """Send a signed Command; its Events. Sent again, byte-equal, when no receipt came
        or the gateway asked to retry (``BACKPRESSURE``)."""
        self.own_actions[str(command["actionId"])] = None
        if len(self.own_actions) > OWN_ACTIONS:
            del self.own_actions[next(iter(self.own_actions))]
        for attempt in range(RESENDS + 1):
            frame_id = new_frame_id()
            receipt = _Receipt(str(command["actionId"]), asyncio.get_running_loop().create_future())
            self._pending[frame_id] = receipt
            if self.closed.is_set():
                raise Disconnected("the gateway connection closed")
            try:
                await self.client.send(
                    {
                        "protocolVersion": PROTOCOL_VERSION,
                        "frameId": frame_id,
                        "frameType": "COMMAND",
                        "command": dict(command),
                    }
                )
            except ConnectionClosed:
                self._pending.pop(frame_id, None)
                raise Disconnected("the gateway connection closed") from None
            try:
                async with asyncio.timeout(RECEIPT_SECONDS):
                    return await receipt.future
            except TimeoutError:
                self._pending.pop(frame_id, None)
                if attempt == RESENDS:
                    raise MwpError(
                        ErrorCode.INTERNAL_ERROR,
                        "the gateway sent no receipt for the Command",
                        retryable=True,
                    ) from None
            except MwpError as error:
                if error.code is not ErrorCode.BACKPRESSURE or attempt == RESENDS:
                    raise
                await asyncio.sleep((error.retry_after_ms or 250) / 1000)
        raise AssertionError("unreachable")

    async def send(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        group_id: str,
        session_epoch: int,
        work_item_id: str | None = None,
    ) -> Json:
        """Sign ``kind`` as the agent (its Membership Epoch as delivered in the Group) and send
        it; a receipt shaped as the client SDK's (``{"events": [...]}``)."""
        try:
            return await self._signed_and_sent(kind, payload, group_id, session_epoch, work_item_id)
        except MwpError as error:
            if error.code not in _STALE_EPOCHS:
                raise
            # The Membership changed in an Event not delivered yet: let the feed catch up.
            await asyncio.sleep(0.5)
            return await self._signed_and_sent(kind, payload, group_id, session_epoch, work_item_id)

    async def _signed_and_sent(
        self,
        kind: str,
        payload: Mapping[str, Any],
        group_id: str,
        session_epoch: int,
        work_item_id: str | None,
    ) -> Json:
        epochs = self.group(group_id).epochs()
        command = self.agent.identity.command(
            kind,
            payload,
            group_id=group_id,
            session_epoch=session_epoch,
            membership_epoch=epochs["membershipEpoch"],
            work_item_id=work_item_id,
        )
        return {"events": await self.command(command)}

    # --- subscriptions -----------------------------------------------------------------------

    async def subscribe(self, groups: Sequence[Mapping[str, Any]]) -> str:
        return await self.client.subscribe(groups)

    async def ack(self, group_id: str, sequence: int) -> None:
        await self.client.ack(group_id, sequence)

    # --- Artifacts ---------------------------------------------------------------------------

    async def upload(self, group_id: str, data: bytes) -> str:
        return await self._routed(
            lambda: self.client.upload_artifact(self.artifacts_url, group_id, data)
        )

    async def agent_card(self) -> Json | None:
        """The agent's Agent Card as the Registry holds it now."""
        return await self._routed(lambda: self.client.agent_card(self.artifacts_url))

    async def _routed(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call``, a request to an HTTPS route of the gateway (each route idempotent), made
        again on a new connection when it gets no answer or a retryable error (a gateway
        just started may answer that its Group reader is not ready); unreachable is
        :class:`Disconnected`, the last retryable error is raised as it came."""
        for attempt in range(ROUTE_TRIES):
            if self.closed.is_set():
                raise Disconnected("the gateway connection closed")
            try:
                return await call()
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                if attempt == ROUTE_TRIES - 1:
                    raise Disconnected(f"{type(exc).__name__}: {exc}") from exc
                log.warning("the gateway's route did not answer (%s): asking again", exc)
            except MwpError as exc:
                if not exc.retryable or attempt == ROUTE_TRIES - 1:
                    raise
                log.warning("the gateway's route answered %s: asking again", exc.code.value)
                await asyncio.sleep(route_retry_seconds(exc))
        raise AssertionError("unreachable")

    async def learn_offered(self, group_id: str, event: Mapping[str, Any]) -> list[Json]:
        """Before ``event`` is applied: if it offers this agent a WorkItem the agent does not
        know, retrieve the Events its Context Package cites (MWP-MSN-012) and take them into
        the Group's views; those Events (none for any other ``event``)."""
        views = self.group(group_id)
        package = views.unknown_offer(event)
        if package is None:
            return []
        try:
            cited = await self._routed(
                lambda: self.client.cited_events(self.artifacts_url, group_id, package)
            )
        except Exception:  # the Scheduler cannot admit it: the offer lapses
            log.exception("retrieving the Events Context Package %s cites failed", package)
            return []
        for source in cited:
            views.learn(source)
        return cited

    async def performance_records(
        self, agent_id: str, capability: str | None = None
    ) -> list[PerformanceRecord]:
        """The Registry's performance records of ``agent_id`` (for a Coordinator's offers)."""
        return await self._routed(
            lambda: self.client.performance_records(self.artifacts_url, agent_id, capability)
        )

    async def knowledge_import(
        self, group_id: str, source_group_id: str, content_hash: str
    ) -> tuple[Json, Json]:
        """The manifest and approval for a Coordinator's import (``GatewayClient``'s)."""
        return await self._routed(
            lambda: self.client.knowledge_import(
                self.artifacts_url, group_id, source_group_id, content_hash
            )
        )

    async def download(self, group_id: str, content_hash: str) -> bytes:
        return await self._routed(
            lambda: self.client.artifact(self.artifacts_url, group_id, content_hash)
        )


def route_retry_seconds(error: MwpError) -> float:
    """How long to wait before asking a route again after the retryable ``error``."""
    if error.retry_after_ms is None:
        return ROUTE_RETRY_SECONDS
    return min(max(error.retry_after_ms / 1000, 0.0), ROUTE_RETRY_MAX_SECONDS)
