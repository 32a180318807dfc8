"""The agent runtime on the session's real dev server and log store: the AgentWorkflow (the
Worker Scheduler) fed by the Group logs accepts offers, starts work under Execution Leases,
runs the capability as an activity on the agent's queue and submits; preemption stops work at
a checkpoint and it resumes there; a lost Scheduler state is rebuilt from the logs."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import PollWorkflowTaskQueueRequest
from temporalio.client import WorkflowHandle

from mwp.agent import Agent
from mwp.agent.execution import LATE_RESULT_PREFIX
from mwp.agent.gateway_link import GatewaySettings
from mwp.agent.signals import SchedulerSignals
from mwp.cli import main
from mwp.client import Identity, KeyStore, MwpClient, new_id
from mwp.client.missions import in_seconds
from mwp.client.state_dir import ORGANIZATION_FILE
from mwp.contracts.agent import (
    ACCEPT_OFFER,
    QUERY_PREEMPTION_REQUESTED,
    RUN_CAPABILITY,
    SIGNAL_SESSION,
    SIGNAL_SET_POLICY,
    Delivery,
    PolicyChange,
    PreemptionRequest,
    agent_task_queue,
    agent_workflow_id,
)
from mwp.core.errors import ErrorCode
from mwp.core.group import OWNERSHIP_EXPIRED_KIND
from mwp.core.group.execution_lease import LEASE_REVOKED_KIND
from mwp.core.scheduler import starvation_bound
from mwp.core.trust.registry import Principal
from mwp.core.wire.jcs import sha256_ref
from mwp.dev.scenario import evidence_for, work_contract
from mwp.dev.stack import BackgroundStack
from mwp.stores.artifacts import ArtifactStore, content_key
from mwp.stores.objects import open_store
from mwp.workers.agent import (
    ensure_registered,
    release_sticky_queue,
    run_agent_worker,
    start_scheduler,
)
from mwp.workers.held_task import HELD_BY_THE_GONE
from mwp.workflows.agent import OWNER_COMMAND_SECONDS
from tests.integration import runtime_agent, tool_agent
from tests.integration.conftest import stack_log_location
from tests.integration.gateway_agents import (
    AGENTS_NAMESPACE,
    address_of,
    agents_client,
    gateway_runtime,
    gateway_with_artifacts,
    scheduler_of,
)
from tests.integration.missions_helper import MissionRig, WorkItemRef, eventually, new_mission
from tests.integration.test_mission_workflow import current_details


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "external"
    root.mkdir()
    monkeypatch.setenv("MWP_TEST_TOOL_EFFECTS", str(root))
    return root


@dataclass
class Runtime:
    agent: Agent
    card_version: int
    session_epoch: int
    agents: MwpClient  # the agents' namespace, where the AgentWorkflow runs
    settings: GatewaySettings
    ledger: Path

    @property
    def identity(self) -> Identity:
        return self.agent.identity

    @property
    def scheduler(self) -> WorkflowHandle[Any, Any]:
        return scheduler_of(self.agents, self.agent.agent_id)


@asynccontextmanager
async def agent_runtime(
    rig: MissionRig,
    *,
    slots: int = 1,
    steps: int = runtime_agent.STEPS,
    lease_seconds: int = 6,
    agent: Agent | None = None,
    **options: Any,
) -> AsyncIterator[Runtime]:
    """A runtime agent of ``rig``'s Organization (a new stepper unless ``agent`` is given),
    served in-process as `mwp agent run` serves it: through a real gateway only, its
    AgentWorkflow in the agents' namespace, no Group log store and no authority namespace.
    The authority side registers its Agent Card first."""
    client = rig.client
    registry = rig.crew.organization.registry
    if agent is None:
        agent_id = f"urn:mwp:agent:stepper-{uuid.uuid4().hex[:8]}"
        identity = Identity.generate(Principal("agent", agent_id))
        agent = runtime_agent.build(
            agent_id, identity, registry.organization_id, slots=slots, steps=steps
        )
    card_version = await ensure_registered(registry, agent)
    address = address_of(client)
    agents = await agents_client(address)
    with tempfile.TemporaryDirectory() as folder:
        ledger = Path(folder) / "agent-ledger"
        async with (
            gateway_with_artifacts(client, rig.crew.organization, Path(folder) / "tls") as settings,
            gateway_runtime(
                agent, settings, address, ledger, lease_seconds=lease_seconds, **options
            ) as session,
        ):
            yield Runtime(agent, card_version, session.session_epoch, agents, settings, ledger)


async def item_state(rig: MissionRig, item: WorkItemRef) -> str:
    state: str = (await rig.mission.work_item(item.work_item_id))["state"]
    return state


async def wait_for_state(rig: MissionRig, item: WorkItemRef, *states: str) -> None:
    async def reached() -> bool:
        return await item_state(rig, item) in states

    await eventually(reached, timeout=60)


async def scheduler_status(runtime: Runtime) -> dict[str, Any]:
    status: dict[str, Any] = await runtime.scheduler.query("status")
    return status


async def settled_runs(runtime: Runtime, count: int) -> dict[str, Any]:
    """The Scheduler's status once ``count`` runs have an outcome: a run's outcome is recorded
    when the answer to its last Command came back, which follows the Group's Event."""

    async def settled() -> bool:
        return len((await scheduler_status(runtime))["outcomes"]) >= count

    await eventually(settled, timeout=30)
    return await scheduler_status(runtime)


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
        # The acceptance disclosed the Scheduler's estimate for the item (spec 11.2).
        accepted = next(
            e for e in await rig.mission.events_this_run() if e["kind"] == "work.offer.accepted"
        )
        estimate = accepted["payload"]["scheduleEstimate"]
        assert view["scheduleEstimate"] == estimate
        assert estimate["capacityStatus"] == "available" and 0 < estimate["confidence"] <= 1
        # One effect per step, each under the key of (Mission, WorkItem, epoch, op ID).
        assert len(tool_agent.effect_keys(effects, f"{item.work_item_id}#0")) == 1
        assert len(tool_agent.effect_keys(effects, f"{item.work_item_id}#2")) == 1
        kinds = [e["kind"] for e in await rig.mission.events_this_run()]
        for kind in ("work.offer.accepted", "work.started", "work.progressed", "work.submitted"):
            assert kind in kinds
        status = await settled_runs(runtime, 1)
        assert [d["decision"] for d in status["decisions"]] == ["admitted", "accepted"]
        assert status["outcomes"][-1]["status"] == "submitted"
        await rig.accept_result(item)
        assert await item_state(rig, item) == "verified"
        assert agent_task_queue(runtime.agent.agent_id).startswith("mwp-agent/")


