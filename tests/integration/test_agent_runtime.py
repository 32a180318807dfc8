"""The agent runtime on the session's real dev server and log store: the AgentWorkflow (the
Worker Scheduler) fed by the Group logs accepts offers, starts work under Execution Leases,
runs the capability as an activity on the agent's queue and submits; preemption stops work at
a checkpoint and it resumes there; a lost Scheduler state is rebuilt from the logs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mwp.agent import Agent
from mwp.agent.calls import agent_task_queue, agent_workflow_id
from mwp.agent.ledger import ToolLedger
from mwp.agent.worker import (
    build_agent_worker,
    ensure_registered,
    scheduler_inboxes,
    start_scheduler,
)
from mwp.client import Identity, MwpClient
from mwp.core.registry import Principal
from mwp.stores.objects import open_store
from tests.integration import runtime_agent, tool_agent
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import MissionRig, WorkItemRef, eventually, new_mission


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "external"
    root.mkdir()
    monkeypatch.setenv("MWP_TEST_TOOL_EFFECTS", str(root))
    return root


@dataclass
class Runtime:
    agent: Agent
    session_epoch: int

    @property
    def identity(self) -> Identity:
        return self.agent.identity


@asynccontextmanager
async def agent_runtime(
    rig: MissionRig, *, slots: int = 1, lease_seconds: int = 6, **options: Any
) -> AsyncIterator[Runtime]:
    """A runtime agent of ``rig``'s Organization, served in-process: worker, AgentWorkflow
    and inboxes over the stack's log store."""
    client = rig.client
    registry = rig.crew.organization.registry
    agent_id = f"urn:mwp:agent:stepper-{uuid.uuid4().hex[:8]}"
    identity = Identity.generate(Principal("agent", agent_id))
    agent = runtime_agent.build(agent_id, identity, registry.organization_id, slots=slots)
    card_version = await ensure_registered(registry, agent)
    epoch = await registry.open_session(agent_id)
    store = open_store(stack_log_location())
    stop = asyncio.Event()
    async with build_agent_worker(client.temporal, agent, ToolLedger(store), runtime=client):
        await start_scheduler(
            client.temporal, agent, card_version, epoch, lease_seconds=lease_seconds, **options
        )
        inboxes = scheduler_inboxes(client, registry, agent, store)
        inboxes.poll_interval = 0.2
        feeding = asyncio.create_task(inboxes.run(stop))
        try:
            yield Runtime(agent, epoch)
        finally:
            stop.set()
            await feeding
            handle = client.temporal.get_workflow_handle(agent_workflow_id(agent_id))
            await handle.terminate("test over")


async def item_state(rig: MissionRig, item: WorkItemRef) -> str:
    state: str = (await rig.mission.work_item(item.work_item_id))["state"]
    return state


async def wait_for_state(rig: MissionRig, item: WorkItemRef, *states: str) -> None:
    async def reached() -> bool:
        return await item_state(rig, item) in states

    await eventually(reached, timeout=60)


async def scheduler_status(client: MwpClient, agent: Agent) -> dict[str, Any]:
    handle = client.temporal.get_workflow_handle(agent_workflow_id(agent.agent_id))
    status: dict[str, Any] = await handle.query("status")
    return status


async def test_an_offered_item_is_admitted_accepted_run_under_a_lease_and_submitted(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    async with agent_runtime(rig) as runtime:
        item = await rig.authorize("Write the summary")
        await rig.offer(item, runtime.identity)
        await wait_for_state(rig, item, "submitted")
        view = await rig.mission.work_item(item.work_item_id)
        assert view["owner"]["agentId"] == runtime.agent.agent_id
        # One effect per step, each under the key of (Mission, WorkItem, epoch, op ID).
        assert len(tool_agent.effect_keys(effects, f"{item.work_item_id}#0")) == 1
        assert len(tool_agent.effect_keys(effects, f"{item.work_item_id}#2")) == 1
        kinds = [e["kind"] for e in await rig.mission.events_this_run()]
        for kind in ("work.offer.accepted", "work.started", "work.progressed", "work.submitted"):
            assert kind in kinds
        status = await scheduler_status(mwp_client, runtime.agent)
        assert [d["decision"] for d in status["decisions"]] == ["admitted", "accepted"]
        assert status["outcomes"][-1]["status"] == "submitted"
        await rig.accept_result(item)
        assert await item_state(rig, item) == "verified"
        assert agent_task_queue(runtime.agent.agent_id).startswith("mwp-agent/")
