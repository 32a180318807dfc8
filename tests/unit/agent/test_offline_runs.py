"""A run cut off from its Group (spec 11.5; MWP-WRK-020, 021), with the local runner: it goes
on alone with reversible work until its grace deadline, buffering checkpoints bound to its
lease; it runs no irreversible tool, publishes, blocks and submits nothing, and stops once the
grace ends or the runtime reconnected under a newer Session. Without a way to buffer (the
operators' direct mode) a lost Group is an error, as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mwp.agent import (
    Agent,
    CapabilityContext,
    CardInfo,
    EvidenceItem,
    LocalCapabilityRunner,
    Progress,
    Spent,
    Submission,
)
from mwp.agent.execution import LeasedExecution, LeaseLost
from mwp.agent.offline import Disconnected
from mwp.agent.offline_buffer import JOURNAL_PREFIX, Buffered, OfflineBuffer, _document
from mwp.client import Identity
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.clock import plus_seconds
from mwp.core.group.offline_execution import OFFLINE_EXTENSION
from mwp.core.group.resource_usage import ResourceUsage
from mwp.core.trust.registry import Principal
from mwp.stores.objects import FolderObjectStore
from tests.unit.group.harness import contract

ME, OTHER = "urn:mwp:agent:developer", "urn:mwp:agent:tester"

AGENT_ID = "urn:mwp:agent:acme:indexer"
CAPABILITY = {"id": "code.backend", "version": "1.0.0"}
PROGRESS = Progress("indexing", ["fetched"], "ranked", revised_estimate="2030-01-01T00:00:00Z")

Capability = Callable[[CapabilityContext, LocalCapabilityRunner], Awaitable[Submission]]


def indexer(calls: list[str]) -> Agent:
    agent = Agent(
        AGENT_ID,
        Identity.generate(Principal("agent", AGENT_ID)),
        card=CardInfo(
            "urn:mwp:organization:acme", Principal("human", "urn:mwp:human:olivia"), "Indexer"
        ),
    )

    @agent.tool("rank", reversible=True)
    async def rank(n: int) -> Spent:
        calls.append(f"rank {n}")
        return Spent(n, ResourceUsage(model_tokens=50))

    @agent.tool("email")
    async def email(to: str) -> str:
        calls.append(f"email {to}")
        return to

    return agent


def runner_for(
    tmp_path: Path, agent: Agent, capability: Capability, **options: Any
) -> LocalCapabilityRunner:
    runner: LocalCapabilityRunner

    async def run(ctx: CapabilityContext) -> Submission:
        return await capability(ctx, runner)

    agent.capability(CAPABILITY["id"], CAPABILITY["version"])(run)
    runner = LocalCapabilityRunner(
        agent,
        contract(requiredCapabilities=[CAPABILITY]),
        FolderObjectStore(tmp_path),
        **options,
    )
    return runner


async def submission(ctx: CapabilityContext) -> Submission:
    content = await ctx.publish(b"index", media_type="text/plain", schema_uri="urn:mwp:schema:x")
    return Submission(
        [content],
        [
            EvidenceItem("urn:x:e:tests", ["tests-pass"]),
            EvidenceItem("urn:x:e:review", ["reviewed"]),
        ],
    )


def binding(entry: Buffered) -> dict[str, Any]:
    data: dict[str, Any] = entry.command["extensions"][OFFLINE_EXTENSION]["data"]
    return data


async def test_offline_a_run_goes_on_with_reversible_work_and_buffers_its_checkpoints(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    refused: list[ErrorCode] = []

    async def capability(ctx: CapabilityContext, runner: LocalCapabilityRunner) -> Submission:
        await ctx.tool("rank-1", "rank", 1)
        await ctx.checkpoint(PROGRESS, {"ranked": 1})  # online
        runner.disconnect()
        await ctx.tool("rank-2", "rank", 2)  # reversible: runs offline
        for op_id, fn in (("email", "email"), ("inline", _inline)):
            try:
                await ctx.tool(op_id, fn, "olivia")
            except MwpError as error:  # irreversible, or not declared at all: never runs
                refused.append(error.code)
        await ctx.checkpoint(PROGRESS, {"ranked": 2})
        await ctx.progress(PROGRESS)  # progress without a new state: the latest reference
        return await submission(ctx)  # publishing needs the Group: the run ends here

    runner = runner_for(tmp_path, indexer(calls), capability)
    sent = len(runner.commands)
    outcome = await runner.run()
    assert outcome.status == "offline" and outcome.detail["buffered"] == 2
    assert calls == ["rank 1", "rank 2"]
    assert refused == [ErrorCode.AUTH_FORBIDDEN, ErrorCode.AUTH_FORBIDDEN]
    lease = runner.work_item["executionLease"]
    # Nothing reached the Group after the disconnection.
    assert [c.kind for c in runner.commands[sent:]][-1] != "work.checkpoint"
    lost_at = runner.offline.lost_at
    buffered = runner.reconnect()
    assert [e.command["kind"] for e in buffered] == ["work.checkpoint", "work.checkpoint"]
    first, second = (binding(e) for e in buffered)
    assert (
        first["executionLeaseId"] == lease["leaseId"] == buffered[0].command["payload"]["leaseId"]
    )
    assert first["executionLeaseExpiresAt"] == lease["expiresAt"]
    assert first["sessionEpoch"] == 1 and first["ownershipEpoch"] == 1
    assert lost_at is not None and first["disconnectedAt"] == lost_at
    assert first["graceDeadline"] <= lease["expiresAt"]
    # What the run had not recorded (offline or not) rides with the next checkpoint, once.
    assert first["resourceUsageDelta"]["modelTokenLimit"] == 100
    assert first["resourceUsageDelta"]["toolCallLimit"] == 2
    assert second["resourceUsageDelta"].get("modelTokenLimit") is None
    # The state travels with its checkpoint, to be uploaded; progress names the latest one.
    assert buffered[0].checkpoint == b'{"ranked":2}'
    refs = [e.command["payload"]["checkpointRef"] for e in buffered]
    assert refs[0] == refs[1] and buffered[1].checkpoint is None


async def _inline(to: str) -> str:
    return to


async def test_past_its_grace_an_offline_run_stops_and_buffers_nothing_more(
    tmp_path: Path,
) -> None:
    calls: list[str] = []

    async def capability(ctx: CapabilityContext, runner: LocalCapabilityRunner) -> Submission:
        await ctx.tool("rank-1", "rank", 1)
        long_ago = plus_seconds(runner.clock(), -120)  # the Group was lost two minutes ago
        runner.disconnect(lost_at=long_ago)
        try:
            await ctx.tool("rank-2", "rank", 2)  # even reversible work stops
        except LeaseLost:
            calls.append("tool refused")
        try:
            await ctx.checkpoint(PROGRESS, {"ranked": 1})
        except LeaseLost:
            calls.append("checkpoint refused")
        return await submission(ctx)  # LeaseLost again: the run ends

    runner = runner_for(tmp_path, indexer(calls), capability, offline_grace_seconds=60)
    outcome = await runner.run()
    assert outcome.status == "offline" and outcome.detail["buffered"] == 0
    assert outcome.detail["refusal"]["code"] == "WORK_LEASE_EXPIRED"
    assert calls == ["rank 1", "tool refused", "checkpoint refused"]
    assert runner.reconnect() == []


async def test_once_the_runtime_reconnected_the_offline_run_does_nothing_more(
    tmp_path: Path,
) -> None:
    calls: list[str] = []

    async def capability(ctx: CapabilityContext, runner: LocalCapabilityRunner) -> Submission:
        runner.disconnect()
        await ctx.checkpoint(PROGRESS, {"ranked": 0})
        runner.reconnect()  # the new Session revoked this run's lease
        await ctx.tool("rank-1", "rank", 1)
        return await submission(ctx)

    outcome = await runner_for(tmp_path, indexer(calls), capability).run()
    assert outcome.status == "offline" and outcome.detail["buffered"] == 1
    assert "newer Session" in outcome.detail["refusal"]["message"]
    assert calls == []


async def test_a_submission_made_offline_is_not_sent(tmp_path: Path) -> None:
    async def capability(ctx: CapabilityContext, runner: LocalCapabilityRunner) -> Submission:
        content = await submission(ctx)  # published online
        runner.disconnect()
        return content

    runner = runner_for(tmp_path, indexer([]), capability)
    outcome = await runner.run()
    assert outcome.status == "offline" and outcome.detail["unsent"] == "submission"
    assert "work.submit" not in [c.kind for c in runner.commands]
    assert runner.work_item["state"] == "active"


async def test_a_side_effect_is_charged_at_once_never_buffered(tmp_path: Path) -> None:
    async def capability(ctx: CapabilityContext, runner: LocalCapabilityRunner) -> Submission:
        await ctx.tool("email", "email", "olivia", spend=ResourceUsage(external_side_effects=1))
        runner.disconnect()
        await ctx.checkpoint(PROGRESS, {"sent": True})
        return await submission(ctx)

    runner = runner_for(tmp_path, indexer([]), capability)
    await runner.run()
    records = [c for c in runner.commands if c.kind.endswith("resource_usage_record")]
    assert [r.payload["delta"]["externalSideEffectLimit"] for r in records] == [1]
    [entry] = runner.reconnect()
    assert "externalSideEffectLimit" not in binding(entry)["resourceUsageDelta"]


async def test_a_side_effect_made_as_the_group_is_lost_is_not_buffered(tmp_path: Path) -> None:
    """Its record could not be sent; no offline checkpoint may carry it (the Group refuses
    one that does), so the checkpoint is buffered without it."""
    agent = indexer([])
    runner: LocalCapabilityRunner

    @agent.tool("pay")
    async def pay(amount: int) -> int:
        runner.disconnect()  # the connection drops while the payment is made
        return amount

    async def capability(ctx: CapabilityContext, _: LocalCapabilityRunner) -> Submission:
        await ctx.tool("pay", "pay", 5, spend=ResourceUsage(external_side_effects=1))
        await ctx.checkpoint(PROGRESS, {"paid": True})
        return await submission(ctx)

    runner = runner_for(tmp_path, agent, capability)
    outcome = await runner.run()
    assert outcome.status == "offline" and outcome.detail["buffered"] == 1
    [entry] = runner.reconnect()
    delta = binding(entry)["resourceUsageDelta"]
    assert delta["toolCallLimit"] == 1 and "externalSideEffectLimit" not in delta


async def test_without_a_way_to_buffer_a_lost_group_is_an_error(tmp_path: Path) -> None:
    async def capability(ctx: CapabilityContext, runner: LocalCapabilityRunner) -> Submission:
        runner.disconnect()
        await ctx.checkpoint(PROGRESS, {"ranked": 0})
        return await submission(ctx)

    runner = runner_for(tmp_path, indexer([]), capability)
    run = LeasedExecution(runner.agent, runner.order, runner.group, runner.store)
    with pytest.raises(Disconnected):
        await run.run()


def test_the_buffer_is_sealed_against_older_sessions_on_reconnect() -> None:
    buffer = OfflineBuffer()
    one, two = Buffered({"kind": "a"}), Buffered({"kind": "b"})
    buffer.keep(3, one)
    buffer.keep(4, two)
    assert buffer.drain(4) == [one] and len(buffer) == 1
    assert buffer.sealed(3) and not buffer.sealed(4)
    with pytest.raises(MwpError) as late:
        buffer.keep(3, one)
    assert late.value.code is ErrorCode.WORK_LEASE_EXPIRED
    buffer.put_back([one])  # a reconciliation that lost its link too: first again
    assert buffer.drain(5) == [one, two]


def test_a_tool_is_irreversible_unless_declared_reversible() -> None:
    agent = indexer([])
    assert agent.tools["rank"].reversible and not agent.tools["email"].reversible


def test_with_a_journal_the_buffer_outlives_its_process(tmp_path: Path) -> None:
    """A runtime that died offline: the next one, on the same store, drains what the dead one
    buffered (in order, its states included), and nothing once it is decided."""
    store = FolderObjectStore(tmp_path)
    dead = OfflineBuffer(store, ME)
    first, second = Buffered({"kind": "a"}, b'{"n":1}'), Buffered({"kind": "b"})
    dead.keep(3, first)
    dead.keep(3, second)
    restarted = OfflineBuffer(store, ME)
    drained = restarted.drain(4)
    assert [(e.command, e.checkpoint) for e in drained] == [
        ({"kind": "a"}, b'{"n":1}'),
        ({"kind": "b"}, None),
    ]
    restarted.decided(drained[0])
    assert [e.command for e in OfflineBuffer(store, ME).drain(5)] == [{"kind": "b"}]
    restarted.decided(drained[1])
    assert OfflineBuffer(store, ME).drain(5) == []
    # A Session not older than the draining one is not taken.
    later = OfflineBuffer(store, ME)
    later.keep(7, Buffered({"kind": "c"}))
    assert OfflineBuffer(store, ME).drain(7) == []
    assert [e.command for e in OfflineBuffer(store, ME).drain(8)] == [{"kind": "c"}]


def test_agents_sharing_a_store_drain_only_their_own_buffers(tmp_path: Path) -> None:
    """Agents run from one state folder share its store: each reconciles only what it buffered
    (another's Commands, re-signed, would be refused as not its own, and marking them decided
    would lose them for their agent)."""
    store = FolderObjectStore(tmp_path)
    mine, theirs = Buffered(_command(ME, "a")), Buffered(_command(OTHER, "b"))
    OfflineBuffer(store, ME).keep(3, mine)
    OfflineBuffer(store, OTHER).keep(3, theirs)
    assert [e.command for e in OfflineBuffer(store, ME).drain(4)] == [mine.command]
    assert [e.command for e in OfflineBuffer(store, OTHER).drain(4)] == [theirs.command]


def test_entries_from_before_per_agent_segments_go_to_the_agent_that_buffered_them(
    tmp_path: Path,
) -> None:
    """An upgraded runtime still reconciles what it left flat under ``offline-buffer/``; the
    other agents on the store leave it alone."""
    store = FolderObjectStore(tmp_path)
    flat = Buffered(_command(ME, "a"))
    store.put_if_absent(f"{JOURNAL_PREFIX}{1:020d}-legacy.json", _document(3, flat))
    assert OfflineBuffer(store, OTHER).drain(4) == []
    drained = OfflineBuffer(store, ME).drain(4)
    assert [e.command for e in drained] == [flat.command]
    OfflineBuffer(store, ME).decided(drained[0])
    assert OfflineBuffer(store, ME).drain(5) == []


def _command(actor: str, kind: str) -> dict[str, object]:
    return {"kind": kind, "actor": {"type": "agent", "id": actor}}