async def test_preempted_work_checkpoints_re_enters_its_queue_and_resumes_there(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()  # the run waits after each checkpoint while this exists
    async with agent_runtime(rig) as runtime:
        item = await rig.authorize("Write the long report")
        await rig.offer(item, runtime.identity)
        await wait_for_state(rig, item, "active")

        async def held_after_first_checkpoint() -> bool:
            # The step's effect lands before its checkpoint asks about preemption: wait for
            # the checkpoint's progress, so the request below is seen at the next one.
            return any(
                e["kind"] == "work.progressed" and "checkpointRef" in e["payload"]
                for e in await rig.mission.events_this_run()
            )

        await eventually(held_after_first_checkpoint, timeout=30)
        handle = runtime.scheduler
        request = PreemptionRequest(rig.mission.group_id, item.work_item_id)
        await handle.signal(*SchedulerSignals(runtime.identity).signal(request))
        (effects / "hold").unlink()  # the run goes on to its next safe point and stops there
        await wait_for_state(rig, item, "submitted")

    kinds = [e["kind"] for e in await rig.mission.events_this_run()]
    assert kinds.count("work.started") == 2 and kinds.count("work.checkpointed") == 1
    assert kinds.index("work.checkpointed") < len(kinds) - 1 - kinds[::-1].index("work.started")
    checkpointed = next(
        e for e in await rig.mission.events_this_run() if e["kind"] == "work.checkpointed"
    )
    assert checkpointed["payload"]["ownershipEpoch"] == 1  # preemption keeps the ownership
    # The second run resumed from the state the first checkpointed when it stopped.
    assert [r["resumed"] for r in runtime_agent.runs(effects)] == [None, {"next": 2}]
    # Each op ID had one effect and one call across both runs (the same Ownership Epoch).
    for op in ("prepare", "0", "1", "2"):
        name = f"{item.work_item_id}#{op}"
        assert len(tool_agent.effect_keys(effects, name)) == 1, name
        assert tool_agent.call_count(effects, name) == 1, name


async def test_a_quota_cut_below_the_groups_running_work_preempts_the_youngest_run(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()  # each run waits after each checkpoint while this exists
    async with agent_runtime(rig, slots=2, lease_seconds=300) as runtime:
        items = [await rig.authorize(f"Part {n}") for n in (1, 2)]
        for item in items:
            await rig.offer(item, runtime.identity)

        async def both_checkpointed() -> bool:
            checkpointed = {
                e["workItemId"]
                for e in await rig.mission.events_this_run()
                if e["kind"] == "work.progressed" and "checkpointRef" in e["payload"]
            }
            return checkpointed == {i.work_item_id for i in items}

        await eventually(both_checkpointed, timeout=30)
        cut = PolicyChange(rig.mission.group_id, 1, 1)  # weight 1, at most one slot
        await runtime.scheduler.signal(*SchedulerSignals(runtime.identity).signal(cut))

        async def one_preemption_requested() -> bool:
            asked = [
                await runtime.scheduler.query(
                    QUERY_PREEMPTION_REQUESTED, args=[rig.mission.group_id, i.work_item_id]
                )
                for i in items
            ]
            return sorted(asked) == [False, True]

        await eventually(one_preemption_requested, timeout=30)
        (effects / "hold").unlink()
        for item in items:
            await wait_for_state(rig, item, "submitted")
        status = await settled_runs(runtime, 3)
    # One run stopped at its next checkpoint and ran again once the other had finished.
    assert sorted(o["status"] for o in status["outcomes"]) == ["preempted", *["submitted"] * 2]
    kinds = [e["kind"] for e in await rig.mission.events_this_run()]
    assert kinds.count("work.checkpointed") == 1 and kinds.count("work.started") == 3


async def test_a_rebuilt_scheduler_is_fed_its_groups_again_into_the_same_queues(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()
    # A long lease: no renewal moves the log while the two projections are compared.
    async with agent_runtime(rig, slots=1, lease_seconds=300) as runtime:
        first = await rig.authorize("First")
        second = await rig.authorize("Second")
        await rig.offer(first, runtime.identity)
        await rig.offer(second, runtime.identity)

        # One slot: one item runs (the Scheduler picks which), the other waits in the queue.
        async def one_runs() -> bool:
            states = {await item_state(rig, first), await item_state(rig, second)}
            return states == {"active", "queued"}

        await eventually(one_runs, timeout=60)
        if await item_state(rig, first) == "queued":
            first, second = second, first
        scheduler = runtime.scheduler

        async def caught_up() -> dict[str, Any] | None:
            queues = await scheduler.query("queues")
            queue: dict[str, Any] | None = queues.get(rig.mission.group_id)
            sequence = await rig.mission.sequence()
            return queue if queue is not None and queue["cursor"] == sequence else None

        async def settled() -> bool:  # running, and past its first checkpoint (it holds there)
            queue = await caught_up()
            return (
                queue is not None
                and queue["entries"][first.work_item_id][0] == "active"
                and bool(queue["checkpoints"].get(first.work_item_id))
            )

        await eventually(settled, timeout=30)
        before = await caught_up()
        assert before is not None
        assert before["entries"][second.work_item_id][0] == "queued"
        # The agent's state is lost: the workflow is gone. A new one holds no Cursor, and the
        # runtime feeds it again what came through the gateway (its journal, then the rest).
        await scheduler.terminate("state lost")
        await start_scheduler(
            runtime.agents.temporal,
            runtime.agent,
            runtime.card_version,
            runtime.session_epoch,
            lease_seconds=300,
        )

        async def rebuilt() -> bool:
            return await caught_up() is not None

        await eventually(rebuilt, timeout=30)
        assert await caught_up() == before
        # A batch read before the rebuild (it continues another Cursor) is ignored: applied
        # on top of this run's queue it would have lost the first item.
        cursors = await scheduler.query("cursors")
        stale = {
            "groupId": rig.mission.group_id,
            "missionId": rig.mission.mission_id,
            "held": {**cursors[rig.mission.group_id], "sequence": 1},
            "events": [
                {
                    "kind": "work.failed",
                    "sequence": 10**6,
                    "workItemId": first.work_item_id,
                    "payload": {},
                }
            ],
            "cursor": cursors[rig.mission.group_id],
        }
        await scheduler.signal(
            *SchedulerSignals(runtime.identity).signal(Delivery.from_body(stale))
        )
        assert await scheduler.query("cursors") == cursors  # the signal has been handled
        assert await caught_up() == before


@asynccontextmanager
async def agent_process(
    rig: MissionRig,
    stack: BackgroundStack,
    tmp_path: Path,
    effects: Path,
    *,
    lease_seconds: int,
    agent_id: str | None = None,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`mwp agent run tests.integration.runtime_agent:agent` for ``rig``'s Organization (the
    same agent, key and ledger folder on every call in a test), through a gateway of the
    Organization started for it: the process gets the gateway's addresses and CA, the agents'
    namespace and its own ledger, nothing of the authority zone. Ready to serve; SIGKILLed on
    leaving if still up."""
    registry = rig.crew.organization.registry
    id_file = tmp_path / "agent-id"
    if not id_file.exists():
        id_file.write_text(agent_id or f"urn:mwp:agent:stepper-{uuid.uuid4().hex[:8]}")
    agent_id = id_file.read_text()
    keys = KeyStore(tmp_path / "agent-keys")
    if not keys.exists(runtime_agent.KEY_NAME):
        keys.save(runtime_agent.KEY_NAME, Identity.generate(Principal("agent", agent_id)))
    declared = runtime_agent.build(
        agent_id, keys.load(runtime_agent.KEY_NAME), registry.organization_id
    )
    await ensure_registered(registry, declared)  # the authority side registers the card
    await agents_client(stack.address)
    env = {
        "MWP_TEST_AGENT_ID": agent_id,
        "MWP_TEST_AGENT_ORG": registry.organization_id,
        "MWP_TEST_AGENT_KEY_DIR": str(tmp_path / "agent-keys"),
        "MWP_TEST_TOOL_EFFECTS": str(effects),
    }
    async with gateway_with_artifacts(rig.client, rig.crew.organization, tmp_path / "tls") as gw:
        assert gw.ca_file is not None and gw.artifacts_url is not None
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mwp",
            "agent",
            "run",
            "tests.integration.runtime_agent:agent",
            "--address",
            stack.address,
            "--namespace",
            AGENTS_NAMESPACE,
            "--state-dir",
            str(tmp_path / "no-state"),
            "--store",
            str(tmp_path / "agent-ledger"),
            "--gateway",
            gw.url,
            "--gateway-ca",
            str(gw.ca_file),
            "--gateway-artifacts",
            gw.artifacts_url,
            "--lease-seconds",
            str(lease_seconds),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **env},
        )
        try:
            assert process.stdout is not None
            output = b""
            while not output.endswith(b"\n") or b"Task queue" not in output:
                line = await asyncio.wait_for(process.stdout.readline(), 60)
                if not line:
                    pytest.fail(f"the agent process exited {await process.wait()}: {output!r}")
                output += line
            yield process
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def has_checkpoint(rig: MissionRig, item: WorkItemRef) -> bool:
    """Whether the Group names a checkpoint of ``item`` (a step done)."""
    view = await rig.mission.work_item(item.work_item_id)
    return bool((view.get("checkpoint") or {}).get("checkpointRef"))


async def test_a_killed_agent_loses_its_lease_and_another_completes_from_its_checkpoint(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()
    item = await rig.authorize("Survive a crash")
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=4) as process:
        killed = KeyStore(tmp_path / "agent-keys").load(runtime_agent.KEY_NAME)
        await rig.offer(item, killed)
        await eventually(lambda: has_checkpoint(rig, item), timeout=60)
        lease = (await rig.mission.work_item(item.work_item_id))["executionLease"]
        process.kill()  # SIGKILL mid-capability: nothing renews the lease any more
        await process.wait()
    # Its acceptance's attempts were bounded: one held by a process killed meanwhile is tried
    # again after OWNER_COMMAND_SECONDS (it was a minute).
    agents = await agents_client(temporal_stack.address)
    handle = agents.temporal.get_workflow_handle(
        agent_workflow_id((tmp_path / "agent-id").read_text())
    )
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in (await handle.fetch_history()).events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == ACCEPT_OFFER
    ]
    assert {a.start_to_close_timeout.ToSeconds() for a in scheduled} == {OWNER_COMMAND_SECONDS}
    # An attempt the gateway's absence failed is made again soon, not a second later.
    assert {a.retry_policy.initial_interval.ToMilliseconds() for a in scheduled} == {200}

    async def fenced() -> bool:
        return bool((await rig.mission.work_item(item.work_item_id)).get("ownerFencedReason"))

    await eventually(fenced, timeout=30)
    killed_session = lease["sessionEpoch"]

    def late_submission() -> Awaitable[dict[str, Any]]:
        """The killed agent's result, arriving late (its epoch, its lease)."""
        late = {
            "ownershipEpoch": 1,
            "leaseId": lease["leaseId"],
            "artifactHashes": [sha256_ref(b"late result")],
            "evidence": evidence_for(item.contract, item.work_item_id),
        }
        return rig.send(
            killed,
            "work.submit",
            late,
            work_item_id=item.work_item_id,
            session_epoch=killed_session,
        )

    await rig.assert_refused(late_submission, ErrorCode.WORK_STALE_OWNERSHIP)
    (effects / "hold").unlink()
    async with agent_runtime(rig) as successor:
        await rig.offer(item, successor.identity)  # a new round under a higher Ownership Epoch
        await wait_for_state(rig, item, "submitted")
    view = await rig.mission.work_item(item.work_item_id)
    assert view["owner"]["agentId"] == successor.agent.agent_id
    assert view["ownershipEpoch"] == 2
    # The successor resumed from the killed agent's checkpoint: step 0 was not redone.
    assert [r["resumed"] for r in runtime_agent.runs(effects)] == [None, {"next": 1}]
    assert len(tool_agent.effect_keys(effects, f"{item.work_item_id}#0")) == 1
    assert tool_agent.call_count(effects, f"{item.work_item_id}#0") == 1
    # Still refused once the successor's result is in: it never replaces that result.
    await rig.assert_refused(late_submission, ErrorCode.INVALID_STATE_TRANSITION)
    await rig.accept_result(item)
    assert await item_state(rig, item) == "verified"


async def sessions_taken(handle: WorkflowHandle[Any, Any]) -> tuple[int, list[Any]]:
    """How many Session signals the AgentWorkflow has taken (a workflow task completed after
    each), and its workflow tasks that timed out."""
    events = (await handle.fetch_history()).events
    signalled = [
        e.event_id
        for e in events
        if e.HasField("workflow_execution_signaled_event_attributes")
        and e.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_SESSION
    ]
    completed = [
        e.event_id for e in events if e.HasField("workflow_task_completed_event_attributes")
    ]
    taken = sum(1 for s in signalled if any(c > s for c in completed))
    timed_out = [e for e in events if e.HasField("workflow_task_timed_out_event_attributes")]
    return taken, timed_out


async def test_a_restarted_runtime_takes_its_workflow_off_the_killed_ones_sticky_queue(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """The killed process had its AgentWorkflow cached, so Temporal would put the workflow's
    next task (the new Session's) on that process's sticky queue, and the new process would get
    it only once the sticky queue's schedule-to-start timeout ran out (a timed-out workflow
    task in the history). The new process releases the sticky queue first."""
    rig = await new_mission(mwp_client)
    agents = await agents_client(temporal_stack.address)
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=30) as first:
        handle = agents.temporal.get_workflow_handle(
            agent_workflow_id((tmp_path / "agent-id").read_text())
        )

        async def took(sessions: int) -> bool:
            return (await sessions_taken(handle))[0] >= sessions

        await eventually(lambda: took(1), timeout=30)
        first.kill()  # SIGKILL: the workflow stays cached on a process that is gone
        await first.wait()
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=30):
        await eventually(lambda: took(2), timeout=30)
    taken, timed_out = await sessions_taken(handle)
    assert taken == 2
    assert timed_out == []


async def test_a_restarted_runtime_resets_a_workflow_task_its_dead_predecessor_held(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """A process killed while its worker held one of the AgentWorkflow's workflow tasks: the
    task stays started until its timeout (10 s), and the new process would idle that long (a
    timed-out workflow task in the history). The new process resets the workflow to its last
    completed task before its worker polls, and the new run takes the new Session at once."""
    rig = await new_mission(mwp_client)
    agents = await agents_client(temporal_stack.address)
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=30) as first:
        agent_id = (tmp_path / "agent-id").read_text()
        handle = agents.temporal.get_workflow_handle(agent_workflow_id(agent_id))
        await eventually(lambda: _took(handle, 1), timeout=30)
        first.kill()
        await first.wait()
        dead = f"{first.pid}@{socket.gethostname()}"  # the identity its worker polled under
    held_run = (await handle.describe()).run_id
    # The dead process's worker had just taken a task: one taken here and never answered.
    await release_sticky_queue(agents.temporal, agent_id)
    await handle.signal(SIGNAL_SET_POLICY, "a signal to give the workflow a task")
    taken = await agents.temporal.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(
            namespace=agents.temporal.namespace,
            task_queue=TaskQueue(name=agent_task_queue(agent_id)),
            identity=dead,
        )
    )
    assert taken.task_token and taken.workflow_execution.run_id == held_run
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=30):
        await eventually(lambda: _took(handle, 2), timeout=30)
    described = await handle.describe()
    assert described.run_id != held_run  # reset: a new run, with every signal applied again
    taken_now, timed_out = await sessions_taken(handle)
    assert taken_now >= 2 and timed_out == []


