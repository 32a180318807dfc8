"""The Coordinator's functions run as Temporal activities, one decision workflow per call, on a
real dev server behind a real gateway: each call shows as a ``CoordinatorDecisionWorkflow`` in
the agents' namespace (none in the authority's); a runtime stopped while its planner runs and
started again gets that first plan back without a second call; a failing planner is retried by
the decision's policy, and a decision that failed every attempt is reported and nothing of it
applied; a plan decided under an earlier Coordinator Epoch is not applied after the
MissionOwner appoints the Coordinator again (a new epoch), which plans anew."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus

from mwp.agent import CardInfo
from mwp.client import Identity, MwpClient, connect
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.contracts.coordinator import (
    DECISION_WORKFLOW_TYPE,
    PLAN,
    RUN_HANDLER,
    CoordinatorDecision,
    DecisionPolicy,
    coordinator_task_queue,
    decision_workflow_id,
)
from mwp.coordinator import Coordinator, Plan, PlannedItem, PlanningContext
from mwp.coordinator.decisions import TemporalDecisions
from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.reconcile import work_item_id
from mwp.core.trust.registry import Principal
from mwp.dev.scenario import definition_of_done, mission_budget
from mwp.workers.agent import ensure_registered
from tests.integration.conftest import Organization, stack_address
from tests.integration.gateway_agents import AGENTS_NAMESPACE, agent_gateway
from tests.integration.missions_helper import eventually
from tests.integration.test_coordinator_runtime import coordinating, with_a_writer

KEYS = ("draft", "check")
T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T]], timeout: float) -> T:
    """``check``'s first truthy value, polled (the test fails after ``timeout`` seconds)."""
    found: list[T] = []

    async def truthy() -> bool:
        found[:] = [await check()]
        return bool(found[0])

    await eventually(truthy, timeout=timeout)
    return found[0]


async def holds(condition: Callable[[], bool], timeout: float) -> None:
    async def check() -> bool:
        return condition()

    await eventually(check, timeout=timeout)


@dataclass
class CountedPlanner:
    """A plan function that counts its calls, names the call in each goal, raises on the
    calls in ``failing`` and, with ``hold_first``, holds its first call until ``release``."""

    failing: tuple[int, ...] = ()
    hold_first: bool = False
    calls: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, ctx: PlanningContext) -> Plan:
        self.calls += 1
        call = self.calls
        if call in self.failing:
            raise RuntimeError(f"the model was unreachable (call {call})")
        if call == 1 and self.hold_first:
            await self.release.wait()
        return Plan(
            [
                PlannedItem("draft", f"Draft the report (call {call})"),
                PlannedItem("check", f"Check the report (call {call})", depends_on=["draft"]),
            ]
        )


def coordinator_of(organization: Organization, worker_id: str, fn: CountedPlanner) -> Coordinator:
    agent_id = f"urn:mwp:agent:decider-{worker_id[-8:]}"
    coordinator = Coordinator(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo(organization.organization_id, Principal("human", "urn:mwp:human:t"), "Dec"),
        workers=[worker_id],
    )

    @coordinator.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return await fn(ctx)

    return coordinator


@dataclass
class Rig:
    organization: Organization
    owner: Identity
    coordinator: Coordinator
    settings: Any
    agents: Client  # the agents' namespace

    async def mission(self, client: MwpClient) -> MissionHandle:
        mission, _ = await MissionClient(client, self.organization.organization_id).create(
            self.owner,
            objective="Ship the report",
            coordinator_agent_id=self.coordinator.agent_id,
            definition_of_done=definition_of_done("The report is written and checked."),
            budget=mission_budget(),
            deadline=in_seconds(7 * 86400),
        )
        return mission

    def decisions(self, *more: str) -> str:
        """The visibility query of this Coordinator's decision workflows."""
        queue = coordinator_task_queue(self.coordinator.agent_id)
        return " AND ".join(
            [f'WorkflowType="{DECISION_WORKFLOW_TYPE}"', f'TaskQueue="{queue}"', *more]
        )


