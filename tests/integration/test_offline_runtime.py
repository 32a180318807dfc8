"""The agent runtime through a network partition (spec 11.5; MWP-WRK-020, 021, 022): a runtime
in gateway mode reaches its gateway through a TCP forwarder the test cuts mid-run. Within its
grace the run goes on alone: a reversible tool runs (checked against the token it holds), an
irreversible one is refused, and its checkpoint is buffered with the bounded-offline-execution
binding. When the forwarder heals, the runtime reconnects under a new Session and reconciles
that checkpoint before anything else: the Group charges the offline usage and records the
checkpoint in one decision, and the new Session finishes the work from it with exactly the
usage spent. A second run stays cut off past its grace and its lease: its buffered checkpoint
is refused on reconnect and changes nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mwp.agent import Agent, CapabilityContext, Progress, Spent, Submission
from mwp.agent.gateway_link import GatewaySettings
from mwp.client import MwpClient
from mwp.core.errors import MwpError
from mwp.core.group.execution_lease import OWNERSHIP_EXPIRED_KIND
from mwp.core.group.resource_usage import RECORDED_KIND, ResourceUsage
from mwp.core.wire.jcs import canonicalize
from mwp.dev.stack import BackgroundStack, ensure_namespace
from mwp.workers.agent import AgentSession, ensure_registered
from tests.integration.gateway_agents import (
    AGENTS_NAMESPACE,
    agent_gateway,
    covering_submission,
    gateway_runtime,
    sample_agent,
)
from tests.integration.missions_helper import MissionRig, WorkItemRef, eventually, new_mission
from tests.integration.partition import Partition, partitioned

STEPS = 3


@dataclass
class Record:
    """What the agent's capability and tools did, for the test to read."""

    gates: dict[tuple[str, int], asyncio.Event] = dataclasses.field(default_factory=dict)
    done: list[int] = dataclasses.field(default_factory=list)  # checkpoints that returned
    refused: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    notified: list[str] = dataclasses.field(default_factory=list)
    resumed: list[Any] = dataclasses.field(default_factory=list)
    stopped: list[str] = dataclasses.field(default_factory=list)  # why a run stopped acting

    def gate(self, item: str, step: int) -> asyncio.Event:
        return self.gates.setdefault((item, step), asyncio.Event())


def offline_agent(organization_id: str, record: Record) -> Agent:
    """Steps of a reversible computation, each followed by an irreversible notification and
    a checkpoint, then held at a gate the test opens."""
    agent = sample_agent(organization_id, "Offline")

    @agent.tool("compute", reversible=True)
    async def compute(step: int) -> Spent:
        return Spent({"step": step}, ResourceUsage(model_tokens=100))

    @agent.tool("notify")
    async def notify(note: str) -> str:
        record.notified.append(note)
        return note

    @agent.capability("mwp.dev.general", "1.0.0")
    async def work(ctx: CapabilityContext) -> Submission:
        state = ctx.resume_state or {"next": 0}
        record.resumed.append(ctx.resume_state)
        try:
            for step in range(int(state["next"]), STEPS):
                await ctx.tool(f"compute-{step}", "compute", step)
                try:
                    await ctx.tool(
                        f"notify-{step}",
                        "notify",
                        f"step {step}",
                        spend=ResourceUsage(external_side_effects=1),
                    )
                except MwpError as refused:
                    record.refused.append((step, refused.code.value))
                revised = datetime.now(UTC) + timedelta(minutes=1)
                progress = Progress(
                    f"step {step}", [f"step {step}"], "next", revised_estimate=revised
                )
                await ctx.checkpoint(progress, {"next": step + 1})
                record.done.append(step)
                await record.gate(ctx.work_item_id, step).wait()
        except Exception as stopped:
            record.stopped.append(type(stopped).__name__)
            raise
        return await covering_submission(ctx, b"indexed")

    return agent


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


@dataclass
class Cut:
    rig: MissionRig
    agent: Agent
    record: Record
    lines: list[str]
    first: AgentSession
    partitions: list[Partition]

    async def cut(self) -> None:
        for partition in self.partitions:
            await partition.cut()

    async def heal(self) -> None:
        for partition in self.partitions:
            await partition.heal()

    async def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = await self.rig.mission.events_this_run()
        return events


@asynccontextmanager
async def partitioned_agent(
    mwp_client: MwpClient,
    temporal_stack: BackgroundStack,
    tmp_path: Path,
    *,
    grace: int,
    lease_seconds: int,
) -> AsyncIterator[Cut]:
    """A Mission and the offline agent's runtime, reaching its gateway (both listeners)
    through partitions the test can cut."""
    rig = await new_mission(mwp_client)
    record = Record()
    agent = offline_agent(rig.crew.organization.organization_id, record)
    await ensure_registered(rig.crew.organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    lines: list[str] = []
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (_, direct),
        partitioned(port_of(direct.url), port_of(direct.artifacts())) as partitions,
    ):
        socket, routes = partitions
        settings = GatewaySettings(
            f"wss://127.0.0.1:{socket.port}",
            direct.ca_file,
            f"https://127.0.0.1:{routes.port}",
            offline_grace_seconds=grace,
        )
        async with gateway_runtime(
            agent,
            settings,
            temporal_stack.address,
            tmp_path / "ledger",
            report=lines.append,
            lease_seconds=lease_seconds,
        ) as first:
            yield Cut(rig, agent, record, lines, first, partitions)


