"""The agent worker process: one Agent's runtime on the agent's own task queue.

``mwp agent run MODULE:ATTR`` (or :func:`run_agent_worker`) imports the Agent declaration and
runs a Temporal Worker on ``mwp-agent/<agent id>`` hosting its AgentWorkflow (the Worker
Scheduler) and its capability and tool activities, over a :class:`ToolLedger`; it stops
cleanly on SIGINT or SIGTERM.

By default (``gateway=GatewaySettings(...)``) the runtime reaches the authority zone only
through the Group gateway: its HELLO opens the Session, the standing subscription feeds the
AgentWorkflow, Commands, Artifacts and checkpoints go through the gateway, and Temporal
(``address``/``namespace``: the agents' namespace) serves only the agent's own workflow and
activities. The agent's card must be registered by the authority side beforehand (``mwp
registry add-agent``); the runtime serves under the version the Registry holds, which it reads
through the gateway. A dropped connection is reconnected under a new Session; the worker and
its runs outlive it, a run holding a lease going on with reversible work until its offline
grace ends (``mwp.agent.offline``), and what it buffered is reconciled first on reconnect.

Without ``gateway`` (``mwp agent run --direct``, the operators' mode) it makes sure the
Organization's registry holds its current Agent Card (registering a new card version when the
key, capabilities or concurrency changed), opens a new Session (its Session Epoch fences every
older session of the agent) and reads the Group logs from the object store.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from mwp.agent.declaration import Agent
from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.gateway_inbox import GatewayInboxes
from mwp.agent.gateway_link import GatewayLink, GatewaySettings, GatewayUnavailableError
from mwp.agent.inbox import GroupInboxes
from mwp.agent.ledger import ToolLedger
from mwp.agent.offline import Disconnected
from mwp.agent.reconnect import Reconnect
from mwp.agent.signals import SchedulerSignals
from mwp.client import KeyStore, MwpClient, OrganizationRegistryClient, connect
from mwp.client.state_dir import REGISTRY_KEY_NAME, StateDirError
from mwp.client.state_dir import organization_id_of as state_dir_organization
from mwp.contracts.agent import (
    QUERY_CURSORS,
    SIGNAL_DELIVER,
    SIGNAL_SESSION,
    Delivery,
    SessionChange,
    agent_task_queue,
    agent_workflow_id,
)
from mwp.contracts.messages import group_authority
from mwp.core.errors import ErrorCode, MwpError
from mwp.stores.objects import ObjectStore, S3ObjectStore, open_store
from mwp.workers.held_task import release_held_work
from mwp.workers.plugin import MwpPlugin
from mwp.workers.run_lines import RunLines, agent_name
from mwp.workers.runtime_watch import RuntimeWatch, replaced_line
from mwp.workers.tracing import active_interceptors


class AgentWorkerError(Exception):
    """A user-facing failure of the agent worker (printed without a traceback)."""


def load_agent(target: str) -> Agent:
    """The :class:`Agent` named by ``MODULE:ATTR`` (``ATTR`` may be dotted)."""
    return load_declaration(target, Agent, "an mwp.agent.Agent declaration")


T = TypeVar("T")

log = logging.getLogger(__name__)
STICKY_TIMEOUT = timedelta(seconds=2)


def load_declaration(target: str, kind: type[T], what: str) -> T:
    """The ``kind`` instance named by ``MODULE:ATTR`` (an Agent, a Coordinator)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise AgentWorkerError(f"expected MODULE:ATTR (e.g. myagents.writer:agent), got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: agents next to the caller
    try:
        value: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise AgentWorkerError(f"cannot import module {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise AgentWorkerError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(value, kind):
        raise AgentWorkerError(f"{target} is a {type(value).__name__}, not {what}")
    return value


def organization_id_of(state_dir: Path, organization_id: str | None = None) -> str:
    """``organization_id``, else the one `mwp registry init` remembered in ``state_dir``."""
    try:
        return state_dir_organization(state_dir, organization_id)
    except StateDirError as exc:
        raise AgentWorkerError(str(exc)) from None


def _card_matches(card: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    def capabilities(c: Mapping[str, Any]) -> list[Any]:
        return sorted(json.dumps(entry, sort_keys=True) for entry in c["capabilities"])

    return (
        {k["keyId"] for k in wanted["publicKeys"]} <= {k["keyId"] for k in card["publicKeys"]}
        and capabilities(card) == capabilities(wanted)
        and card.get("maxConcurrency") == wanted["maxConcurrency"]
        and card.get("displayName") == wanted["displayName"]
        and card.get("owner") == wanted["owner"]
    )


async def ensure_registered(registry: OrganizationRegistryClient, agent: Agent) -> int:
    """The Agent Card version the registry holds for ``agent``, registering a new version
    first when the registered card does not match the declaration (or there is none)."""
    wanted = agent.card()
    if wanted["organizationId"] != registry.organization_id:
        raise AgentWorkerError(
            f"{agent.agent_id} is declared for {wanted['organizationId']}, "
            f"not {registry.organization_id}"
        )
    current = await registry.agent_card(agent.agent_id)
    if current is not None and _card_matches(current, wanted):
        version: int = current["cardVersion"]
        return version
    if current is not None:
        wanted["cardVersion"] = max(int(current["cardVersion"]) + 1, agent.card_info.card_version)
    result = await registry.register_agent_card(wanted)
    registered: int = result["cardVersion"]
    return registered


def build_agent_worker(
    client: Client,
    agent: Agent,
    ledger: ToolLedger,
    *,
    task_queue: str | None = None,
    runtime: MwpClient | None = None,
    card_version: int | None = None,
    gateway: GatewayConnection | None = None,
    **options: Any,
) -> Worker:
    """A Worker on ``agent``'s task queue (or ``task_queue``) hosting its tool activity and,
    given the ``runtime`` client, its AgentWorkflow (the Worker Scheduler) with the
    ``accept_offer`` and ``run_capability`` activities. ``card_version`` is the Agent Card
    version the registry holds for ``agent`` (:func:`ensure_registered`): its runs name it as
    the producer of what they publish. With ``gateway`` its activities reach the Groups
    through that connection only."""
    from mwp.activities.agent import AgentActivities
    from mwp.activities.tools import ToolActivities
    from mwp.workflows.agent import AgentWorkflow

    tools = ToolActivities(agent, ledger)
    activities: list[Callable[..., Any]] = [tools.run_tool]
    workflows: list[type] = []
    if runtime is not None:
        agents = AgentActivities(agent, runtime, ledger.store, card_version, gateway=gateway)
        activities += [
            agents.accept_offer,
            agents.run_capability,
            agents.disclose_schedule,
            agents.signing_key,
        ]
        workflows.append(AgentWorkflow)
    options.setdefault("max_concurrent_activities", max(8, 4 * agent.max_concurrency))
    # A runtime killed while its AgentWorkflow was cached leaves that workflow's next tasks on
    # its sticky queue until this runs out. Its replacement releases that queue at its start
    # (:func:`release_sticky_queue`); this bounds what is left to anyone else (the SDK's 10 s
    # default made a restarted agent idle that long). A cache miss costs one replay.
    options.setdefault("sticky_queue_schedule_to_start_timeout", STICKY_TIMEOUT)
    return Worker(
        client,
        task_queue=task_queue or agent_task_queue(agent.agent_id),
        activities=activities,
        workflows=workflows,
        plugins=[MwpPlugin()],
        **options,
    )


def agent_input(agent: Agent, card_version: int, session_epoch: int, **options: Any) -> Any:
    """The AgentWorkflow's input for ``agent`` (its card's capabilities and concurrency, its
    declared mean run)."""
    from mwp.contracts.agent import AgentInput

    served: dict[str, list[str]] = {}
    for spec in agent.capabilities:
        served.setdefault(spec.id, []).append(spec.version)
    return AgentInput(
        agent_id=agent.agent_id,
        card_version=card_version,
        capabilities={k: sorted(v) for k, v in served.items()},
        slots=agent.max_concurrency,
        session_epoch=session_epoch,
        **{"mean_duration_seconds": agent.mean_run_seconds, **options},
    )


async def start_scheduler(
    client: Client, agent: Agent, card_version: int, session_epoch: int, **options: Any
) -> None:
    """Start the agent's AgentWorkflow, or tell the running one about the new Session (sealed
    with the agent's key, as every signal to it)."""
    from mwp.workflows.agent import AgentWorkflow

    await client.start_workflow(
        AgentWorkflow.run,
        agent_input(agent, card_version, session_epoch, **options),
        id=agent_workflow_id(agent.agent_id),
        task_queue=agent_task_queue(agent.agent_id),
        start_signal=SIGNAL_SESSION,
        start_signal_args=[SchedulerSignals(agent.identity).sealed(SessionChange(session_epoch))],
    )


async def release_sticky_queue(client: Client, agent_id: str) -> None:
    """Send the AgentWorkflow's next tasks to the agent's task queue, where this process's new
    worker polls, not to the sticky queue of an earlier process of the agent (killed, or about
    to be fenced by this one's Session), where they would wait out :data:`STICKY_TIMEOUT` first.
    A new process never holds the workflow cached, so nothing is lost: its worker replays it."""
    request = ResetStickyTaskQueueRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=agent_workflow_id(agent_id)),
    )
    try:
        await client.workflow_service.reset_sticky_task_queue(request)
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:  # NOT_FOUND: its first start
            log.warning("could not release the AgentWorkflow's sticky queue: %s", exc)


def _scheduler_feed(
    client: Client, agent: Agent
) -> tuple[Callable[[], Any], Callable[[dict[str, Any]], Any]]:
    """The AgentWorkflow's Cursors, and a delivery of one batch to it (sealed with the
    agent's key)."""
    handle = client.get_workflow_handle(agent_workflow_id(agent.agent_id))
    signals = SchedulerSignals(agent.identity)

    async def cursors() -> dict[str, Any]:
        value: dict[str, Any] = await handle.query(QUERY_CURSORS)
        return value

    async def deliver(batch: dict[str, Any]) -> None:
        await handle.signal(SIGNAL_DELIVER, signals.sealed(Delivery.from_body(batch)))

    return cursors, deliver


def scheduler_inboxes(
    client: MwpClient, registry: OrganizationRegistryClient, agent: Agent, store: ObjectStore
) -> GroupInboxes:
    """The agent's Group inboxes, feeding its AgentWorkflow (each batch sealed with the
    agent's key)."""
    cursors, deliver = _scheduler_feed(client.temporal, agent)
    authority = group_authority(registry.organization_id)
    return GroupInboxes(
        store, registry.evidence, cursors, deliver, authority=authority, agent_id=agent.agent_id
    )


def gateway_inboxes(
    client: Client,
    link: GatewayLink,
    agent: Agent,
    journal: ObjectStore,
) -> GatewayInboxes:
    """The agent's inboxes in gateway mode: its gateway subscription feeding its
    AgentWorkflow, journaled in the agent's own ``journal`` store."""
    cursors, deliver = _scheduler_feed(client, agent)
    return GatewayInboxes(link, cursors, deliver, agent_id=agent.agent_id, journal=journal)


@dataclass(frozen=True)
class AgentSession:
    """What starting the worker established: the card version and the new Session Epoch."""

    organization_id: str
    card_version: int
    session_epoch: int
    task_queue: str
    # Set when the runtime stopped because another one opened a newer Session of the agent.
    replaced_by: int | None = None


async def run_agent_worker(
    agent: Agent,
    *,
    address: str = "127.0.0.1:7233",
    namespace: str = "default",
    state_dir: Path = Path(".mwp"),
    organization_id: str | None = None,
    tool_store: str | None = None,
    on_ready: Callable[[AgentSession], None] | None = None,
    scheduler_options: Mapping[str, Any] | None = None,
    stop: asyncio.Event | None = None,
    report: Callable[[str], None] | None = None,
    gateway: GatewaySettings | None = None,
) -> AgentSession:
    """Register, open a Session, run the agent's runtime until ``stop`` is set (without one:
    until SIGINT or SIGTERM); the session. ``scheduler_options`` go to the AgentWorkflow's
    input (for example ``lease_seconds``, ``weights``, ``quotas``). ``report`` gets one line
    per run as its outcome is known, per declined offer, and when another runtime of the agent
    replaced this one's Session, which stops it (default: printed to stdout). With
    ``gateway`` the runtime goes through the gateway only (see the module docstring)."""
    if gateway is not None:
        return await _run_through_gateway(
            agent,
            gateway,
            address=address,
            namespace=namespace,
            tool_store=tool_store or str(state_dir / "agent-ledger"),
            on_ready=on_ready,
            scheduler_options=scheduler_options,
            stop=stop,
            report=report,
        )
    organization = organization_id_of(state_dir, organization_id)
    registrar = KeyStore.in_state_dir(state_dir).load(REGISTRY_KEY_NAME)
    client = await connect(address, namespace, interceptors=active_interceptors())
    registry = client.registry(organization, registrar)
    card_version = await ensure_registered(registry, agent)
    epoch = await registry.open_session(agent.agent_id)
    store = _open_store(str(tool_store or state_dir / "objects"))
    queue = agent_task_queue(agent.agent_id)
    lines = report or _print_line
    worker = _runtime_worker(client, agent, store, card_version, lines)
    session = AgentSession(organization, card_version, epoch, queue)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if stop is None else ()
    stop = stop or asyncio.Event()
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    try:
        await release_held_work(client.temporal, agent.agent_id)  # before this worker polls
        async with worker:
            await release_sticky_queue(client.temporal, agent.agent_id)
            await start_scheduler(
                client.temporal, agent, card_version, epoch, **(scheduler_options or {})
            )
            inboxes = scheduler_inboxes(client, registry, agent, store)
            feeding = asyncio.create_task(inboxes.run(stop))
            watch = RuntimeWatch(client.temporal, registry, agent.agent_id, epoch, lines)
            watching = asyncio.create_task(watch.run(stop))
            if on_ready is not None:
                on_ready(session)
            await stop.wait()
            await feeding
            await watching
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
    return dataclasses.replace(session, replaced_by=watch.replaced_by)


async def _run_through_gateway(
    agent: Agent,
    settings: GatewaySettings,
    *,
    address: str,
    namespace: str,
    tool_store: str,
    on_ready: Callable[[AgentSession], None] | None,
    scheduler_options: Mapping[str, Any] | None,
    stop: asyncio.Event | None,
    report: Callable[[str], None] | None,
) -> AgentSession:
    """:func:`run_agent_worker` in gateway mode: the gateway is the only door to the authority
    zone; ``tool_store`` is the agent's own (its tool ledger, journal and audit records).

    A dropped connection is reconnected (with backoff): the new HELLO opens a new Session, so
    the Group revokes the old one's leases and the same AgentWorkflow, told of the new
    Session, starts that work again from its latest checkpoints, as after a restart. The
    worker is not restarted: runs that went on offline meanwhile have buffered their
    checkpoints in ``connection``, which are reconciled through the new link before anything
    else is sent under the new Session. A connection the gateway ended for good (a newer
    Session of the agent fenced it) stops the runtime."""
    organization = str(agent.card()["organizationId"])
    client = await connect(address, namespace, interceptors=active_interceptors())
    store = _open_store(tool_store)
    queue = agent_task_queue(agent.agent_id)
    lines = report or _print_line
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if stop is None else ()
    stop = stop or asyncio.Event()
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    session: AgentSession | None = None
    reconnect = Reconnect()
    name = agent_name(agent.agent_id)
    connection = GatewayConnection(
        agent,
        grace_seconds=settings.offline_grace_seconds,
        journal=store,
        report=lambda line: lines(f"{name}: {line}"),
    )
    worker: Worker | None = None
    try:
        async with contextlib.AsyncExitStack() as serving:
            while not stop.is_set():
                try:
                    async with GatewayLink.open(settings, agent) as link:
                        reconnect.connected()
                        card_version = await _registered_card(link, agent, lines)
                        connection.card_version = card_version
                        session = AgentSession(
                            organization, card_version, link.session_epoch, queue
                        )
                        # Offline progress first: nothing of the new Session may precede it.
                        if not await _unless_stopped(connection.reconcile(link), stop):
                            break
                        connection.attach(link)
                        try:
                            if worker is None:
                                worker = _runtime_worker(
                                    client, agent, store, card_version, lines, gateway=connection
                                )
                                await release_held_work(client.temporal, agent.agent_id)
                                await serving.enter_async_context(worker)
                                await release_sticky_queue(client.temporal, agent.agent_id)
                            await start_scheduler(
                                client.temporal,
                                agent,
                                card_version,
                                link.session_epoch,
                                **(scheduler_options or {}),
                            )
                            if on_ready is not None:
                                on_ready(session)
                                on_ready = None
                            await _serve_link(client, link, agent, store, stop, lines)
                        finally:
                            connection.detach(link)
                        if link.fatal is not None:
                            session = _ended(session, link.fatal, agent, lines)
                            break
                except (GatewayUnavailableError, Disconnected) as exc:
                    if session is None:
                        raise  # never connected: the settings are wrong, or nothing listens
                    lines(f"{name}: {exc}")
                if stop.is_set():
                    break
                wait = reconnect.next_wait()
                lines(f"{name}: the gateway connection was lost; reconnecting in {wait:g} s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
    assert session is not None
    return session


async def _registered_card(link: GatewayLink, agent: Agent, lines: Callable[[str], None]) -> int:
    """The version of the agent's Agent Card the Registry holds (the runtime serves under it:
    offers pin it), read through the gateway; a card that lacks a capability the declaration
    serves is named, since offers of that work cannot pin it."""
    card = await link.agent_card()
    if card is None:
        raise GatewayUnavailableError(
            f"the Registry holds no Agent Card of {agent.agent_id}: register it first "
            "(`mwp registry add-agent`)"
        )
    registered = {(c["id"], c["version"]) for c in card.get("capabilities", [])}
    missing = [
        f"{spec.id}@{spec.version}"
        for spec in agent.capabilities
        if (spec.id, spec.version) not in registered
    ]
    version = int(card["cardVersion"])
    if missing:
        lines(
            f"{agent_name(agent.agent_id)}: its registered Agent Card v{version} does not "
            f"declare {', '.join(missing)}; no offer of that work can name this runtime until "
            "a card that does is registered"
        )
    return version


def _ended(
    session: AgentSession, fatal: MwpError, agent: Agent, lines: Callable[[str], None]
) -> AgentSession:
    """The session the gateway ended for good: replaced by a newer Session of the agent (as
    :class:`RuntimeWatch` says it in the default mode), or another fatal refusal."""
    name = agent_name(agent.agent_id)
    current = (fatal.details or {}).get("currentSessionEpoch")
    if fatal.code is ErrorCode.AUTH_STALE_SESSION and isinstance(current, int):
        lines(replaced_line(name, session.session_epoch, current))
        return dataclasses.replace(session, replaced_by=current)
    lines(f"{name}: the gateway ended the session: {fatal}")
    return session


async def _unless_stopped(work: Awaitable[object], stop: asyncio.Event) -> bool:
    """Whether ``work`` ran to its end; False when ``stop`` came first (it is cancelled then).
    A runtime told to stop while its reconciliation waits for receipts from a gateway that
    does not answer stops now, not minutes later when every resend has given up."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
    if not task.done() or task.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    task.result()  # its error, if any
    return True


async def _serve_link(
    client: MwpClient,
    link: GatewayLink,
    agent: Agent,
    store: ObjectStore,
    stop: asyncio.Event,
    lines: Callable[[str], None],
) -> None:
    """Feed the AgentWorkflow from ``link`` until ``stop`` is set or the link closes."""
    inboxes = gateway_inboxes(client.temporal, link, agent, store)
    ended = asyncio.Event()
    feeding = asyncio.create_task(inboxes.run(ended))
    watch = RuntimeWatch(client.temporal, None, agent.agent_id, link.session_epoch, lines)
    watching = asyncio.create_task(watch.run(ended))  # the declines, one line each
    stopping = asyncio.create_task(stop.wait())
    closing = asyncio.create_task(link.closed.wait())
    await asyncio.wait({stopping, closing}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    closing.cancel()
    ended.set()
    await feeding
    await watching


def _open_store(location: str) -> ObjectStore:
    store = open_store(location)
    if isinstance(store, S3ObjectStore):
        store.ensure_bucket()
    return store


def _runtime_worker(
    client: MwpClient,
    agent: Agent,
    store: ObjectStore,
    card_version: int,
    lines: Callable[[str], None],
    *,
    gateway: GatewayConnection | None = None,
) -> Worker:
    """The worker `mwp agent run` serves the agent's task queue with, printing its run lines."""
    return build_agent_worker(
        client.temporal,
        agent,
        ToolLedger(store),
        task_queue=agent_task_queue(agent.agent_id),
        runtime=client,
        card_version=card_version,
        gateway=gateway,
        interceptors=[RunLines(agent_name(agent.agent_id), lines)],
    )


def _print_line(line: str) -> None:
    print(line, flush=True)  # flushed: whoever reads the process's pipe sees each run end
