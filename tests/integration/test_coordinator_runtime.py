"""A Coordinator written as plain async functions (mwp.coordinator), run through a real gateway
beside a real Worker runtime: it plans a Mission into a dependent graph, offers each WorkItem
as its dependencies are verified, reviews each result against its Evidence, submits the
Mission, replans when the MissionOwner requests changes, and submits again; the owner
approves. Every step is a Command the Coordinator signed and the Group Authority decided."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow

from mwp.agent import Agent, CapabilityContext, CardInfo, Submission
from mwp.client import Identity, MwpClient, connect
from mwp.client.missions import MissionClient, in_seconds
from mwp.contracts.coordinator import DecisionPolicy
from mwp.coordinator import (
    ChangesContext,
    Coordinator,
    Plan,
    PlannedItem,
    PlanningContext,
    Review,
    ReviewContext,
)
from mwp.coordinator.reconcile import work_item_id
from mwp.coordinator.runtime import CoordinatorRuntime
from mwp.core.trust.registry import Principal
from mwp.dev.scenario import definition_of_done, mission_budget
from mwp.dev.stack import ensure_namespace
from mwp.workers.agent import ensure_registered
from mwp.workers.coordinator import run_coordinator_worker
from mwp.workflows import patches
from tests.histories import production_replayer
from tests.integration.conftest import Organization, new_organization, stack_address
from tests.integration.gateway_agents import (
    AGENTS_NAMESPACE,
    address_of,
    agent_gateway,
    covering_submission,
    gateway_runtime,
    sample_agent,
    scheduler_of,
)
from tests.integration.missions_helper import eventually

REVIEWED: list[str] = []  # the goals the Coordinator reviewed, with what it read


def planner(organization_id: str, worker_id: str) -> Coordinator:
    agent_id = f"urn:mwp:agent:planner-{worker_id[-8:]}"
    coordinator = Coordinator(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo(organization_id, Principal("human", "urn:mwp:human:tester"), "Planner"),
        workers=[worker_id],
    )

    @coordinator.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return Plan(
            [
                PlannedItem("requirements", f"List the requirements of: {ctx.objective}"),
                PlannedItem("change", "Implement the change", depends_on=["requirements"]),
                PlannedItem("tests", "Test the change", depends_on=["change"]),
            ]
        )

    @coordinator.review
    async def review(ctx: ReviewContext) -> Review:
        (digest,) = ctx.artifact_hashes
        text = (await ctx.artifact(digest)).decode()
        REVIEWED.append(f"{ctx.work_item['contract']['goal']}: {text}")
        if not ctx.evidence_covers_every_criterion:
            return Review.reject("a criterion has no passing Evidence")
        return Review.accept("Read the result and its Evidence.")

    @coordinator.on_changes_requested
    async def replan(ctx: ChangesContext) -> Plan:
        return Plan(
            [PlannedItem("notes", f"Write release notes ({ctx.reason})", depends_on=["tests"])]
        )

    return coordinator


@contextlib.asynccontextmanager
async def coordinating(
    coordinator: Coordinator,
    settings: Any,
    folder: Path,
    lines: list[str],
    *,
    policy: DecisionPolicy | None = None,
) -> AsyncIterator[CoordinatorRuntime]:
    """``coordinator`` run as `mwp coordinator run` runs it: through the gateway ``settings``
    name, its functions run as activities of decision workflows in the agents' namespace."""
    stop = asyncio.Event()
    ready: asyncio.Future[CoordinatorRuntime] = asyncio.get_running_loop().create_future()
    agents = await connect(stack_address(), AGENTS_NAMESPACE)
    await ensure_namespace(agents.temporal.service_client, AGENTS_NAMESPACE)
    task = asyncio.create_task(
        run_coordinator_worker(
            coordinator,
            settings,
            folder,
            stop,
            address=stack_address(),
            namespace=AGENTS_NAMESPACE,
            report=lines.append,
            on_ready=ready.set_result,
            policy=policy,
        )
    )
    try:
        async with asyncio.timeout(30):
            done, _ = await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
        yield ready.result()
    finally:
        stop.set()
        await task


async def with_a_writer(
    mwp_client: MwpClient, tmp_path: Path
) -> tuple[Organization, Identity, Agent]:
    """A new Organization, its MissionOwner, and a Worker whose one capability submits a
    result naming its goal, with Evidence covering every criterion."""
    organization = await new_organization(mwp_client)
    owner = organization.identity("human", f"owner-{tmp_path.name[-8:]}")
    await organization.registry.register_binding(owner)
    writer = sample_agent(organization.organization_id, "Writer")

    @writer.capability("mwp.dev.general", "1.0.0")
    async def write(ctx: CapabilityContext) -> Submission:
        return await covering_submission(ctx, f"done: {ctx.contract['goal']}".encode())

    return organization, owner, writer