async def offered_and_cut(cut: Cut) -> WorkItemRef:
    """A WorkItem offered to the agent, its first step checkpointed online; then the network
    between the agent and its gateway is cut, and the run let go on."""
    item = await cut.rig.authorize("Index the archive")
    await cut.rig.offer(item, cut.agent.identity)
    await until(lambda: cut.record.done == [0], timeout=60)
    await cut.cut()
    cut.record.gate(item.work_item_id, 0).set()
    await until(lambda: cut.record.done == [0, 1], timeout=30)  # step 1: buffered offline
    return item


def reference(state: Any) -> str:
    return "sha256:" + hashlib.sha256(canonicalize(state)).hexdigest()


async def until(check: Callable[[], bool], timeout: float = 60) -> None:
    async def holds() -> bool:
        return check()

    await eventually(holds, timeout=timeout)


def reconciliations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == RECORDED_KIND and "reconciliation" in e["payload"]]


async def test_a_run_cut_off_from_its_gateway_goes_on_offline_and_is_reconciled_on_reconnect(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    async with partitioned_agent(
        mwp_client, temporal_stack, tmp_path, grace=60, lease_seconds=45
    ) as cut:
        item = await offered_and_cut(cut)
        wid = item.work_item_id
        # Offline: the reversible tool ran, the irreversible one was refused before it ran.
        assert cut.record.refused == [(1, "AUTH_FORBIDDEN")]
        assert cut.record.notified == ["step 0"]
        assert not reconciliations(await cut.events())  # nothing reached the Group

        await cut.heal()

        async def reconciled() -> bool:
            return bool(reconciliations(await cut.events()))

        await eventually(reconciled, timeout=60)
        cut.record.gate(wid, 1).set()  # the offline run goes on: it stops at its next step
        cut.record.gate(wid, 2).set()

        async def submitted() -> bool:
            return bool((await cut.rig.mission.work_item(wid))["state"] == "submitted")

        await eventually(submitted, timeout=60)
        events = await cut.events()
        view = await cut.rig.mission.work_item(wid)
        log, _ = await cut.rig.verified_log()

    [charge] = reconciliations(events)
    at = events.index(charge)
    checkpoint = events[at + 1]
    starts = [e for e in events if e["kind"] == "work.started"]
    second = charge["payload"]["reconciliation"]["sessionEpoch"]
    # One decision: the offline usage (compute's call and tokens, and the wall clock), then
    # the checkpoint of step 1, under the lease the first Session held.
    assert charge["payload"]["sessionEpoch"] == cut.first.session_epoch < second
    delta = charge["payload"]["delta"]
    assert delta["modelTokenLimit"] == 100 and delta["toolCallLimit"] == 1
    assert "externalSideEffectLimit" not in delta
    assert checkpoint["kind"] == "work.checkpointed"
    assert checkpoint["payload"]["checkpointRef"] == reference({"next": 2})
    assert checkpoint["cause"] == charge["cause"]
    # Reconciled before the new Session started anything; the work resumed from it.
    assert [s["payload"]["executionLease"]["sessionEpoch"] for s in starts] == [
        cut.first.session_epoch,
        second,
    ]
    assert events.index(starts[1]) > at
    assert cut.record.resumed == [None, {"next": 2}]
    assert cut.record.stopped == ["LeaseLost"]  # the offline run, at its next step
    assert cut.record.notified == ["step 0", "step 2"]
    # Exactly what was spent: three computations, two notifications, nothing twice.
    cumulative = view["resourceUsage"]["cumulative"]
    assert cumulative["modelTokenLimit"] == 300
    assert cumulative["toolCallLimit"] == 5
    assert cumulative["externalSideEffectLimit"] == 2
    assert any(f"offline progress of {wid} reconciled" in line for line in cut.lines)
    # Both in the Group's log, chained and signed.
    signed = [entry.event["kind"] for entry in log.read(charge["sequence"] - 1, 2)]
    assert signed == [RECORDED_KIND, "work.checkpointed"]


async def test_progress_buffered_by_a_run_cut_off_past_its_lease_is_refused_on_reconnect(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    async with partitioned_agent(
        mwp_client, temporal_stack, tmp_path, grace=5, lease_seconds=9
    ) as cut:
        item = await offered_and_cut(cut)
        wid = item.work_item_id

        async def expired() -> bool:
            return any(
                e["kind"] == OWNERSHIP_EXPIRED_KIND and e.get("workItemId") == wid
                for e in await cut.events()
            )

        await eventually(expired, timeout=60)  # the Group expired the lease meanwhile
        cut.record.gate(wid, 1).set()  # past its grace the run does nothing more
        await until(lambda: cut.record.stopped == ["LeaseLost"], timeout=30)
        sequence = await cut.rig.mission.sequence()
        await cut.heal()

        await until(lambda: any("refused on reconnect" in line for line in cut.lines))
        events = await cut.events()

    [line] = [line for line in cut.lines if "refused on reconnect" in line]
    assert wid in line and "WORK_STALE_OWNERSHIP" in line  # the lease's expiry fenced the owner
    assert not reconciliations(events)
    assert not [e for e in events if e["kind"] == "work.checkpointed"]
    assert not [e for e in events[sequence:] if e.get("workItemId") == wid]  # nothing changed
    assert cut.record.done == [0, 1] and cut.record.notified == ["step 0"]
