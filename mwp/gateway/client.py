"""A small client of the gateway's binding: connect over TLS 1.3, HELLO, PING, COMMAND,
SUBSCRIBE and ACK, and Artifacts over the gateway's HTTPS listener with the session token.

>>> async with GatewayClient.connect("wss://127.0.0.1:7443", client_context(ca)) as gateway:
...     accepted = await gateway.hello(agent)          # the server_accept frame
...     events = await gateway.command(signed_command)  # its signed Events, in Group order
...     inbox = Inbox()
...     await gateway.subscribe([{"groupId": group_id, "afterSequence": 0}])
...     await gateway.collect(inbox, lambda box: box.position(group_id) >= 10)
...     await gateway.ack(group_id, inbox.position(group_id))
...     digest = await gateway.upload_artifact("https://127.0.0.1:7444", group_id, data)
...     data = await gateway.artifact("https://127.0.0.1:7444", group_id, digest)

Every frame the server sends is read with :func:`~mwp.gateway.frames.read_frame`, so a frame
that does not conform to the schema fails here. An ``ERROR`` answer raises
:class:`~mwp.contracts.errors.RemoteMwpError` carrying the wire error object.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import ssl
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect

from mwp import PROTOCOL_VERSION
from mwp.client import Identity
from mwp.contracts.errors import RemoteMwpError
from mwp.core.models.websocket_frame import AckFrame, ErrorFrame, EventFrame
from mwp.core.organization.performance import PerformanceRecord
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.core.wire.values import b64url_encode
from mwp.gateway.artifacts import (
    AGENT_CARD_PATH,
    MAX_ARTIFACT_BYTES,
    artifacts_path,
    cited_events_path,
)
from mwp.gateway.frames import (
    MAX_MESSAGE_BYTES,
    Incoming,
    encode,
    new_frame_id,
    now_text,
    read_frame,
)
from mwp.gateway.hello import init_frame, response_frame
from mwp.gateway.https import OCTETS, Response, request
from mwp.gateway.knowledge_imports import knowledge_imports_path
from mwp.gateway.performance import performance_path
from mwp.gateway.tls import certificate_hash
from mwp.log.delivery import EventIdWindow
from mwp.stores.artifacts import ArtifactIntegrityError

CLAUSES: tuple[str, ...] = ("MWP-EVT-010", "MWP-WRK-024")


class Inbox:
    """What subscriptions delivered, per Group: new Events (deduplicated by Event ID, so one
    Inbox kept across reconnects drops the duplicates around a disconnect), each Group's
    position (its last Event or ``ACK`` watermark) and the ``ERROR`` objects received."""

    def __init__(self, dedupe: EventIdWindow | None = None) -> None:
        self.dedupe = dedupe if dedupe is not None else EventIdWindow()
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.positions: dict[str, int] = {}
        self.errors: list[dict[str, Any]] = []
        self.duplicates = 0

    def position(self, group_id: str) -> int:
        return self.positions.get(group_id, -1)

    def of(self, group_id: str) -> list[dict[str, Any]]:
        return self.events.get(group_id, [])

    def take(self, incoming: Incoming) -> None:
        value = incoming.value
        if isinstance(incoming.frame, EventFrame):
            event = value["event"]
            group_id, sequence = event["groupId"], int(event["sequence"])
            # Routed by Group first: sequence order holds only within a Group (spec 17.2).
            self.positions[group_id] = max(self.position(group_id), sequence)
            if event["eventId"] in self.dedupe:
                self.duplicates += 1
                return
            self.dedupe.add(event["eventId"])
            self.events.setdefault(group_id, []).append(event)
        elif isinstance(incoming.frame, AckFrame):
            for ack in value["acknowledgements"]:
                group_id = ack["groupId"]
                self.positions[group_id] = max(self.position(group_id), int(ack["sequence"]))
        elif isinstance(incoming.frame, ErrorFrame):
            self.errors.append(value["error"])


class GatewayClient:
    def __init__(self, websocket: ClientConnection, context: ssl.SSLContext) -> None:
        self.websocket = websocket
        self.context = context
        self.session_epoch: int | None = None
        self.session_token: str | None = None
        # How long an HTTPS route's answer may take once the request is sent (None: up to the
        # request's whole timeout).
        self.answer_seconds: float | None = None
        # Frames read while waiting for another answer (Events of other Commands...).
        self.unrelated: list[Incoming] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, uri: str, context: ssl.SSLContext) -> AsyncIterator[GatewayClient]:
        async with connect(
            uri, ssl=context, max_size=MAX_MESSAGE_BYTES, compression=None
        ) as websocket:
            yield cls(websocket, context)

    @property
    def server_certificate(self) -> str:
        """The hash of the certificate this TLS connection verified."""
        ssl_object = self.websocket.transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        return certificate_hash(der)

    async def send(self, frame: Mapping[str, Any]) -> None:
        await self.websocket.send(encode(dict(frame)))

    async def send_raw(self, message: str | bytes) -> None:
        await self.websocket.send(message)

    async def receive(self) -> Incoming:
        """The server's next frame (schema-checked)."""
        return read_frame(await self.websocket.recv())

    async def subscribe(self, groups: Sequence[Mapping[str, Any]]) -> str:
        """SUBSCRIBE to ``groups`` (``{"groupId", "afterSequence", "attention"?}``); the
        frame's ID (refusals name it). Deliveries arrive as frames: see :meth:`collect`."""
        frame_id = new_frame_id()
        await self.send(
            {
                "protocolVersion": PROTOCOL_VERSION,
                "frameId": frame_id,
                "frameType": "SUBSCRIBE",
                "subscriptionId": new_frame_id(),
                "groups": [dict(group) for group in groups],
            }
        )
        return frame_id

    async def ack(self, group_id: str, sequence: int) -> None:
        """Report the Agent's durable Cursor of ``group_id``."""
        await self.send(
            {
                "protocolVersion": PROTOCOL_VERSION,
                "frameId": new_frame_id(),
                "frameType": "ACK",
                "acknowledgements": [{"groupId": group_id, "sequence": sequence}],
                "sentAt": now_text(),
            }
        )

    async def collect(
        self, inbox: Inbox, until: Callable[[Inbox], bool], *, timeout: float = 10.0
    ) -> Inbox:
        """Read frames into ``inbox`` until ``until(inbox)`` holds (``TimeoutError`` after
        ``timeout`` seconds); frames read earlier by other calls come first."""
        async with asyncio.timeout(timeout):
            while not until(inbox):
                if self.unrelated:
                    inbox.take(self.unrelated.pop(0))
                else:
                    inbox.take(await self.receive())
        return inbox

    async def answer(self, frame_id: str) -> Incoming:
        """The next frame, raising the ``ERROR`` that names ``frame_id``."""
        incoming = await self.receive()
        frame = incoming.frame
        if isinstance(frame, ErrorFrame):
            wire = incoming.value["error"]
            if wire.get("relatedFrameId") in (frame_id, None):
                raise RemoteMwpError(wire)
        return incoming

    async def hello(self, agent: Identity) -> dict[str, Any]:
        """Authenticate as ``agent``; the ``server_accept`` frame."""
        init = init_frame(agent.principal.id, agent.key_id, secrets.token_bytes(32), new_frame_id())
        await self.send(init)
        challenge = (await self.answer(init["frameId"])).value
        if challenge.get("phase") != "server_challenge":
            raise ValueError(f"expected a HELLO challenge, got {challenge.get('frameType')}")
        if challenge["clientNonce"] != init["clientNonce"]:
            raise ValueError("the challenge answers another client nonce")
        response = response_frame(
            init, challenge, agent.key, self.server_certificate, new_frame_id()
        )
        await self.send(response)
        accepted = (await self.answer(response["frameId"])).value
        if accepted.get("phase") != "server_accept":
            raise ValueError(f"expected a HELLO accept, got {accepted.get('frameType')}")
        self.session_epoch = int(accepted["sessionEpoch"])
        self.session_token = str(accepted["sessionToken"])
        return accepted

    async def ping(self, presence: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A PING (with ``presence``, if given); the server's reply PING."""
        frame: dict[str, Any] = {
            "protocolVersion": PROTOCOL_VERSION,
            "frameId": new_frame_id(),
            "frameType": "PING",
            "nonce": b64url_encode(secrets.token_bytes(16)),
            "sentAt": now_text(),
        }
        if presence is not None:
            frame["presence"] = dict(presence)
        await self.send(frame)
        reply = (await self.answer(frame["frameId"])).value
        if reply.get("frameType") != "PING" or reply.get("replyToNonce") != frame["nonce"]:
            raise ValueError(f"expected the PING reply, got {reply}")
        return reply

    async def command(self, command: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Send a signed Command; its signed Events once the closing ``ACK`` arrives."""
        frame_id = new_frame_id()
        frame = {
            "protocolVersion": PROTOCOL_VERSION,
            "frameId": frame_id,
            "frameType": "COMMAND",
            "command": dict(command),
        }
        await self.send(frame)
        action_id = command["actionId"]
        events: list[dict[str, Any]] = []
        while True:
            incoming = await self.answer(frame_id)
            value = incoming.value
            if isinstance(incoming.frame, EventFrame) and value["event"]["cause"] == {
                "type": "command",
                "id": action_id,
            }:
                events.append(value["event"])
            elif (
                isinstance(incoming.frame, AckFrame)
                and events
                and value["acknowledgements"]
                == [{"groupId": events[-1]["groupId"], "sequence": events[-1]["sequence"]}]
            ):
                return events
            else:
                self.unrelated.append(incoming)

    # --- Artifacts (the gateway's HTTPS listener, authorized by this connection's session) ---

    async def artifact(
        self,
        artifacts_url: str,
        group_id: str,
        content_hash: str,
        *,
        max_bytes: int = MAX_ARTIFACT_BYTES,
    ) -> bytes:
        """The Artifact's bytes, checked here against ``content_hash`` as well."""
        response = await self._artifact_request(
            artifacts_url, "GET", artifacts_path(group_id, content_hash), max_bytes=max_bytes
        )
        if response.status != 200:
            raise RemoteMwpError(parse_bytes(response.body))
        if "sha256:" + hashlib.sha256(response.body).hexdigest() != content_hash:
            raise ArtifactIntegrityError(content_hash, "content-hash-mismatch")
        return response.body

    async def agent_card(self, artifacts_url: str) -> dict[str, Any] | None:
        """This Agent's current Agent Card, as the Organization's Registry holds it."""
        response = await self._artifact_request(
            artifacts_url, "GET", AGENT_CARD_PATH, max_bytes=MAX_ARTIFACT_BYTES
        )
        answer = parse_bytes(response.body)
        if response.status != 200:
            raise RemoteMwpError(answer)
        card: dict[str, Any] | None = answer["agentCard"]
        return card

    async def cited_events(
        self, artifacts_url: str, group_id: str, package_id: str
    ) -> list[dict[str, Any]]:
        """The signed Events the Context Package ``package_id`` cites, if this Agent was given
        the package (a late joiner's retrieval, MWP-MSN-012)."""
        response = await self._artifact_request(
            artifacts_url,
            "GET",
            cited_events_path(group_id, package_id),
            max_bytes=MAX_ARTIFACT_BYTES,
        )
        answer = parse_bytes(response.body)
        if response.status != 200:
            raise RemoteMwpError(answer)
        events: list[dict[str, Any]] = answer["events"]
        return events

    async def performance_records(
        self, artifacts_url: str, agent_id: str, capability: str | None = None
    ) -> list[PerformanceRecord]:
        """The Registry's performance records of ``agent_id`` (this Agent a Coordinator of the
        Organization): every outcome counted, the Events this Agent may see cited."""
        response = await self._artifact_request(
            artifacts_url,
            "GET",
            performance_path(agent_id, capability),
            max_bytes=MAX_ARTIFACT_BYTES,
        )
        answer = parse_bytes(response.body)
        if response.status != 200:
            raise RemoteMwpError(answer)
        return [PerformanceRecord.from_json(r) for r in answer["records"]]

    async def knowledge_import(
        self, artifacts_url: str, group_id: str, source_group_id: str, content_hash: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The source's signed manifest and the Organization's Knowledge Reuse Approval for
        importing ``content_hash`` of ``source_group_id`` into ``group_id`` (this Agent its
        Coordinator): the ``artifact_import`` payload's two documents."""
        body = canonicalize({"sourceGroupId": source_group_id, "contentHash": content_hash})
        response = await self._artifact_request(
            artifacts_url,
            "POST",
            knowledge_imports_path(group_id),
            body=body,
            content_type="application/json",
            max_bytes=MAX_ARTIFACT_BYTES,
        )
        answer = parse_bytes(response.body)
        if response.status != 200:
            raise RemoteMwpError(answer)
        return answer["manifest"], answer["approval"]

    async def upload_artifact(self, artifacts_url: str, group_id: str, data: bytes) -> str:
        """Upload ``data`` for ``group_id`` (this Agent an active Worker of it); its hash."""
        content_hash = "sha256:" + hashlib.sha256(data).hexdigest()
        response = await self._artifact_request(
            artifacts_url,
            "PUT",
            artifacts_path(group_id, content_hash),
            body=data,
            max_bytes=64 * 1024,
        )
        answer = parse_bytes(response.body)
        if response.status != 201:
            raise RemoteMwpError(answer)
        if answer.get("contentHash") != content_hash:
            raise ValueError(f"the gateway stored {answer.get('contentHash')}, not {content_hash}")
        return content_hash

    async def _artifact_request(
        self,
        artifacts_url: str,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        content_type: str = OCTETS,
        max_bytes: int,
    ) -> Response:
        if self.session_token is None:
            raise ValueError("authenticate with HELLO before reading or writing Artifacts")
        url = urlsplit(artifacts_url)
        if url.scheme != "https" or url.hostname is None or url.port is None:
            raise ValueError(f"not an https://HOST:PORT address: {artifacts_url!r}")
        headers = {"Authorization": f"Bearer {self.session_token}"}
        if body:
            headers["Content-Type"] = content_type
        return await request(
            url.hostname,
            url.port,
            self.context,
            method,
            path,
            headers=headers,
            body=body,
            max_body=max_bytes,
            answer_seconds=self.answer_seconds,
        )
