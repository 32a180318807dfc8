"""The Registry's performance records through a real gateway (MWP-IDN-004): a Worker's failures
in Mission A are counted in the record a Coordinator of Mission B reads, without citing A's
Events to it (it is no member of A); Mission B's offer leaves that Worker out and says it rests
on the Registry's records; only the Organization's Coordinators may read them."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from mwp.agent import Agent, CapabilityContext, CapabilityFailure, Submission
from mwp.agent.gateway_link import GatewayLink, GatewaySettings
from mwp.cli import main
from mwp.client import Identity, MwpClient
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.contracts.errors import RemoteMwpError
from mwp.coordinator import Coordinator, Plan, PlannedItem, PlanningContext
from mwp.coordinator.performance import REGISTRY_RULE
from mwp.coordinator.runtime import CoordinatorRuntime
from mwp.core.errors import ErrorCode
from mwp.core.organization.performance import OUTCOMES, PerformanceRecord
from mwp.core.wire.strict_json import parse_bytes
from mwp.dev.scenario import definition_of_done, mission_budget
from mwp.dev.stack import ensure_namespace
from mwp.gateway.https import request
from mwp.gateway.performance import performance_path
from mwp.gateway.tls import client_context
from mwp.workers.agent import ensure_registered
from tests.integration.conftest import Organization, new_organization, stack_log_location
from tests.integration.gateway_agents import (
    AGENTS_NAMESPACE,
    address_of,
    agent_gateway,
    covering_submission,
    gateway_runtime,
    sample_agent,
)
from tests.integration.missions_helper import eventually
from tests.integration.test_coordinator_runtime import coordinating

GENERAL = "mwp.dev.general@1.0.0"


def planner(organization_id: str, name: str, keys: list[str], workers: list[str]) -> Coordinator:
    agent = sample_agent(organization_id, name)
    coordinator = Coordinator(agent.agent_id, agent.identity, card=agent.card_info, workers=workers)

    @coordinator.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return Plan([PlannedItem(key, f"Write the {key} notes") for key in keys])

    return coordinator


async def mission_of(
    client: MwpClient, organization: Organization, owner: Identity, coordinator: Coordinator
) -> MissionHandle:
    mission, _ = await MissionClient(client, organization.organization_id).create(
        owner,
        objective="Write the notes",
        coordinator_agent_id=coordinator.agent_id,
        definition_of_done=definition_of_done("The notes are written."),
        budget=mission_budget(),
        deadline=in_seconds(7 * 86400),
    )
    return mission


async def events_of(mission: MissionHandle, kind: str) -> list[dict[str, Any]]:
    return [e for e in await mission.events_this_run() if e["kind"] == kind]


@contextlib.asynccontextmanager
async def linked(settings: GatewaySettings, agent: Agent) -> AsyncIterator[GatewayLink]:
    async with GatewayLink.open(settings, agent) as link:
        yield link


async def test_a_failure_in_one_mission_orders_the_offers_of_another_without_leaking_its_events(
    mwp_client: MwpClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    organization = await new_organization(mwp_client)
    owner = organization.identity("human", f"owner-{tmp_path.name[-8:]}")
    await organization.registry.register_binding(owner)
    flaky = sample_agent(organization.organization_id, "Flaky")
    steady = sample_agent(organization.organization_id, "Steady")
    bystander = sample_agent(organization.organization_id, "Bystander")

    @flaky.capability("mwp.dev.general", "1.0.0")
    async def fail(ctx: CapabilityContext) -> Submission:
        raise CapabilityFailure("the notes tool is down", code="NOTES_TOOL_DOWN")

    @steady.capability("mwp.dev.general", "1.0.0")
    async def write(ctx: CapabilityContext) -> Submission:
        return await covering_submission(ctx, f"done: {ctx.contract['goal']}".encode())

    @bystander.capability("mwp.dev.general", "1.0.0")
    async def idle(ctx: CapabilityContext) -> Submission:
        raise CapabilityFailure("never offered anything")

    lead_a = planner(organization.organization_id, "LeadA", ["one", "two"], [flaky.agent_id])
    lead_b = planner(
        organization.organization_id, "LeadB", ["three"], [flaky.agent_id, steady.agent_id]
    )
    for agent in (flaky, steady, bystander, lead_a.agent, lead_b.agent):
        await ensure_registered(organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    address = address_of(mwp_client)
    lines: list[str] = []

    async with (
        agent_gateway(mwp_client, organization, tmp_path / "tls") as (gateway, settings),
        gateway_runtime(flaky, settings, address, tmp_path / "flaky"),
    ):
        # Mission A: the flaky Worker fails both items.
        async with coordinating(lead_a, settings, tmp_path / "a", lines) as runtime_a:
            mission_a = await mission_of(mwp_client, organization, owner, lead_a)

            async def failed_twice() -> bool:
                failures = await events_of(mission_a, "work.failed")
                return len({e["workItemId"] for e in failures}) >= 2

            await eventually(failed_twice, timeout=90)
            failures = await events_of(mission_a, "work.failed")
            a_records = await runtime_a.link.performance_records(flaky.agent_id, GENERAL)
        (a_record,) = a_records
        assert a_record.counts["failed"] >= 2
        # A's Coordinator is a member of A: it is shown A's Events.
        assert set(a_record.cited["failed"]) <= {e["eventId"] for e in failures}
        assert len(a_record.cited["failed"]) == a_record.counts["failed"]

        # Mission B: another Coordinator, no member of A, with both Workers.
        async with (
            gateway_runtime(steady, settings, address, tmp_path / "steady"),
            coordinating(lead_b, settings, tmp_path / "b", lines) as runtime_b,
        ):
            mission_b = await mission_of(mwp_client, organization, owner, lead_b)

            async def offered() -> bool:
                return bool(await events_of(mission_b, "work.offer.created"))

            await eventually(offered, timeout=60)
            await check_what_b_reads(runtime_b, flaky, steady, failures)
            (offer, *_) = await events_of(mission_b, "work.offer.created")

        await check_who_may_read(gateway.artifact_address, settings, bystander, flaky)

    # B's offer left the flaky Worker out on the Registry's records and says so; nothing of
    # A is cited in B's Group.
    offers = offer["payload"]["offers"]
    assert [o["agentId"] for o in offers] == [steady.agent_id]
    basis = offers[0]["selectionBasis"]
    assert REGISTRY_RULE in basis["policyRulesApplied"]
    assert not {e["eventId"] for e in failures} & set(basis["reliabilityEvidence"])
    assert runtime_b.registry_records is True

    # The authority zone's operator reads the whole record, every Event cited.
    argv = ["registry", "performance", flaky.agent_id, "--capability", GENERAL, "--json"]
    argv += ["--org", organization.organization_id, "--address", address]
    capsys.readouterr()
    assert await asyncio.to_thread(main, [*argv, "--store", stack_log_location()]) == 0
    (printed,) = json.loads(capsys.readouterr().out)["records"]
    failed = printed["outcomes"]["failed"]
    assert failed["count"] >= 2 and len(failed["eventIds"]) == failed["count"]
    assert {e["eventId"] for e in failures} <= set(failed["eventIds"])


async def check_what_b_reads(
    runtime_b: CoordinatorRuntime,
    flaky: Agent,
    steady: Agent,
    failures: list[dict[str, Any]],
) -> None:
    """B's Coordinator gets A's failures counted, none of A's Events cited; an unknown agent
    and one without a record get the same answer."""
    (record,) = await runtime_b.link.performance_records(flaky.agent_id, GENERAL)
    assert record.counts["failed"] >= 2
    assert record.cited["failed"] == ()
    assert not {i for ids in record.cited.values() for i in ids} & {e["eventId"] for e in failures}
    unknown = await runtime_b.link.performance_records("urn:mwp:agent:nobody", GENERAL)
    (fresh,) = await runtime_b.link.performance_records(steady.agent_id, "mwp.dev.other@1.0.0")
    assert unknown == [
        PerformanceRecord("urn:mwp:agent:nobody", GENERAL, fresh.counts, fresh.cited)
    ]
    assert fresh.counts == dict.fromkeys(OUTCOMES, 0)
    assert await runtime_b.link.performance_records("urn:mwp:agent:nobody") == []


async def check_who_may_read(
    address: tuple[str, int] | None, settings: GatewaySettings, bystander: Agent, flaky: Agent
) -> None:
    """An agent that coordinates nothing is refused, and so is a request without a token."""
    async with linked(settings, bystander) as link:
        try:
            await link.performance_records(flaky.agent_id, GENERAL)
        except RemoteMwpError as error:
            assert error.code == ErrorCode.AUTH_FORBIDDEN
        else:
            raise AssertionError("a non-Coordinator read a performance record")
    assert address is not None
    url = urlsplit(settings.artifacts())
    assert url.hostname is not None
    response = await request(
        url.hostname,
        address[1],
        client_context(settings.ca_file),
        "GET",
        performance_path(flaky.agent_id, GENERAL),
        max_body=64 * 1024,
    )
    assert response.status == 401
    assert parse_bytes(response.body)["code"] == ErrorCode.AUTH_REQUIRED.value