@contextlib.asynccontextmanager
async def rig(client: MwpClient, tmp_path: Path, fn: CountedPlanner) -> AsyncIterator[Rig]:
    organization, owner, writer = await with_a_writer(client, tmp_path)
    coordinator = coordinator_of(organization, writer.agent_id, fn)
    for agent in (writer, coordinator.agent):  # the writer is offered work, never runs
        await ensure_registered(organization.registry, agent)
    agents = (await connect(stack_address(), AGENTS_NAMESPACE)).temporal
    async with agent_gateway(client, organization, tmp_path / "tls") as (_, settings):
        yield Rig(organization, owner, coordinator, settings, agents)


async def planned_goals(mission: MissionHandle) -> dict[str, str]:
    """The authorized WorkItems' goals, by plan key (empty until both are authorized)."""
    events = await mission.events_this_run()
    authorized = {e["workItemId"] for e in events if e["kind"] == "work.authorized"}
    ids = {key: work_item_id(mission.group_id, key) for key in KEYS}
    if not set(ids.values()) <= authorized:
        return {}
    return {k: (await mission.work_item(i))["contract"]["goal"] for k, i in ids.items()}


async def authorized_count(mission: MissionHandle) -> int:
    return sum(1 for e in await mission.events_this_run() if e["kind"] == "work.authorized")