async def test_a_restarted_runtime_fails_the_run_attempt_its_dead_predecessor_held(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """A process killed mid-run leaves its run's activity attempt started until Temporal's
    heartbeat timeout (the lease, 30 s here). The new process fails the attempt before its
    worker polls: the next attempt comes at once (signed under the old Session, it does not
    start), instead of the workflow waiting on it that long; the item is done meanwhile."""
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()
    item = await rig.authorize("Outlive a dead worker")
    agents = await agents_client(temporal_stack.address)
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=30) as first:
        agent = KeyStore(tmp_path / "agent-keys").load(runtime_agent.KEY_NAME)
        await rig.offer(item, agent)
        await eventually(lambda: has_checkpoint(rig, item), timeout=60)  # held mid-run
        first.kill()
        await first.wait()
    handle = agents.temporal.get_workflow_handle(
        agent_workflow_id((tmp_path / "agent-id").read_text())
    )

    async def held_runs() -> list[Any]:
        return [
            p
            for p in (await handle.describe()).raw_description.pending_activities
            if p.activity_type.name == RUN_CAPABILITY
            and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        ]

    assert len(await held_runs()) == 1  # the dead process's attempt, still started
    (effects / "hold").unlink()

    async def released() -> bool:
        """The held attempt failed as such: the next one waits or ran (its history)."""
        pending = (await handle.describe()).raw_description.pending_activities
        if any(p.last_failure.message == HELD_BY_THE_GONE for p in pending):
            return True
        failures = [
            e.activity_task_started_event_attributes.last_failure.message
            async for e in handle.fetch_history_events()
            if e.HasField("activity_task_started_event_attributes")
        ]
        return HELD_BY_THE_GONE in failures

    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=30):
        await eventually(released, timeout=20)  # the held attempt would last 30 s
        await wait_for_state(rig, item, "submitted")


