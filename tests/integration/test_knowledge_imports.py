"""Knowledge reuse through the gateway's Knowledge Reuse Policy (spec 13.3; MWP-WRK-028), on the
real dev server and gateway: a Coordinator's declared ``reuse`` names Artifacts of other
Missions; its runtime asks the gateway for each approval and imports what the policy allows,
once, signed by the policy service's own registered key. What the policy refuses records
nothing; only the target Group's current Coordinator is answered; and a source Group or
Artifact that does not exist gets the very answer a refused one gets."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mwp.agent import CardInfo
from mwp.agent.gateway_link import GatewaySettings
from mwp.client import Identity, MwpClient
from mwp.client.missions import MissionClient, in_seconds
from mwp.contracts.messages import knowledge_reuse_service
from mwp.coordinator import (
    Coordinator,
    KnowledgeSource,
    Plan,
    PlannedItem,
    PlanningContext,
    ReuseContext,
)
from mwp.core.group.knowledge import IMPORTED_KIND
from mwp.core.trust.registry import Principal
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.dev.scenario import definition_of_done, mission_budget
from mwp.gateway.client import GatewayClient
from mwp.gateway.https import Response, request
from mwp.gateway.knowledge_imports import knowledge_imports_path
from mwp.gateway.server import Gateway
from mwp.gateway.tls import development_certificates
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import open_store
from mwp.workers.agent import ensure_registered
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, eventually, new_crew
from tests.integration.missions_helper import new_mission as mission_of
from tests.integration.test_coordinator_runtime import coordinating
from tests.integration.test_gateway import running_gateway
from tests.integration.test_gateway_artifacts import OPTIONS, REFUSAL, masked, sha256
from tests.integration.test_knowledge_reuse_gateway import _published

UNKNOWN_GROUP = "urn:uuid:00000000-0000-4000-8000-00000000dead"


@dataclasses.dataclass
class Served:
    gateway: Gateway
    settings: GatewaySettings
    context: Any

    async def ask(self, token: str, group_id: str, source: str, digest: str) -> Response:
        port = int(str(self.settings.artifacts_url).rsplit(":", 1)[1])
        return await request(
            "127.0.0.1",
            port,
            self.context,
            "POST",
            knowledge_imports_path(group_id),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            body=canonicalize({"sourceGroupId": source, "contentHash": digest}),
            max_body=1024 * 1024,
        )


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=1, spares=1)


@pytest.fixture
async def served(mwp_client: MwpClient, crew: Crew, tmp_path: Path) -> AsyncIterator[Served]:
    options = dataclasses.replace(OPTIONS, reuse_policy=tmp_path / "knowledge-reuse.json")
    folder = tmp_path / "tls"
    async with running_gateway(
        mwp_client, crew.organization, folder, options=options, artifact_port=0
    ) as running:
        address = running.gateway.artifact_address
        assert address is not None
        settings = GatewaySettings(
            running.uri,
            development_certificates(folder).ca_cert,
            artifacts_url=f"https://127.0.0.1:{address[1]}",
        )
        yield Served(running.gateway, settings, running.context)


def reusing(crew: Crew, sources: list[KnowledgeSource]) -> Coordinator:
    """A Coordinator whose ``reuse`` names ``sources`` and whose one planned item is offered
    to nobody (the Mission stays active while the imports are decided)."""
    agent_id = f"urn:mwp:agent:reuser-{crew.owner.principal.id[-8:]}"
    coordinator = Coordinator(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo(crew.organization.organization_id, crew.owner.principal, "Reuser"),
    )

    @coordinator.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return Plan([PlannedItem("hotfix", "Apply the reused fix")])

    @coordinator.reuse
    async def reuse(ctx: ReuseContext) -> list[KnowledgeSource]:
        return sources

    return coordinator


async def test_the_coordinator_imports_once_what_the_policy_approves_and_nothing_else(
    mwp_client: MwpClient, served: Served, crew: Crew, tmp_path: Path
) -> None:
    store = ArtifactStore(open_store(stack_log_location()))
    worker, stranger = crew.workers[0], crew.spares[0]
    allowed = await mission_of(mwp_client, crew)
    fix = await _published(allowed, worker, store)
    elsewhere = await mission_of(mwp_client, crew)
    kept = await _published(elsewhere, worker, store)
    rule = {
        "name": "fixes",
        "sourceMissions": [allowed.mission.mission_id],
        "targetMissions": "*",
        "ceiling": "internal",
        "validSeconds": 600,
    }
    (tmp_path / "knowledge-reuse.json").write_text(json.dumps({"rules": [rule]}))
    approved = KnowledgeSource(allowed.mission.group_id, fix["contentHash"])
    refused = KnowledgeSource(elsewhere.mission.group_id, kept["contentHash"])
    unknown = KnowledgeSource(UNKNOWN_GROUP, sha256(b"published nowhere"))
    coordinator = reusing(crew, [approved, refused, unknown])
    await ensure_registered(crew.organization.registry, coordinator.agent)
    lines: list[str] = []
    async with coordinating(coordinator, served.settings, tmp_path / "coordinator", lines):
        target, _ = await MissionClient(mwp_client, crew.organization.organization_id).create(
            crew.owner,
            objective="Hotfix the parser",
            coordinator_agent_id=coordinator.agent_id,
            definition_of_done=definition_of_done("The parser is fixed."),
            budget=mission_budget(),
            deadline=in_seconds(86400),
        )

        async def imported() -> list[dict[str, Any]]:
            events = await target.events_this_run()
            return [e for e in events if e["kind"] == IMPORTED_KIND]

        async def any_imported() -> bool:
            return bool(await imported())

        await eventually(any_imported, timeout=60)

        async def both_refusals_said() -> bool:
            return sum("ImportKnowledge refused: AUTH_FORBIDDEN" in line for line in lines) >= 2

        await eventually(both_refusals_said, timeout=30)
        (event,) = await imported()  # once, and only the approved one
    payload = event["payload"]
    assert event["actor"]["id"] == coordinator.agent_id
    assert payload["contentHash"] == fix["contentHash"] and payload["manifest"] == fix
    assert payload["sourceGroupId"] == allowed.mission.group_id
    organization = crew.organization.organization_id
    assert payload["approval"]["approvedBy"] == knowledge_reuse_service(organization).to_json()
    assert payload["approval"]["targetGroupId"] == target.group_id
    assert served.gateway.knowledge_imports.approved == 1
    held = {a["contentHash"] for a in (await target.view())["artifacts"]}
    assert fix["contentHash"] in held and kept["contentHash"] not in held

    # Asked directly: nobody but the Coordinator is answered; for the Coordinator, a refused
    # source and one that does not exist get one answer; asking records nothing.
    before = await target.sequence()
    async with (
        GatewayClient.connect(served.settings.url, served.context) as mine,
        GatewayClient.connect(served.settings.url, served.context) as other,
    ):
        await mine.hello(coordinator.identity)
        await other.hello(stranger)
        assert mine.session_token is not None and other.session_token is not None
        group = target.group_id
        answers = {}
        for name, source in {"refused": refused, "unknown": unknown}.items():
            started = time.monotonic()
            response = await served.ask(
                mine.session_token, group, source.group_id, source.content_hash
            )
            assert time.monotonic() - started >= REFUSAL
            answers[name] = masked(response)
        unknown_artifact = masked(
            await served.ask(mine.session_token, group, approved.group_id, unknown.content_hash)
        )
        assert answers["refused"] == answers["unknown"] == unknown_artifact
        status, error = answers["refused"]
        assert status == 403 and error["code"] == "AUTH_FORBIDDEN"
        assert error["message"] == "No reuse of this Artifact is approved for this Group."
        assert kept["contentHash"] not in json.dumps(error)
        as_stranger = await served.ask(
            other.session_token, group, approved.group_id, approved.content_hash
        )
        wrong = parse_bytes(as_stranger.body)
        assert as_stranger.status == 403 and wrong["code"] == "AUTH_FORBIDDEN"
        assert "current Coordinator" in wrong["message"]
        assert "manifest" not in wrong
        again = await served.ask(
            mine.session_token, group, approved.group_id, approved.content_hash
        )
        assert again.status == 200 and parse_bytes(again.body)["manifest"] == fix
    assert await target.sequence() == before