async def test_each_call_is_a_decision_workflow_in_the_agents_namespace(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    fn = CountedPlanner()
    lines: list[str] = []
    async with (
        rig(mwp_client, tmp_path, fn) as r,
        coordinating(r.coordinator, r.settings, tmp_path / "state", lines),
    ):
        mission = await r.mission(mwp_client)
        await until(lambda: planned_goals(mission), timeout=30)
        wanted = decision_workflow_id(
            mission.group_id, r.coordinator.agent_id, 1, PLAN, mission.mission_id
        )

        async def listed() -> list[Any]:
            return [e async for e in r.agents.list_workflows(r.decisions())]

        (decision,) = await until(listed, timeout=15)
        assert decision.id == wanted
        assert decision.status == WorkflowExecutionStatus.COMPLETED
        handle = r.agents.get_workflow_handle(wanted)
        history = await handle.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert scheduled == [RUN_HANDLER]
        answer = await handle.result()
        assert [i["goal"] for i in answer["items"]] == [
            "Draft the report (call 1)",
            "Check the report (call 1)",
        ]
        # The Group Authority's namespace holds no decision: they are the Coordinator's own.
        found = [e async for e in mwp_client.temporal.list_workflows(r.decisions())]
        assert found == []
        # Asking for the same decision again reads the recorded answer: no second call.
        again = CoordinatorDecision(
            mission.group_id, r.coordinator.agent_id, 1, PLAN, mission.mission_id, {}
        )
        queue = coordinator_task_queue(r.coordinator.agent_id)
        assert await TemporalDecisions(r.agents, queue).decide(again) == answer
    assert fn.calls == 1
    assert any("planned 2 WorkItems" in line for line in lines), lines


async def test_a_runtime_stopped_mid_plan_gets_its_first_plan_back_without_a_second_call(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    fn = CountedPlanner(hold_first=True)
    state = tmp_path / "state"
    async with rig(mwp_client, tmp_path, fn) as r:
        first: list[str] = []
        running = contextlib.AsyncExitStack()
        runtime = await running.enter_async_context(
            coordinating(r.coordinator, r.settings, state, first)
        )
        mission = await r.mission(mwp_client)
        await holds(lambda: fn.calls == 1, timeout=30)
        # Stopped while the planner runs: the runtime lets go of the decision (its link
        # closes), then its worker lets the running handler finish within its grace.
        stopping = asyncio.create_task(running.aclose())
        await holds(runtime.link.closed.is_set, timeout=10)
        fn.release.set()
        await stopping
        slug = r.coordinator.agent_id.rsplit(":", 1)[-1]
        assert PlanJournal(state / "coordinator" / slug / "plans").plans(mission.group_id) == []
        assert await authorized_count(mission) == 0

        second: list[str] = []
        async with coordinating(r.coordinator, r.settings, state, second):
            goals = await until(lambda: planned_goals(mission), timeout=30)
    assert fn.calls == 1  # the restarted runtime read the decision, not the planner
    assert goals == {"draft": "Draft the report (call 1)", "check": "Check the report (call 1)"}
    assert any("planned 2 WorkItems" in line for line in second), second
    assert not any("planned" in line for line in first), first


async def test_a_failing_plan_is_retried_and_a_decision_that_failed_is_reported_not_applied(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    # Two attempts per decision: the first decision fails both (calls 1, 2); the next one,
    # asked for at the next tick as a new run of the same workflow, succeeds on its retry.
    fn = CountedPlanner(failing=(1, 2, 3))
    policy = DecisionPolicy(attempts=2, first_retry_seconds=0.2)
    lines: list[str] = []
    async with (
        rig(mwp_client, tmp_path, fn) as r,
        coordinating(r.coordinator, r.settings, tmp_path / "state", lines, policy=policy),
    ):
        mission = await r.mission(mwp_client)

        async def failure_reported() -> bool:
            return any("plan failed" in line for line in lines)

        await eventually(failure_reported, timeout=30)
        assert fn.calls == 2
        assert await authorized_count(mission) == 0
        (said,) = [line for line in lines if "plan failed" in line]
        assert "RuntimeError" in said and "nothing of it applied" in said, said

        goals = await until(lambda: planned_goals(mission), timeout=30)
        wanted = decision_workflow_id(
            mission.group_id, r.coordinator.agent_id, 1, PLAN, mission.mission_id
        )
        runs = [e async for e in r.agents.list_workflows(f'WorkflowId="{wanted}"')]
    assert fn.calls == 4
    assert goals == {"draft": "Draft the report (call 4)", "check": "Check the report (call 4)"}
    assert sorted(run.status for run in runs) == sorted(
        [WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.COMPLETED]
    )


async def test_a_plan_decided_under_an_earlier_coordinator_epoch_is_not_applied(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    fn = CountedPlanner(hold_first=True)
    lines: list[str] = []
    async with (
        rig(mwp_client, tmp_path, fn) as r,
        coordinating(r.coordinator, r.settings, tmp_path / "state", lines) as runtime,
    ):
        mission = await r.mission(mwp_client)
        await holds(lambda: fn.calls == 1, timeout=30)
        # While the planner runs, the MissionOwner appoints the Coordinator again.
        await mission.send(
            r.owner, "mission.assign_coordinator", {"agentId": r.coordinator.agent_id}
        )

        def epoch() -> int:
            lease = runtime.groups[mission.group_id].authority.epochs_of(r.coordinator.agent_id)
            return int(lease["coordinator"]["coordinatorEpoch"])

        await holds(lambda: epoch() == 2, timeout=15)
        fn.release.set()
        goals = await until(lambda: planned_goals(mission), timeout=30)
        assert goals == {"draft": "Draft the report (call 2)", "check": "Check the report (call 2)"}
        first, second = [
            await r.agents.get_workflow_handle(
                decision_workflow_id(
                    mission.group_id, r.coordinator.agent_id, e, PLAN, mission.mission_id
                )
            ).result()
            for e in (1, 2)
        ]
    assert fn.calls == 2
    assert first["items"][0]["goal"] == "Draft the report (call 1)"  # decided, never applied
    assert second["items"][0]["goal"] == "Draft the report (call 2)"
    assert any(
        "decided under Coordinator Epoch 1, not applied under Coordinator Epoch 2" in line
        for line in lines
    ), lines