async def _took(handle: WorkflowHandle[Any, Any], sessions: int) -> bool:
    """Whether the workflow's latest run (``handle`` names none) took ``sessions`` Sessions."""
    return (await sessions_taken(handle))[0] >= sessions


async def test_the_readme_agent_runs_a_work_item_to_verified(
    mwp_client: MwpClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = await new_mission(mwp_client)
    state = tmp_path / "state"
    KeyStore.in_state_dir(state).save(
        "agent-writer", Identity.generate(Principal("agent", "urn:mwp:agent:writer"))
    )
    organization = {"organizationId": rig.crew.organization.organization_id}
    (state / ORGANIZATION_FILE).write_text(json.dumps(organization))
    monkeypatch.setenv("MWP_STATE_DIR", str(state))
    sys.modules.pop("examples.writer", None)
    writer = importlib.import_module("examples.writer")
    # As the README's `mwp registry add-agent writer --owner ada` does: a development card
    # (version 1) that differs from the declaration, so the runtime registers version 2.
    owner = Principal("human", "urn:mwp:human:ada")
    await rig.crew.organization.registry.register_agent(writer.agent.identity, owner=owner)
    async with agent_runtime(rig, agent=writer.agent) as runtime:
        assert runtime.card_version == 2
        item = await rig.authorize("the quarterly report")
        await rig.offer(item, runtime.identity, card_version=runtime.card_version)
        await wait_for_state(rig, item, "submitted")
        # The same goal again: the writer's text is byte for byte the same, so the Group
        # already holds it as an Artifact, which the second submission names as it is.
        again = await rig.authorize("the quarterly report")
        await rig.offer(again, runtime.identity, card_version=runtime.card_version)
        await wait_for_state(rig, again, "submitted")
    await rig.accept_result(item)
    view = await rig.mission.work_item(item.work_item_id)
    assert view["state"] == "verified"
    [content] = view["submission"]["artifactHashes"]
    text = ArtifactStore(open_store(stack_log_location())).get(content)
    assert text == b"Why the quarterly report\nHow the quarterly report"
    await rig.accept_result(again)
    second = await rig.mission.work_item(again.work_item_id)
    assert second["state"] == "verified"
    assert second["submission"]["artifactHashes"] == [content]


async def test_retries_stay_within_the_contract_and_a_permanent_failure_records_work_failed(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    async with agent_runtime(rig, steps=0) as runtime:
        flaky = await rig.authorize("A flaky source")
        broken = await rig.authorize("A broken input")
        await rig.offer(flaky, runtime.identity)
        await rig.offer(broken, runtime.identity)
        await wait_for_state(rig, flaky, "submitted")
        await wait_for_state(rig, broken, "failed")
        status = await settled_runs(runtime, 2)
        failed = await rig.mission.work_item(broken.work_item_id)
        [evidence_id] = failed["failure"]["failureEvidenceIds"]
        digest = evidence_id.rsplit(":", 1)[-1]
        # The failure's record is the agent's own (its ledger folder), named by its digest.
        record = open_store(str(runtime.ledger)).get(f"failure-evidence/{digest}.json")
    # TRANSIENT_TOOL_FAILURE is retryable in the contract: a second attempt in the same run,
    # whose repeated op ID is answered by the ledger (one call, one effect).
    assert tool_agent.call_count(effects, f"{flaky.work_item_id}#prepare") == 1
    assert len(tool_agent.effect_keys(effects, f"{flaky.work_item_id}#prepare")) == 1
    # Any other failure is permanent: work.failed with Evidence, under the current lease.
    failure = failed["failure"]
    assert failure["failureCode"] == "CAPABILITY_ERROR"
    assert "cannot be parsed" in failure["reason"]
    assert record is not None and b"cannot be parsed" in record
    outcomes = {o["workItemId"]: o["status"] for o in status["outcomes"]}
    assert outcomes == {flaky.work_item_id: "submitted", broken.work_item_id: "failed"}


async def test_a_blocked_run_frees_its_slot_and_unblocked_work_runs_again(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    async with agent_runtime(rig, steps=1) as runtime:
        blocked = await rig.authorize("A blocked export")
        other = await rig.authorize("Another report")
        await rig.offer(blocked, runtime.identity)
        await wait_for_state(rig, blocked, "blocked")
        event = next(e for e in await rig.mission.events_this_run() if e["kind"] == "work.blocked")
        assert event["payload"]["requiredResolution"] == "needs the customer's data export"
        assert "blockedLease" in await rig.mission.work_item(blocked.work_item_id)
        # The one slot is free again: other work runs while the item waits.
        await rig.offer(other, runtime.identity)
        await wait_for_state(rig, other, "submitted")
        await rig.coordinate(
            "work.unblock", {"resolution": "export attached"}, work_item_id=blocked.work_item_id
        )
        await wait_for_state(rig, blocked, "submitted")
    kinds = [e["kind"] for e in await rig.mission.events_this_run()]
    assert kinds.count("work.blocked") == 1 and kinds.count("work.unblocked") == 1
    assert (await rig.mission.work_item(blocked.work_item_id))["ownershipEpoch"] == 1


async def authorize(rig: MissionRig, goal: str, **members: Any) -> WorkItemRef:
    """A WorkItem for ``goal`` authorized by the Coordinator; ``members`` replace members of
    the standard Work Contract (urgency, budget, input Artifacts ...)."""
    contract = work_contract(goal, deadline=in_seconds(86400)) | members
    item = WorkItemRef(new_id(), contract)
    await rig.coordinate("work.authorize", {"contract": contract}, work_item_id=item.work_item_id)
    return item


async def test_groups_weighted_1_2_4_and_a_flooding_group_get_their_weighted_shares(
    mwp_client: MwpClient, effects: Path
) -> None:
    gate = await new_mission(mwp_client)
    crew = gate.crew
    light, middle, heavy, flood = [await new_mission(mwp_client, crew) for _ in range(4)]
    weights = {
        light.mission.group_id: 1,
        middle.mission.group_id: 2,
        heavy.mission.group_id: 4,
        flood.mission.group_id: 1,  # floods critical work: urgency never crosses Groups
    }
    backlog = [(light, 2), (middle, 4), (heavy, 8), (flood, 8)]  # two full rounds, a flood
    (effects / "hold").touch()
    # A short declared duration: admission must not decline the backlog for its deadline.
    async with agent_runtime(gate, steps=1, weights=weights, mean_duration_seconds=5) as runtime:
        # The one slot is held by the gate's item while every Group fills its queue.
        first = await gate.authorize("Hold the slot")
        await gate.offer(first, runtime.identity)
        await wait_for_state(gate, first, "active")
        items: dict[str, MissionRig] = {}
        for rig, count in backlog:
            urgency = "critical" if rig is flood else "routine"
            for n in range(count):
                item = await authorize(rig, f"Item {n}", requestedUrgency=urgency)
                await rig.offer(item, runtime.identity)
                items[item.work_item_id] = rig

        async def all_queued() -> bool:
            return (await scheduler_status(runtime))["queued"] == len(items)

        await eventually(all_queued, timeout=120)
        (effects / "hold").unlink()

        async def all_done() -> bool:
            outcomes = (await scheduler_status(runtime))["outcomes"]
            return len(outcomes) == len(items) + 1

        await eventually(all_done, timeout=300)
        outcomes = (await scheduler_status(runtime))["outcomes"]

    assert all(o["status"] == "submitted" for o in outcomes)
    # One slot: completion order is the Scheduler's dispatch order. While all four Groups had
    # work (the first 16 decisions after the gate), each got exactly its weighted share.
    order = [o["groupId"] for o in outcomes[1:]]
    window = order[:16]
    shares = {g: window.count(g) / len(window) for g in weights}
    for group, weight in weights.items():
        expected = weight / sum(weights.values())
        assert abs(shares[group] - expected) <= 0.1 * expected, (group, shares, weights)
    # The lightest Group waits a bounded number of decisions between its services.
    served = [i for i, g in enumerate(window) if g == light.mission.group_id]
    gaps = [b - a - 1 for a, b in zip([-1, *served], served, strict=False)]
    assert max(gaps) <= starvation_bound(weights, light.mission.group_id)
    # The flood's remaining items ran only once the others had nothing left.
    assert set(order[16:]) == {flood.mission.group_id}


async def test_await_agent_run_serves_the_agent_until_stopped(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    organization = rig.crew.organization
    state = tmp_path / "state"
    KeyStore.in_state_dir(state).save("registry-service", organization.registrar)
    agent_id = f"urn:mwp:agent:stepper-{uuid.uuid4().hex[:8]}"
    agent = runtime_agent.build(
        agent_id, Identity.generate(Principal("agent", agent_id)), organization.organization_id
    )
    ready, stop = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        run_agent_worker(
            agent,
            address=temporal_stack.address,
            state_dir=state,
            organization_id=organization.organization_id,
            tool_store=stack_log_location(),
            scheduler_options={"lease_seconds": 6},
            on_ready=lambda _: ready.set(),
            stop=stop,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), 60)
        item = await rig.authorize("Run from Python")
        await rig.offer(item, agent.identity)
        await wait_for_state(rig, item, "submitted")
    finally:
        stop.set()
        session = await asyncio.wait_for(running, 60)
        handle = mwp_client.temporal.get_workflow_handle(agent_workflow_id(agent_id))
        await handle.terminate("test over")
    assert session.session_epoch == 1 and session.card_version == 1
    assert session.task_queue == agent_task_queue(agent_id)


async def test_a_restarted_agent_gets_its_items_back_under_its_new_session(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()
    item = await rig.authorize("Survive a restart")
    # A lease far longer than the test: only the Session replacement can free the item.
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=300) as first:
        agent = KeyStore(tmp_path / "agent-keys").load(runtime_agent.KEY_NAME)
        await rig.offer(item, agent)
        await eventually(lambda: has_checkpoint(rig, item), timeout=60)
        old = (await rig.mission.work_item(item.work_item_id))["executionLease"]
        first.kill()
        await first.wait()
    (effects / "hold").unlink()
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=300):
        await wait_for_state(rig, item, "submitted")
    events = await rig.mission.events_this_run()
    [revoked] = [e for e in events if e["kind"] == LEASE_REVOKED_KIND]
    assert revoked["payload"]["leaseId"] == old["leaseId"]
    assert (revoked["payload"]["sessionEpoch"], revoked["payload"]["currentSessionEpoch"]) == (1, 2)
    assert OWNERSHIP_EXPIRED_KIND not in {e["kind"] for e in events}  # no lease ran out
    leases = [e["payload"]["executionLease"] for e in events if e["kind"] == "work.started"]
    assert [(x["sessionEpoch"], x["ownershipEpoch"]) for x in leases] == [(1, 1), (2, 1)]
    # The new runtime resumed from the checkpoint the killed one recorded.
    assert [r["resumed"] for r in runtime_agent.runs(effects)] == [None, {"next": 1}]
    assert tool_agent.call_count(effects, f"{item.work_item_id}#0") == 1


async def test_a_paused_agent_resuming_after_its_lease_ran_out_keeps_its_late_result_for_audit(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold-submit").touch()
    item = await rig.authorize("Finish too late")
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=4) as paused:
        agent = KeyStore(tmp_path / "agent-keys").load(runtime_agent.KEY_NAME)
        await rig.offer(item, agent)

        async def published() -> bool:  # the result is published; the run waits to submit
            return bool((await rig.mission.view()).get("artifacts"))

        await eventually(published, timeout=60)
        paused.send_signal(signal.SIGSTOP)  # a long GC pause, a suspended laptop ...
        try:

            async def fenced() -> bool:
                view = await rig.mission.work_item(item.work_item_id)
                return bool(view.get("ownerFencedReason"))

            await eventually(fenced, timeout=30)
        finally:
            paused.send_signal(signal.SIGCONT)
        (effects / "hold-submit").unlink()  # it wakes up and submits its finished result

        async def kept() -> list[str]:  # kept by the agent, in its own ledger folder
            store = open_store(str(tmp_path / "agent-ledger"))
            return await asyncio.to_thread(store.list_keys, LATE_RESULT_PREFIX)

        async def late_result_kept() -> bool:
            return any(item.work_item_id.rsplit(":", 1)[-1] in k for k in await kept())

        await eventually(late_result_kept, timeout=60)
        # (What the AgentWorkflow records for the run depends on whether the pause outlasted
        # the activity's heartbeat timeout, so it is not asserted here.)
        agents = await agents_client(temporal_stack.address)
        await scheduler_of(agents, (tmp_path / "agent-id").read_text()).terminate("test over")
    view = await rig.mission.work_item(item.work_item_id)
    assert view["state"] == "active" and "submission" not in view  # never completed by it
    [key] = [k for k in await kept() if item.work_item_id.rsplit(":", 1)[-1] in k]
    record = json.loads(open_store(str(tmp_path / "agent-ledger")).get(key) or b"{}")
    assert record["refusal"]["code"] == "WORK_STALE_OWNERSHIP"
    assert record["command"]["kind"] == "work.submit"
    assert record["ownershipEpoch"] == 1


def budget(**limits: int) -> dict[str, Any]:
    return {"budget": {"currency": "USD", "financialLimit": 10, **limits}}


async def test_a_run_over_its_tool_or_wall_clock_budget_fails_with_evidence(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    async with agent_runtime(rig, steps=3) as runtime:
        # prepare + 3 steps = 4 tool calls against a limit of 2: the third call is refused.
        tools = await authorize(rig, "Too many tools", **budget(toolCallLimit=2))
        enough = await authorize(rig, "Enough tools", **budget(toolCallLimit=4))
        await rig.offer(tools, runtime.identity)
        await rig.offer(enough, runtime.identity)
        await wait_for_state(rig, tools, "failed")
        await wait_for_state(rig, enough, "submitted")
    failure = (await rig.mission.work_item(tools.work_item_id))["failure"]
    assert failure["failureCode"] == "TOOL_BUDGET_EXHAUSTED"
    assert tool_agent.call_count(effects, f"{tools.work_item_id}#1") == 0  # never called
    assert tool_agent.call_count(effects, f"{tools.work_item_id}#0") == 1

    (effects / "hold").touch()  # the run waits after its first step: past a 2 s budget
    async with agent_runtime(rig, steps=3) as runtime:
        slow = await authorize(rig, "Too slow", **budget(wallClockSecondsLimit=2))
        await rig.offer(slow, runtime.identity)
        await wait_for_state(rig, slow, "failed")
    (effects / "hold").unlink()
    failure = (await rig.mission.work_item(slow.work_item_id))["failure"]
    assert failure["failureCode"] == "WALL_CLOCK_BUDGET_EXHAUSTED"


async def test_the_scheduler_is_inspected_and_steered_from_the_command_line(
    mwp_client: MwpClient,
    temporal_stack: BackgroundStack,
    effects: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()

    async def cli(*argv: str) -> tuple[int, str, str]:
        where = ("--address", temporal_stack.address, "--namespace", AGENTS_NAMESPACE)
        code = await asyncio.to_thread(main, [*argv, *where])
        out, err = capsys.readouterr()
        return code, out, err

    async with agent_runtime(rig) as runtime:
        agent_id = runtime.agent.agent_id
        # The agent's key as `mwp registry add-agent` leaves it: preempt and weight seal with it.
        keys = KeyStore.in_state_dir(tmp_path)
        keys.save(f"agent-{agent_id.rsplit(':', 1)[-1]}", runtime.identity)
        state = ("--state-dir", str(tmp_path))
        group = rig.mission.group_id
        item = await rig.authorize("Steered by hand")
        await rig.offer(item, runtime.identity)
        await wait_for_state(rig, item, "active")
        code, out, _ = await cli("agent", "status", agent_id)
        assert code == 0 and "1 of 1 running" in out and agent_id in out
        # The Temporal UI shows the same at a glance (the workflow's current details).
        details = await current_details(runtime.agents, agent_workflow_id(agent_id))
        assert details.startswith("**1 of 1 slots running**") and "1 Groups" in details
        code, _, err = await cli("agent", "preempt", agent_id, group, item.work_item_id)
        assert code == 1 and "no key of" in err  # ./.mwp holds no key of this agent
        code, out, _ = await cli("agent", "preempt", agent_id, group, item.work_item_id, *state)
        assert code == 0 and "next checkpoint" in out
        (effects / "hold").unlink()
        await wait_for_state(rig, item, "submitted")
        await settled_runs(runtime, 2)
        code, out, _ = await cli("agent", "status", agent_id, "--json")
        outcomes = [o["status"] for o in json.loads(out)["outcomes"]]
        assert code == 0 and outcomes == ["preempted", "submitted"]
        code, out, _ = await cli("agent", "weight", agent_id, group, "4", "--quota", "1", *state)
        assert code == 0 and "weight 4, at most 1 slots" in out
        status = await scheduler_status(runtime)
        assert status["refusedSignals"]["total"] == 0  # both sealed with the agent's key
        code, _, err = await cli("agent", "weight", agent_id, group, "0", *state)
        assert code == 2 and "WEIGHT" in err
    code, _, err = await cli("agent", "status", "urn:mwp:agent:nobody-runs-this")
    assert code == 1 and "no Scheduler" in err


async def test_the_scheduler_rolls_over_between_runs_and_loses_no_work(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    async with agent_runtime(rig, steps=1, rounds_per_run=6) as runtime:
        items = [await rig.authorize(f"Item {n}") for n in range(4)]
        for item in items:
            await rig.offer(item, runtime.identity)
        for item in items:
            await wait_for_state(rig, item, "submitted")
        handle = runtime.scheduler
        described = await handle.describe()
        first_run = described.raw_description.workflow_execution_info.first_run_id
        assert described.run_id != first_run  # it continued as new at least once

        async def idle() -> bool:  # the last run's outcome follows the Group's Event
            status = await scheduler_status(runtime)
            return bool(status["running"] == 0 and status["queued"] == 0)

        await eventually(idle, timeout=30)
    # Each item ran once: a rollover neither lost nor repeated a run.
    kinds = [e["kind"] for e in await rig.mission.events_this_run()]
    assert kinds.count("work.started") == 4 and kinds.count("work.submitted") == 4
    for item in items:
        assert tool_agent.call_count(effects, f"{item.work_item_id}#0") == 1


async def test_a_capability_reads_its_input_artifacts_hash_checked(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    store = open_store(stack_log_location())
    artifacts = ArtifactStore(store)
    good = artifacts.put(f"input data {new_id()}".encode())
    bad = artifacts.put(f"input to be altered {new_id()}".encode())
    path = Path(store.uri(content_key(bad.content_hash)).removeprefix("file://"))
    path.chmod(0o644)
    path.write_bytes(b"altered after it was stored")  # the store no longer matches the hash

    async with agent_runtime(rig, steps=0) as runtime:
        items = []
        for goal, content in (("Use the input", good), ("Use the altered input", bad)):
            item = await authorize(rig, goal, inputArtifacts=[content.content_hash])
            await rig.offer(item, runtime.identity)
            items.append(item)
        await wait_for_state(rig, items[0], "submitted")
        await wait_for_state(rig, items[1], "failed")
    [result] = (await rig.mission.work_item(items[0].work_item_id))["submission"]["artifactHashes"]
    assert artifacts.get(result).endswith(b" | " + artifacts.get(good.content_hash))
    failure = (await rig.mission.work_item(items[1].work_item_id))["failure"]
    assert failure["failureCode"] == "CAPABILITY_ERROR"
    assert "failed its integrity check" in failure["reason"]


async def test_a_run_whose_membership_epoch_changes_mid_run_refreshes_it_and_goes_on(
    mwp_client: MwpClient, effects: Path
) -> None:
    rig = await new_mission(mwp_client)
    (effects / "hold").touch()
    async with agent_runtime(rig, steps=2) as runtime:
        item = await rig.authorize("Outlive a membership change")
        await rig.offer(item, runtime.identity)
        await eventually(lambda: has_checkpoint(rig, item), timeout=60)
        agent_id = runtime.agent.agent_id
        before = (await rig.mission.epochs(agent_id))["membershipEpoch"]
        await rig.coordinate(
            "membership.change",
            {
                "memberId": agent_id,
                "role": "worker",
                "scopes": ["work.execute", "work.report"],
                "reason": "may also report",
            },
        )
        after = (await rig.mission.epochs(agent_id))["membershipEpoch"]
        assert after != before  # the run holds an epoch that is now stale
        (effects / "hold").unlink()
        await wait_for_state(rig, item, "submitted")
    kinds = [e["kind"] for e in await rig.mission.events_this_run()]
    assert kinds.count("work.started") == 1  # the same run went on to submit ...
    assert [r["resumed"] for r in runtime_agent.runs(effects)] == [None]  # ... uninterrupted
