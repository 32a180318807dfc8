"""A replacement Coordinator takes over a running Mission from the latest hand-over Context
Package, through a real gateway on a real dev server (spec 7.2, MWP-MSN-005).

Coordinator A plans three dependent WorkItems and publishes a Mission-wide package carrying
its plan before authorizing it, then one as its plan is authorized and as each item is
verified. Once the first is verified A is stopped; the MissionOwner appoints Coordinator B with
A's latest package. B never plans: it adopts the Group's WorkItems, reconciles them (reviews,
offers what their dependencies allow) and submits the Mission for Approval, with every item
authorized once, by A. A's Commands are stale then.

In the second test A stops right after publishing the package that carries its plan, before it
authorizes anything: B adopts that remaining plan, authorizes each item once under A's WorkItem
IDs, and takes the Mission to Approval.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from mwp.agent import CardInfo
from mwp.client import Identity, MwpClient
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.contracts.errors import RemoteMwpError
from mwp.coordinator import Coordinator, Plan, PlanningContext
from mwp.coordinator.reconcile import work_item_id
from mwp.coordinator.remaining_plan import remaining_plan
from mwp.core.errors import ErrorCode
from mwp.core.group.context_package import PUBLISHED_KIND
from mwp.core.trust.registry import Principal
from mwp.core.wire.values import format_utc
from mwp.dev.scenario import definition_of_done, mission_budget
from mwp.dev.stack import ensure_namespace
from mwp.workers.agent import ensure_registered
from mwp.workers.coordinator import run_coordinator_worker
from tests.integration.conftest import stack_address
from tests.integration.gateway_agents import (
    AGENTS_NAMESPACE,
    address_of,
    agent_gateway,
    gateway_runtime,
)
from tests.integration.missions_helper import eventually, refused
from tests.integration.test_coordinator_runtime import coordinating, planner, with_a_writer

KEYS = ("requirements", "change", "tests")


def mission_wide(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Mission-wide Context Packages published, in order (an offer's are scoped to its
    WorkItem)."""
    return [
        e["payload"]["contextPackage"]
        for e in events
        if e["kind"] == PUBLISHED_KIND and "workItemId" not in e["payload"]["contextPackage"]
    ]


def replacement(organization_id: str, worker_id: str) -> Coordinator:
    """Coordinator B: its ``plan`` would authorize other work, so calling it fails the test."""
    agent_id = f"urn:mwp:agent:successor-{worker_id[-8:]}"
    coordinator = Coordinator(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo(organization_id, Principal("human", "urn:mwp:human:tester"), "Successor"),
        workers=[worker_id],
    )

    @coordinator.plan
    async def plan(ctx: PlanningContext) -> Plan:
        raise AssertionError("a replacement must adopt the Mission's WorkItems, not plan it")

    return coordinator