async def test_a_coordinator_sdk_runs_a_mission_to_approval_through_the_gateway(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    organization, owner, writer = await with_a_writer(mwp_client, tmp_path)

    coordinator = planner(organization.organization_id, writer.agent_id)
    for agent in (writer, coordinator.agent):
        await ensure_registered(organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    lines: list[str] = []
    async with (
        agent_gateway(mwp_client, organization, tmp_path / "tls") as (_, settings),
        gateway_runtime(writer, settings, address_of(mwp_client), tmp_path / "ledger"),
        coordinating(coordinator, settings, tmp_path / "coordinator", lines),
    ):
        mission, _ = await MissionClient(mwp_client, organization.organization_id).create(
            owner,
            objective="Ship the pagination change",
            coordinator_agent_id=coordinator.agent_id,
            definition_of_done=definition_of_done("The change is implemented and tested."),
            budget=mission_budget(),
            deadline=in_seconds(7 * 86400),
        )

        async def state_is(wanted: str) -> bool:
            return bool((await mission.view())["state"] == wanted)

        await eventually(lambda: state_is("awaiting_approval"), timeout=90)
        view = await mission.view()
        goals = {w["workItemId"]: w for w in view["workItems"]}
        planned = [work_item_id(mission.group_id, k) for k in ("requirements", "change", "tests")]
        assert set(goals) == set(planned)
        assert all(w["state"] == "verified" for w in goals.values())
        assert len(view["submission"]["artifactHashes"]) == 3
        # Dependencies held: each item was offered only once the one before it was verified.
        events = await mission.events_this_run()
        order = [e["workItemId"] for e in events if e["kind"] == "work.offer.created"]
        assert order == planned
        assert [r.split(":")[0] for r in REVIEWED[-3:]] == [
            "List the requirements of",
            "Implement the change",
            "Test the change",
        ]

        await mission.request_changes(owner, "Add release notes.")
        await eventually(lambda: state_is("awaiting_approval"), timeout=90)
        view = await mission.view()
        notes = work_item_id(mission.group_id, "notes")
        assert {w["workItemId"]: w["state"] for w in view["workItems"]}[notes] == "verified"
        assert len(view["submission"]["artifactHashes"]) == 4
        approved = await mission.approve(owner, comments="Ship it.")
        assert any(e["kind"] == "mission.approved" for e in approved["events"])

    assert any("planned 3 WorkItems" in line for line in lines), lines
    assert any("changes requested" in line for line in lines), lines
    # Every coordination Command was the Coordinator's own, under its gateway Session.
    coordinated = [e for e in events if e["actor"]["id"] == coordinator.agent_id]
    assert {e["kind"] for e in coordinated} >= {
        "work.authorized",
        "work.offer.created",
        "work.result.accepted",
        "mission.submitted_for_approval",
    }


async def test_a_worker_new_to_the_group_starts_an_item_whose_dependency_was_verified_before_it(
    mwp_client: MwpClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tester first joins the Group when it is offered the tests, whose dependency (the
    change) was verified before: the offer's Context Package cites the Event that accepted
    the change, so the tester admits the item and starts it at once (MWP-MSN-012). Its
    AgentWorkflow history replays, and no longer does with the patch's check removed."""
    organization, owner, writer = await with_a_writer(mwp_client, tmp_path)
    tester = sample_agent(organization.organization_id, "Tester")

    @tester.capability("mwp.dev.general", "1.0.0")
    async def test(ctx: CapabilityContext) -> Submission:
        return await covering_submission(ctx, f"tested: {ctx.contract['goal']}".encode())

    coordinator = Coordinator(
        f"urn:mwp:agent:lead-{tmp_path.name[-8:]}",
        Identity.generate(Principal("agent", f"urn:mwp:agent:lead-{tmp_path.name[-8:]}")),
        card=CardInfo(organization.organization_id, Principal("human", "urn:mwp:human:t"), "Lead"),
        workers=[writer.agent_id],
    )

    @coordinator.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return Plan(
            [
                PlannedItem("change", "Implement the change"),
                PlannedItem(
                    "tests", "Test the change", depends_on=["change"], candidates=[tester.agent_id]
                ),
            ]
        )

    for agent in (writer, tester, coordinator.agent):
        await ensure_registered(organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    async with (
        agent_gateway(mwp_client, organization, tmp_path / "tls") as (_, settings),
        gateway_runtime(writer, settings, address_of(mwp_client), tmp_path / "writer"),
        gateway_runtime(tester, settings, address_of(mwp_client), tmp_path / "tester"),
        coordinating(coordinator, settings, tmp_path / "coordinator", []),
    ):
        mission, _ = await MissionClient(mwp_client, organization.organization_id).create(
            owner,
            objective="Ship the retry change",
            coordinator_agent_id=coordinator.agent_id,
            definition_of_done=definition_of_done("The change is implemented and tested."),
            budget=mission_budget(),
            deadline=in_seconds(7 * 86400),
        )

        async def awaiting_approval() -> bool:
            return bool((await mission.view())["state"] == "awaiting_approval")

        await eventually(awaiting_approval, timeout=90)
        events = await mission.events_this_run()
        change, tests = (work_item_id(mission.group_id, k) for k in ("change", "tests"))
        verified = next(
            e for e in events if e["kind"] == "work.result.accepted" and e["workItemId"] == change
        )
        joined = next(
            e
            for e in events
            if e["kind"] == "membership.changed"
            and e["payload"]["membership"]["member"]["id"] == tester.agent_id
        )
        assert joined["sequence"] > verified["sequence"]  # new to the Group after the change
        offer = next(
            e for e in events if e["kind"] == "work.offer.created" and e["workItemId"] == tests
        )
        package = next(
            e["payload"]["contextPackage"]
            for e in events
            # The offer's package; the Mission-wide hand-over packages name no WorkItem.
            if e["kind"].endswith("context_package_published") and e.get("workItemId") == tests
        )
        assert verified["eventId"] in package["sourceEventRange"]["eventIds"]
        assert offer["sequence"] > joined["sequence"]
        started = [e for e in events if e["kind"] == "work.started" and e["workItemId"] == tests]
        assert [e["actor"]["id"] for e in started] == [tester.agent_id]
        history = await scheduler_of(
            await connect(address_of(mwp_client), AGENTS_NAMESPACE), tester.agent_id
        ).fetch_history()

    replayer = production_replayer()
    await replayer.replay_workflow(history)
    real = workflow.patched
    removed = patches.AGENT_CITED_RESULTS.id
    monkeypatch.setattr(workflow, "patched", lambda i: False if i == removed else real(i))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert isinstance(result.replay_failure, workflow.NondeterminismError)
