"""The gateway server: WebSocket over TLS 1.3, one connection per Agent (spec 17).

Each message is read by :func:`~mwp.gateway.frames.read_frame`; a refused one is answered
with a typed ``ERROR`` frame naming it, and the connection carries on. Served now:

* ``HELLO``: the challenge-response of :mod:`mwp.gateway.hello` against the Organization's
  current Registry evidence; an accepted response opens a new Session in the Registry (its
  Session Epoch fences every older session of the Agent) and the connection's session token
  expires after the policy's lifetime;
* ``PING``: every frame after HELLO first passes the session check (token not expired,
  Session Epoch still the Agent's current one); a PING's Presence Record must be the
  session's own; the reply echoes the nonce;
* ``COMMAND``: the Command must be the session Agent's own and carry its Session Epoch; it is
  forwarded to the Group Authority as its Update. The outcome comes back on the connection:
  the Command's signed Events as ``EVENT`` frames, then an ``ACK`` frame through the
  receipt's last sequence, or an ``ERROR`` naming the ``COMMAND`` frame and its Action ID.
  Commands of one connection are decided concurrently, at most ``commands_in_flight`` at a
  time (beyond that: ``BACKPRESSURE``), so a slow Group never holds up another;
* ``SUBSCRIBE``: per Group, the Agent's Events from ``max(afterSequence, its stored Cursor)``
  through :mod:`mwp.gateway.subscriptions` (Membership checked on every delivery, attention
  filters on live delivery, ``ACK`` watermarks over withheld Events, per-Group windows with
  ``BACKPRESSURE``). A Group the Agent never belonged to and a Group that does not exist get
  the same ``GROUP_NOT_FOUND`` frame, no earlier than ``refusal_seconds`` after the frame.
  The reserved ID :data:`~mwp.gateway.MEMBER_GROUPS` stands for every Group the
  Agent is or was a member of, found by :mod:`mwp.gateway.discovery`;
* client ``ACK``: stores the Agent's Cursor per Group in the authority zone (only up to what
  this connection passed to it, never backwards) and frees that Group's window;
* Artifacts, on a second TLS 1.3 listener (``artifact_port``; the WebSocket library reads no
  request bodies): HTTPS routes of :mod:`mwp.gateway.artifacts`, authorized by the session
  token of a connection's live session (it stops working when that session ends); on the same
  listener, the Authorization Service's capability-token routes (:mod:`mwp.gateway.authorization`),
  the Knowledge Reuse Policy's approvals for a Coordinator's imports
  (:mod:`mwp.gateway.knowledge_imports`) and the Registry's performance records for the
  Organization's Coordinators (:mod:`mwp.gateway.performance`).

Delivery is pushed: the mirror's hints (:mod:`mwp.gateway.hints`) wake the Groups' readers, in
process and, with ``hint_listen``, over UDP from other processes of the authority zone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import MetricGauge, MetricMeter
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from mwp import PROTOCOL_VERSION
from mwp.client import Identity
from mwp.contracts.messages import group_authority
from mwp.contracts.metrics import GATEWAY_CONNECTIONS
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.log.cursor import Cursor
from mwp.core.models.websocket_frame import (
    AckFrame,
    Attention,
    CommandFrame,
    ErrorFrame,
    EventFrame,
    HelloClientInit,
    HelloClientResponse,
    PingFrame,
    SubscribeFrame,
)
from mwp.core.models.websocket_frame import GroupSubscription as GroupSubscriptionRequest
from mwp.core.wire.values import b64url_encode, format_utc
from mwp.gateway import authorization, knowledge_imports
from mwp.gateway.artifacts import MAX_ARTIFACT_BYTES, ArtifactGate, ArtifactRoutes
from mwp.gateway.authority import (
    GROUP_LOOKUP_SECONDS,
    Authority,
    TemporalAuthority,
    group_not_found,
)
from mwp.gateway.cursor_writes import CursorWrites
from mwp.gateway.discovery import MEMBER_GROUPS, Discovery, Standing
from mwp.gateway.frames import (
    MAX_MESSAGE_BYTES,
    Frame,
    Incoming,
    encode,
    error_frame,
    new_frame_id,
    read_frame,
)
from mwp.gateway.hello import (
    NONCE_BYTES,
    HelloPolicy,
    PendingChallenge,
    Session,
    accept,
    accept_frame,
    challenge_frame,
    issue_challenge,
    verify_response,
)
from mwp.gateway.hints import BOARD, listen_udp
from mwp.gateway.https import Request, Response, start_server
from mwp.gateway.knowledge_imports import KnowledgeImports
from mwp.gateway.performance import RegistryPerformance, is_performance_route
from mwp.gateway.performance import serve as serve_performance
from mwp.gateway.subscriptions import LINGER_SECONDS, Feed, GroupReader, Readers

CLAUSES: tuple[str, ...] = ("MWP-EVT-009", "MWP-EVT-011", "MWP-IDN-006", "MWP-IDN-008")

log = logging.getLogger(__name__)

COMMANDS_IN_FLIGHT = 16
# Delivered Events of one Group that may wait for the Agent's ACK before the Group is paused.
GROUP_WINDOW = 256
RETRY_AFTER_MS = 250
# A reader with no hint reads its log this often anyway (hints can be lost).
SAFETY_NET_SECONDS = 30.0
# A refused SUBSCRIBE is answered no sooner than this: the answer for a Group that exists
# (and had to be read) and for one that does not take the same time.
REFUSAL_SECONDS = 0.25


@dataclass(frozen=True)
class GatewayOptions:
    hello: HelloPolicy = field(default_factory=HelloPolicy)
    commands_in_flight: int = COMMANDS_IN_FLIGHT
    group_window: int = GROUP_WINDOW
    retry_after_ms: int = RETRY_AFTER_MS
    safety_net_seconds: float = SAFETY_NET_SECONDS
    refusal_seconds: float = REFUSAL_SECONDS
    # How long a Group nobody uses any more is still read (mwp.gateway.subscriptions).
    reader_linger_seconds: float = LINGER_SECONDS
    # Receive the mirror's hints from other processes on this UDP address (port 0: any).
    hint_listen: tuple[str, int] | None = None
    # Take the hints of a mirror in this process (the embedded stack).
    in_process_hints: bool = True
    # The largest Artifact one upload may carry.
    max_artifact_bytes: int = MAX_ARTIFACT_BYTES
    # Where the connection gauge goes (a Temporal runtime's meter, exported with its metrics).
    metric_meter: MetricMeter | None = None
    # The Organization's Knowledge Reuse Policy (mwp.gateway.knowledge_imports); None or no
    # such file: no import is approved.
    reuse_policy: Path | None = None


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Gateway:
    """The gateway of one Organization's authority zone."""

    def __init__(
        self,
        authority: Authority,
        ssl_context: ssl.SSLContext,
        server_certificate: str,
        options: GatewayOptions = GatewayOptions(),
        *,
        clock: Callable[[], datetime] = _utc_now,
        authorization_identity: Identity | None = None,
        reuse_identity: Identity | None = None,
    ) -> None:
        if ssl_context.minimum_version != ssl.TLSVersion.TLSv1_3:
            raise ValueError("the gateway serves TLS 1.3 only (spec 17.1)")
        self.authority = authority
        self.ssl_context = ssl_context
        self.server_certificate = server_certificate
        self.options = options
        self.clock = clock
        self._group_authority = group_authority(authority.organization_id).id
        self.readers = Readers(
            authority.store,
            authority.evidence,
            group_authority(authority.organization_id),
            safety_net_seconds=options.safety_net_seconds,
            linger_seconds=options.reader_linger_seconds,
        )
        self.discovery = Discovery(
            self.readers, authority.running_groups, safety_net_seconds=options.safety_net_seconds
        )
        self.hint_address: tuple[str, int] | None = None
        self.cursor_writes = CursorWrites(authority.cursors)
        self.artifact_address: tuple[str, int] | None = None
        # The live sessions of this gateway's connections, by token (the Artifact routes').
        self.sessions: dict[str, Session] = {}
        self.open_connections: set[Connection] = set()
        meter = options.metric_meter
        self._gauge: MetricGauge | None = (
            None
            if meter is None
            else meter.create_gauge(
                GATEWAY_CONNECTIONS, "Open WebSocket connections of the Group gateway"
            )
        )
        self.artifacts = ArtifactGate(
            self.readers,
            authority.store,
            refusal_seconds=options.refusal_seconds,
            max_bytes=options.max_artifact_bytes,
        )
        # The Organization's Authorization Service: capability tokens (mwp.gateway.authorization).
        # Its key: ``authorization_identity`` (kept by the stack) or one made for this process.
        self.authorizations = authorization.Authorizations(
            authority.organization_id,
            authority.work_item,
            authority.register_binding,
            clock,
            mission=authority.mission_view,
            identity=authorization_identity,
        )
        if isinstance(authority, TemporalAuthority):
            authority.started = self.authorizations.prefetch
        # The Organization's Knowledge Reuse Policy: approvals for imports. Its key:
        # ``reuse_identity`` (kept by the stack) or one made for this process.
        self.knowledge_imports = KnowledgeImports(
            authority.organization_id,
            self.readers,
            authority.mission_view,
            authority.register_binding,
            clock,
            policy_file=options.reuse_policy,
            refusal_seconds=options.refusal_seconds,
            identity=reuse_identity,
        )
        # The Registry's performance records, a projection of every Group log (MWP-IDN-004).
        self.performance = RegistryPerformance(
            authority.store,
            authority.evidence,
            group_authority(authority.organization_id),
            safety_net_seconds=options.safety_net_seconds,
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """What serving needs besides the listeners: hints in, readers closed at the end."""
        token = BOARD.add(self.notify) if self.options.in_process_hints else None
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.options.hint_listen is not None:
                    self.hint_address = await stack.enter_async_context(
                        listen_udp(*self.options.hint_listen, self.notify)
                    )
                await stack.enter_async_context(self.authorizations.serving())
                await stack.enter_async_context(self.knowledge_imports.serving())
                yield
        finally:
            if token is not None:
                BOARD.remove(token)
            await self.discovery.close()
            await self.readers.close()
            await self.cursor_writes.all_stored()

    def notify(self, group_id: str, last_sequence: int, authority_id: str | None = None) -> None:
        """A hint: wake the Group's reader, and find the Group for standing subscribers.

        A hint naming another Organization's Group Authority is dropped here: no reader of
        this gateway could verify that Group's log, so it is never read for it."""
        if authority_id is not None and authority_id != self._group_authority:
            return
        self.readers.notify(group_id, last_sequence)
        self.discovery.hint(group_id, last_sequence)
        self.authority.notify(group_id, last_sequence)
        self.performance.hint(group_id)

    @contextlib.asynccontextmanager
    async def listening(
        self, host: str, port: int, *, artifact_port: int | None = None
    ) -> AsyncIterator[Server]:
        """Serve on ``host:port`` (0: a free port; read it from the server's sockets) and,
        with ``artifact_port``, the Artifact routes there (bound: :attr:`artifact_address`)."""
        async with self.running(), contextlib.AsyncExitStack() as stack:
            server = await stack.enter_async_context(
                websocket_server(self.serve, host, port, self.ssl_context)
            )
            if artifact_port is not None:
                https = await start_server(
                    self.routes, host, artifact_port, self.ssl_context, max_body=self.max_body
                )
                stack.push_async_callback(_closed, https)
                self.artifact_address = _bound(https)
            yield server

    @property
    def max_body(self) -> int:
        return self.options.max_artifact_bytes

    async def serve(self, websocket: ServerConnection) -> None:
        """Serve one WebSocket connection."""
        connection = Connection(self, websocket)
        self.open_connections.add(connection)
        self.count_connections()
        try:
            await connection.run()
        finally:
            self.open_connections.discard(connection)
            self.count_connections()

    def count_connections(self) -> None:
        """Set the gauge: open connections, with and without a live session."""
        if self._gauge is None:
            return
        live = sum(1 for c in self.open_connections if c.authenticated)
        self._gauge.set(live, {"authenticated": "true"})
        self._gauge.set(len(self.open_connections) - live, {"authenticated": "false"})

    async def routes(self, request: Request) -> Response:
        """Serve one Artifact, authorization, knowledge-import or performance-record request."""
        if is_performance_route(request.target):
            session = await ArtifactRoutes.session(request, self.session_of)
            return await serve_performance(self.performance, session, request)
        target_group = knowledge_imports.route_of(request.target)
        if target_group is not None:
            session = await ArtifactRoutes.session(request, self.session_of)
            return await knowledge_imports.serve(
                self.knowledge_imports, session, request, target_group
            )
        route = authorization.route_of(request.target)
        if route is not None:
            session = await ArtifactRoutes.session(request, self.session_of)
            return await authorization.serve(self.authorizations, session, request, route)
        return await ArtifactRoutes(self.artifacts, self.session_of, self.authority.agent_card)(
            request
        )

    async def session_of(self, token: str) -> Session:
        """The live session ``token`` names, checked as every frame's (expiry, fencing)."""
        session = self.sessions.get(token)
        if session is None:
            raise MwpError(
                ErrorCode.AUTH_REQUIRED,
                "Authorize with the session token of a HELLO on a live connection.",
                diagnostic=Diagnostic("session", "unknown-token"),
            )
        current = await self.authority.session_epoch(session.agent_id)
        session.check(self.clock(), current)
        return session


def websocket_server(
    handler: Callable[[ServerConnection], Awaitable[None]],
    host: str,
    port: int,
    context: ssl.SSLContext,
) -> contextlib.AbstractAsyncContextManager[Server]:
    """The gateway's WebSocket listener (an async context manager)."""
    return serve(
        handler,
        host,
        port,
        ssl=context,
        max_size=MAX_MESSAGE_BYTES,
        # No compression: a small compressed frame could expand past every bound.
        compression=None,
    )


def _bound(server: asyncio.Server) -> tuple[str, int]:
    name = server.sockets[0].getsockname()
    return str(name[0]), int(name[1])


async def _closed(server: asyncio.Server) -> None:
    server.close()
    await server.wait_closed()


class Connection:
    """One Agent's connection: its pending challenge, its session, its Commands in flight."""

    def __init__(self, gateway: Gateway, websocket: ServerConnection) -> None:
        self.gateway = gateway
        self.websocket = websocket
        self.pending: PendingChallenge | None = None
        self.session: Session | None = None
        self.agent_id: str | None = None  # the Agent of the first accepted HELLO, for good
        self.presence: dict[str, Any] | None = None
        self.commands: set[asyncio.Task[None]] = set()
        self.feeds: dict[str, Feed] = {}
        self.subscribing: set[asyncio.Task[None]] = set()
        self.standing: Standing | None = None

    @property
    def authority(self) -> Authority:
        return self.gateway.authority

    async def run(self) -> None:
        try:
            async for message in self.websocket:
                await self.receive(message)
        except ConnectionClosed:
            pass
        finally:
            await self.cancel_decisions()
            self.set_session(None)
            await self.end_feeds()
            if self.agent_id is not None:
                await self.gateway.cursor_writes.stored(self.agent_id)

    async def cancel_decisions(self) -> None:
        """Cancel the Commands and SUBSCRIBEs still being decided, and wait for them to end:
        a cancelled SUBSCRIBE releases the reader it took before the feeds end."""
        tasks = self.commands | self.subscribing
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def end_feeds(self) -> None:
        await self.sit_down()
        feeds, self.feeds = list(self.feeds.values()), {}
        for feed in feeds:
            await feed.stop()
            await self.gateway.readers.release(feed.group_id)

    async def send(self, frame: Mapping[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.websocket.send(encode(dict(frame)))

    async def send_error(
        self, error: MwpError, related_frame_id: str | None = None, *, fatal: bool | None = None
    ) -> None:
        await self.send(error_frame(error, related_frame_id=related_frame_id, fatal=fatal))

    async def receive(self, message: str | bytes) -> None:
        try:
            incoming = read_frame(message)
        except MwpError as exc:
            await self.send_error(exc)
            return
        try:
            await self.dispatch(incoming)
        except MwpError as exc:
            fatal = True if exc.code == ErrorCode.AUTH_STALE_SESSION else None
            await self.send_error(exc, incoming.frame.frame_id, fatal=fatal)
        except Exception:  # the authority side failed (Temporal unreachable...): say so, go on
            log.exception("serving a %s frame failed", _kind(incoming.frame))
            await self.send_error(_unavailable(), incoming.frame.frame_id)

    async def dispatch(self, incoming: Incoming) -> None:
        frame = incoming.frame
        if isinstance(frame, HelloClientInit):
            await self.hello_init(frame)
        elif isinstance(frame, HelloClientResponse):
            await self.hello_response(frame)
        elif isinstance(frame, ErrorFrame):
            log.info("peer reported %s", frame.error.code)
        elif getattr(frame, "frame_type", None) == "HELLO":
            raise _violation("a server's HELLO phase sent by a client", "server-phase")
        else:
            session = await self.current_session()
            if isinstance(frame, PingFrame):
                await self.ping(frame, session)
            elif isinstance(frame, CommandFrame):
                await self.command(frame, incoming.value["command"], session)
            elif isinstance(frame, SubscribeFrame):
                # Decided beside the frame loop: a Group's first read holds up no ACK.
                task = asyncio.create_task(self.subscribe(frame, session))
                self.subscribing.add(task)
                task.add_done_callback(self.subscribing.discard)
            elif isinstance(frame, AckFrame):
                await self.acknowledge(frame, session)
            else:
                raise _violation(f"a client does not send {_kind(frame)}.", "server-frame")

    # --- HELLO ----------------------------------------------------------------------------

    async def hello_init(self, frame: HelloClientInit) -> None:
        self.pending = None  # a new handshake replaces any unanswered challenge
        if self.agent_id is not None and frame.agent_id != self.agent_id:
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                "A connection serves one Agent; open another connection for another Agent.",
                diagnostic=Diagnostic("hello", "another-agent"),
            )
        self.pending = issue_challenge(
            frame,
            server_nonce=secrets.token_bytes(NONCE_BYTES),
            challenge=secrets.token_bytes(NONCE_BYTES),
            server_certificate=self.gateway.server_certificate,
            now=self.gateway.clock(),
            policy=self.gateway.options.hello,
        )
        await self.send(challenge_frame(self.pending, new_frame_id()))

    async def hello_response(self, frame: HelloClientResponse) -> None:
        pending, self.pending = self.pending, None  # one answer per challenge, right or wrong
        evidence = await self.authority.evidence()
        verify_response(pending, frame, evidence, self.gateway.clock())
        assert pending is not None  # verify_response refuses a response to no challenge
        epoch = await self.authority.open_session(pending.agent_id)
        self.set_session(None)
        session = accept(
            pending,
            session_epoch=epoch,
            token=secrets.token_bytes(NONCE_BYTES),
            now=self.gateway.clock(),
            policy=self.gateway.options.hello,
        )
        self.set_session(session)
        self.agent_id = pending.agent_id
        await self.end_feeds()  # subscriptions belong to a session: SUBSCRIBE again
        await self.send(accept_frame(session, new_frame_id()))
        for other in list(self.gateway.open_connections):  # fenced now, not at their next frame
            if other is not self:
                await other.fence(session.agent_id, epoch)

    async def fence(self, agent_id: str, current_epoch: int) -> None:
        """A newer Session of ``agent_id`` was opened here: this connection's older one ends,
        and the Agent is told so at once (``AUTH_STALE_SESSION``, fatal)."""
        session = self.session
        if session is None or session.agent_id != agent_id:
            return
        if session.session_epoch >= current_epoch:
            return
        self.set_session(None)
        await self.end_feeds()
        try:
            session.check(self.gateway.clock(), current_epoch)
        except MwpError as fenced:
            with contextlib.suppress(ConnectionClosed):
                await self.send_error(fenced, fatal=True)

    async def current_session(self) -> Session:
        session = self.session
        if session is None:
            raise MwpError(
                ErrorCode.AUTH_REQUIRED,
                "Authenticate with HELLO first.",
                diagnostic=Diagnostic("session", "no-session"),
            )
        current = await self.authority.session_epoch(session.agent_id)
        try:
            session.check(self.gateway.clock(), current)
        except MwpError:
            self.set_session(None)  # expired or fenced: only a new HELLO continues
            await self.end_feeds()
            raise
        return session

    def set_session(self, session: Session | None) -> None:
        """This connection's session; its token authorizes the Artifact routes while set."""
        if self.session is not None:
            self.gateway.sessions.pop(self.session.token, None)
        self.session = session
        if session is not None:
            self.gateway.sessions[session.token] = session
        self.gateway.count_connections()

    @property
    def authenticated(self) -> bool:
        return self.session is not None

    def serves(self, session: Session) -> bool:
        """Whether ``session`` is still this connection's, unexpired (checked per delivery)."""
        return self.session is session and self.gateway.clock() < session.expires_at

    # --- SUBSCRIBE and ACK ----------------------------------------------------------------

    async def subscribe(self, frame: SubscribeFrame, session: Session) -> None:
        groups = [g for g in frame.groups if str(g.group_id) != MEMBER_GROUPS]
        standing = [g for g in frame.groups if str(g.group_id) == MEMBER_GROUPS]
        if standing:
            await self.stand(frame, standing[-1], session)
        # Each Group on its own: one Group's refusal or slow read holds up no other.
        await asyncio.gather(*(self.subscribe_group(frame, g, session) for g in groups))

    async def subscribe_group(
        self, frame: SubscribeFrame, wanted: GroupSubscriptionRequest, session: Session
    ) -> None:
        loop = asyncio.get_running_loop()
        not_before = loop.time() + self.gateway.options.refusal_seconds
        group_id, agent_id = str(wanted.group_id), session.agent_id
        readers = self.gateway.readers
        # The same work for every Group ID: a complete read of its log, the Agent's Cursor.
        try:
            reader = await readers.acquire(group_id)
        except Exception:
            log.exception("reading the Group log of %s failed", group_id)
            await self.send_error(_unavailable(), frame.frame_id)
            return
        try:
            await self.gateway.cursor_writes.stored(agent_id, [group_id])
            stored = await asyncio.to_thread(self.authority.cursors.load, group_id, agent_id)
        except Exception:
            log.exception("loading a Cursor of %s failed", group_id)
            await readers.release(group_id)
            await self.send_error(_unavailable(), frame.frame_id)
            return
        except BaseException:  # cancelled (the connection ends): the reader is not kept
            await readers.release(group_id)
            raise
        if not reader.timeline.ever_member(agent_id):
            await readers.release(group_id)
            await asyncio.sleep(max(0.0, not_before - loop.time()))
            await self.send_error(group_not_found(group_id), frame.frame_id)
            return
        await self.open_feed(
            reader,
            stored,
            after=int(wanted.after_sequence),
            attention=wanted.attention,
            frame_id=frame.frame_id,
            session=session,
        )

    async def open_feed(
        self,
        reader: GroupReader,
        stored: Cursor | None,
        *,
        after: int,
        attention: Attention | None,
        frame_id: str,
        session: Session,
    ) -> None:
        """Deliver the reader's Group from ``max(after, stored)``, replacing the connection's
        feed of the Group; takes over one use of the reader (released if no feed starts)."""
        readers, group_id = self.gateway.readers, reader.group_id
        acknowledged = stored.sequence if stored is not None else 0
        fault = reader.fault
        if (
            fault is None
            and stored is not None
            and stored.sequence > 0
            and (
                stored.sequence > reader.head
                or reader.entry(stored.sequence).signing_hash != stored.head_hash
            )
        ):
            fault = _log_fault(group_id, "cursor-not-in-log")
        if fault is not None or not self.serves(session):
            await readers.release(group_id)
            if fault is not None:
                await self.send_error(fault, frame_id)
            return
        feed = Feed(
            reader,
            session.agent_id,
            start=max(after, acknowledged),
            acknowledged=acknowledged,
            attention=attention,
            window=self.gateway.options.group_window,
            retry_after_ms=self.gateway.options.retry_after_ms,
            send=self.send,
            related_frame_id=frame_id,
            current=lambda: self.serves(session),
        )
        # Swapped with no await between: a concurrent SUBSCRIBE or standing attach of the
        # same Group cannot leave two feeds. The old one sends nothing once cancelled.
        old = self.feeds.pop(group_id, None)
        if old is not None:
            old.cancel()
        self.feeds[group_id] = feed
        feed.start()
        if old is not None:
            try:
                await old.stop()
            finally:
                await readers.release(group_id)

    # --- the standing subscription (every Group the Agent is a member of) ---------------

    async def stand(
        self, frame: SubscribeFrame, wanted: GroupSubscriptionRequest, session: Session
    ) -> None:
        """Deliver every Group the Agent is or was a member of, from its stored Cursors (the
        entry's ``afterSequence`` is not used); a later standing SUBSCRIBE replaces it."""
        if not self.serves(session):
            return
        attention, frame_id = wanted.attention, frame.frame_id

        async def attach(reader: GroupReader) -> None:
            await self.attach(reader, attention=attention, frame_id=frame_id, session=session)

        # The new one first: the readers discovery holds stay held across the change.
        old, self.standing = self.standing, Standing(session.agent_id, self.follows, attach)
        self.gateway.discovery.add(self.standing)
        if old is not None:
            await self.gateway.discovery.remove(old)

    async def sit_down(self) -> None:
        standing, self.standing = self.standing, None
        if standing is not None:
            await self.gateway.discovery.remove(standing)

    def follows(self, group_id: str) -> bool:
        """Whether the connection delivers the Group: a live feed, or one that ended with
        the Agent's Membership, until the Agent is a member again."""
        feed = self.feeds.get(group_id)
        if feed is None:
            return False
        return feed.running or feed.reader.timeline.membership(feed.agent_id) is None

    async def attach(
        self,
        reader: GroupReader,
        *,
        attention: Attention | None,
        frame_id: str,
        session: Session,
    ) -> None:
        group_id, readers = reader.group_id, self.gateway.readers
        if not self.serves(session) or self.follows(group_id):
            return
        if readers.retain(group_id) is not reader:  # let go of since: nothing to deliver
            if group_id in readers:
                await readers.release(group_id)
            return
        try:
            await self.gateway.cursor_writes.stored(session.agent_id, [group_id])
            stored = await asyncio.to_thread(
                self.authority.cursors.load, group_id, session.agent_id
            )
        except BaseException:
            await readers.release(group_id)
            raise
        if self.follows(group_id):  # an explicit SUBSCRIBE got there first
            await readers.release(group_id)
            return
        await self.open_feed(
            reader, stored, after=0, attention=attention, frame_id=frame_id, session=session
        )

    async def acknowledge(self, frame: AckFrame, session: Session) -> None:
        checked: list[tuple[Feed, int]] = []
        for ack in frame.acknowledgements:  # all checked before any is stored
            feed = self.feeds.get(str(ack.group_id))
            if feed is None:
                raise group_not_found(str(ack.group_id))
            if ack.sequence > min(feed.position, feed.reader.head):
                raise MwpError(
                    ErrorCode.PROTOCOL_VIOLATION,
                    "An ACK may not pass what this connection delivered.",
                    group_id=feed.group_id,
                    diagnostic=Diagnostic("gateway", "ack-beyond-delivery"),
                )
            checked.append((feed, int(ack.sequence)))
        for feed, sequence in checked:
            if sequence <= feed.acknowledged:
                continue  # a Cursor never moves back
            # Stored beside the frame loop (mwp.gateway.cursor_writes): a PING, a new feed of
            # the Group and the connection's end wait for it; the next frame does not.
            self.gateway.cursor_writes.acknowledge(session.agent_id, feed.cursor(sequence))
            feed.acknowledge(sequence)

    # --- PING -----------------------------------------------------------------------------

    async def ping(self, frame: PingFrame, session: Session) -> None:
        if frame.presence is not None:
            if frame.presence.agent_id != session.agent_id:
                raise MwpError(
                    ErrorCode.AUTH_FORBIDDEN,
                    "A Presence Record may only describe the session's own Agent.",
                    diagnostic=Diagnostic("presence", "another-agent"),
                )
            if frame.presence.session_epoch != session.session_epoch:
                raise MwpError(
                    ErrorCode.AUTH_STALE_SESSION,
                    "The Presence Record names another Session Epoch.",
                    diagnostic=Diagnostic("presence", "session-epoch"),
                )
            self.presence = frame.presence.model_dump(by_alias=True, exclude_unset=True)
        session.prolong(self.gateway.clock(), self.gateway.options.hello)
        if frame.reply_to_nonce is not None:
            return  # a reply to a PING of ours: nothing to echo
        # The echo tells the Agent its earlier frames are decided: its ACKs stored too.
        await self.gateway.cursor_writes.stored(session.agent_id)
        await self.send(
            {
                "protocolVersion": PROTOCOL_VERSION,
                "frameId": new_frame_id(),
                "frameType": "PING",
                "nonce": b64url_encode(secrets.token_bytes(16)),
                "replyToNonce": frame.nonce,
                "sentAt": format_utc(self.gateway.clock()),
            }
        )

    # --- COMMAND --------------------------------------------------------------------------

    async def command(self, frame: CommandFrame, command: dict[str, Any], session: Session) -> None:
        action_id = frame.command.action_id
        actor = frame.command.actor
        if (actor.type, actor.id) != ("agent", session.agent_id):
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                "A connection carries only its own Agent's Commands.",
                action_id=action_id,
                diagnostic=Diagnostic("gateway", "actor-not-session-agent"),
            )
        epoch = frame.command.session_epoch
        if epoch is not None and epoch != session.session_epoch:
            raise MwpError(
                ErrorCode.AUTH_STALE_SESSION,
                "The Command carries another Session Epoch than this session's.",
                action_id=action_id,
                diagnostic=Diagnostic("gateway", "command-session-epoch"),
            )
        if len(self.commands) >= self.gateway.options.commands_in_flight:
            raise MwpError(
                ErrorCode.BACKPRESSURE,
                "Too many Commands in flight on this connection.",
                action_id=action_id,
                retry_after_ms=500,
                diagnostic=Diagnostic("gateway", "commands-in-flight"),
            )
        task = asyncio.create_task(self.decide(frame.frame_id, command))
        self.commands.add(task)
        task.add_done_callback(self.commands.discard)

    async def undisclosed(
        self, command: dict[str, Any], refusal: MwpError, arrived: float
    ) -> MwpError:
        """The refusal to send: for an Agent that was never a member of the Command's Group,
        the answer a Group that does not exist gets (``GROUP_NOT_FOUND``, no sooner than the
        lookup of an unknown Group takes), so a COMMAND tells a stranger no more than a
        SUBSCRIBE does (spec 17.2). Members, current or former, get the Authority's answer."""
        group_id = command.get("groupId")
        if refusal.code == ErrorCode.GROUP_NOT_FOUND or not isinstance(group_id, str):
            return refusal
        readers = self.gateway.readers
        try:
            reader = await readers.acquire(group_id)
        except Exception:
            log.exception("reading the Group log of %s failed", group_id)
            return refusal
        try:
            stranger = self.agent_id is None or not reader.timeline.ever_member(self.agent_id)
        finally:
            await readers.release(group_id)
        if not stranger:
            return refusal
        lookup = getattr(self.authority, "group_lookup_seconds", GROUP_LOOKUP_SECONDS)
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, arrived + lookup - loop.time()))
        return group_not_found(group_id)

    async def decide(self, frame_id: str, command: dict[str, Any]) -> None:
        arrived = asyncio.get_running_loop().time()
        try:
            decided = await self.authority.decide(command)
        except MwpError as refusal:
            exc = await self.undisclosed(command, refusal, arrived)
            if exc.action_id is None and getattr(exc, "wire", None) is None:
                exc.action_id = command.get("actionId")
            await self.send_error(exc, frame_id)
            return
        except WorkflowUpdateRPCTimeoutOrCancelledError:  # the sender's resend is decided once
            log.warning(
                "no decision on Command %s in time: its sender may resend it",
                command.get("actionId"),
            )
            await self.send_error(_unavailable(command.get("actionId")), frame_id)
            return
        except Exception:  # anything else: the Authority's answer is unknown, resend is safe
            log.exception("forwarding a Command failed")
            await self.send_error(_unavailable(command.get("actionId")), frame_id)
            return
        for event in decided.events:
            await self.send(
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "frameId": new_frame_id(),
                    "frameType": "EVENT",
                    "event": event,
                }
            )
        await self.send(
            {
                "protocolVersion": PROTOCOL_VERSION,
                "frameId": new_frame_id(),
                "frameType": "ACK",
                "acknowledgements": [
                    {
                        "groupId": decided.receipt["groupId"],
                        "sequence": decided.receipt["lastSequence"],
                    }
                ],
                "sentAt": format_utc(self.gateway.clock()),
            }
        )


def _unavailable(action_id: str | None = None) -> MwpError:
    # Unknown outcome: an unchanged resend is safe (a Command is idempotent by Action ID).
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The authority zone could not be reached.",
        action_id=action_id,
        retryable=True,
        diagnostic=Diagnostic("gateway", "authority-unavailable"),
    )


def _log_fault(group_id: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The Group log could not be read.",
        group_id=group_id,
        diagnostic=Diagnostic("gateway", reason),
    )


def _violation(message: str, reason: str) -> MwpError:
    return MwpError(ErrorCode.PROTOCOL_VIOLATION, message, diagnostic=Diagnostic("gateway", reason))


def _kind(frame: Frame) -> str:
    return "EVENT" if isinstance(frame, EventFrame) else str(getattr(frame, "frame_type", "?"))