async def test_a_replacement_coordinator_takes_over_from_the_latest_package_and_finishes(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    organization, owner, writer = await with_a_writer(mwp_client, tmp_path)

    a = planner(organization.organization_id, writer.agent_id)
    b = replacement(organization.organization_id, writer.agent_id)
    for agent in (writer, a.agent, b.agent):
        await ensure_registered(organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    a_lines: list[str] = []
    b_lines: list[str] = []
    async with (
        agent_gateway(mwp_client, organization, tmp_path / "tls") as (_, settings),
        gateway_runtime(writer, settings, address_of(mwp_client), tmp_path / "ledger"),
    ):
        async with coordinating(a, settings, tmp_path / "a", a_lines):
            mission, _ = await MissionClient(mwp_client, organization.organization_id).create(
                owner,
                objective="Ship the pagination change",
                coordinator_agent_id=a.agent_id,
                definition_of_done=definition_of_done("The change is implemented and tested."),
                budget=mission_budget(),
                deadline=in_seconds(7 * 86400),
            )
            ids = [work_item_id(mission.group_id, k) for k in KEYS]

            async def first_verified_and_handed_over() -> bool:
                events = await mission.events_this_run()
                accepted = [
                    e["eventId"]
                    for e in events
                    if e["kind"] == "work.result.accepted" and e["workItemId"] == ids[0]
                ]
                cited = [p["sourceEventRange"]["eventIds"] for p in mission_wide(events)]
                return bool(accepted) and any(accepted[0] in c for c in cited)

            await eventually(first_verified_and_handed_over, timeout=90)
        # A is stopped. The MissionOwner appoints B with A's latest package (B's runtime runs
        # first: the appointment binds the Session its HELLO opened).
        packages = mission_wide(await mission.events_this_run())
        latest = packages[-1]
        assert latest["generatedBy"]["id"] == a.agent_id
        assert [p["version"] for p in packages] == list(range(1, len(packages) + 1))
        async with coordinating(b, settings, tmp_path / "b", b_lines):
            await appoint_and_finish(mission, owner, b.agent_id, latest["contextPackageId"])
        view = await mission.view()
        assert {w["workItemId"]: w["state"] for w in view["workItems"]} == dict.fromkeys(
            ids, "verified"
        )
        events = await mission.events_this_run()
        authorized = [e for e in events if e["kind"] == "work.authorized"]
        assert [e["workItemId"] for e in authorized] == ids  # each once, by A
        assert {e["actor"]["id"] for e in authorized} == {a.agent_id}
        (submitted,) = [e for e in events if e["kind"] == "mission.submitted_for_approval"]
        assert submitted["actor"]["id"] == b.agent_id
        assert len(view["submission"]["artifactHashes"]) == 3

        # A, started again, is refused as stale: its Coordinator Epoch is fenced.
        async with coordinating(a, settings, tmp_path / "a", a_lines) as runtime:

            async def a_sees_b() -> bool:
                group = runtime.groups.get(mission.group_id)
                return group is not None and group.authority.sequence >= view["sequence"]

            await eventually(a_sees_b, timeout=30)
            epochs = await mission.epochs(a.agent_id)

            async def fenced_by_its_coordinator_epoch() -> bool:
                stale = a.identity.command(
                    "mission.renew_coordinator",
                    {"leaseSeconds": 3600},
                    group_id=mission.group_id,
                    session_epoch=runtime.link.session_epoch,
                    membership_epoch=epochs["membershipEpoch"],
                    coordinator_epoch=1,
                    issued_at=format_utc(runtime.clock()),
                )
                error = await refused(runtime.link.command(stale))
                if error.code is ErrorCode.AUTH_STALE_SESSION:
                    return False  # the Registry's notice of A's new Session is on its way
                assert error.code is ErrorCode.AUTH_STALE_COORDINATOR
                return True

            await eventually(fenced_by_its_coordinator_epoch, timeout=30, interval=0.5)

    (took,) = [line for line in b_lines if "took over" in line]
    assert f"from Context Package {latest['contextPackageId']}" in took, b_lines
    assert "Coordinator Epoch 2" in took


async def test_a_replacement_coordinator_continues_a_plan_its_predecessor_never_authorized(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    organization, owner, writer = await with_a_writer(mwp_client, tmp_path)

    a = planner(organization.organization_id, writer.agent_id)
    b = replacement(organization.organization_id, writer.agent_id)
    for agent in (writer, a.agent, b.agent):
        await ensure_registered(organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    a_lines: list[str] = []
    b_lines: list[str] = []
    async with (
        agent_gateway(mwp_client, organization, tmp_path / "tls") as (_, settings),
        gateway_runtime(writer, settings, address_of(mwp_client), tmp_path / "ledger"),
    ):
        # A stops as soon as the package carrying its plan is in the Group: the round that
        # would authorize the plan never starts.
        stop = asyncio.Event()

        def a_report(line: str) -> None:
            a_lines.append(line)
            if "planned WorkItems before they are authorized" in line:
                stop.set()

        ready = asyncio.Event()
        a_run = asyncio.create_task(
            run_coordinator_worker(
                a,
                settings,
                tmp_path / "a",
                stop,
                address=stack_address(),
                namespace=AGENTS_NAMESPACE,
                report=a_report,
                on_ready=lambda _: ready.set(),
            )
        )
        try:
            async with asyncio.timeout(30):
                await ready.wait()
            mission, _ = await MissionClient(mwp_client, organization.organization_id).create(
                owner,
                objective="Ship the pagination change",
                coordinator_agent_id=a.agent_id,
                definition_of_done=definition_of_done("The change is implemented and tested."),
                budget=mission_budget(),
                deadline=in_seconds(7 * 86400),
            )
            async with asyncio.timeout(90):
                await a_run
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await a_run
        ids = [work_item_id(mission.group_id, k) for k in KEYS]
        events = await mission.events_this_run()
        assert not [e for e in events if e["kind"] == "work.authorized"], a_lines
        (latest,) = mission_wide(events)
        assert [r.work_item_id for r in remaining_plan(latest)] == ids

        async with coordinating(b, settings, tmp_path / "b", b_lines):
            await appoint_and_finish(mission, owner, b.agent_id, latest["contextPackageId"])
        view = await mission.view()
        assert {w["workItemId"]: w["state"] for w in view["workItems"]} == dict.fromkeys(
            ids, "verified"
        )
        events = await mission.events_this_run()
        authorized = [e for e in events if e["kind"] == "work.authorized"]
        assert [e["workItemId"] for e in authorized] == ids  # each once, by B, as A planned
        assert {e["actor"]["id"] for e in authorized} == {b.agent_id}
        assert len(view["submission"]["artifactHashes"]) == 3

    (took,) = [line for line in b_lines if "took over" in line]
    assert "adopted 3 WorkItems (3 planned)" in took, b_lines


async def appoint_and_finish(
    mission: MissionHandle, owner: Identity, agent_id: str, context_package_id: str
) -> None:
    """The MissionOwner appoints ``agent_id`` with the package (its runtime runs first: the
    appointment binds the Session its HELLO opened), then the Mission reaches Approval."""

    async def appointed() -> bool:
        try:
            await mission.send(
                owner,
                "mission.assign_coordinator",
                {"agentId": agent_id, "contextPackageId": context_package_id},
            )
        except RemoteMwpError as error:
            if "no open Session" not in str(error.message):
                raise
            return False  # the Registry's notice of the new Session is on its way
        return True

    await eventually(appointed, timeout=30, interval=0.5)

    async def awaiting_approval() -> bool:
        return bool((await mission.view())["state"] == "awaiting_approval")

    await eventually(awaiting_approval, timeout=120)
