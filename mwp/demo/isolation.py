"""Context isolation between Groups, seen from outside them: an agent of the Organization that
is a member of no Group connects to the gateway as itself and asks for a Group's Artifacts and
for its Events. It learns nothing, and cannot tell the Group from one that does not exist."""

from __future__ import annotations

from typing import Any

from mwp.client import KeyStore, new_id
from mwp.client.missions import MissionHandle
from mwp.contracts.errors import RemoteMwpError
from mwp.demo import cast
from mwp.demo.setup import ProofOfConcept
from mwp.gateway.client import GatewayClient
from mwp.gateway.tls import CA_CERT, DEVELOPMENT_FOLDER, client_context

Json = dict[str, Any]


async def _answer(ask: Any) -> tuple[str, str]:
    try:
        await ask
    except RemoteMwpError as error:
        return error.code.value, error.message
    return "served", ""


async def prove_isolation(poc: ProofOfConcept, mission: MissionHandle) -> None:
    outsider = KeyStore.in_state_dir(poc.state).load(f"agent-{cast.OUTSIDER}")
    artifact = next(a["contentHash"] for a in (await mission.view())["artifacts"])
    package = next(
        e["payload"]["contextPackage"]["contextPackageId"]
        for e in await mission.events_this_run()
        if e["kind"].endswith("context_package_published")
    )
    nowhere = new_id()
    context = client_context(poc.state / DEVELOPMENT_FOLDER / CA_CERT)
    async with GatewayClient.connect(poc.gateway_url, context) as client:
        await client.hello(outsider)
        url = poc.artifacts_url
        artifacts = [
            await _answer(client.artifact(url, group, artifact))
            for group in (mission.group_id, nowhere)
        ]
        events = [
            await _answer(client.cited_events(url, group, package))
            for group in (mission.group_id, nowhere)
        ]
    poc.report.check(
        "isolation.artifacts",
        artifacts[0] == artifacts[1] and artifacts[0][0] == "GROUP_NOT_FOUND",
        "an agent outside the Group asking the gateway for one of its Artifacts gets the "
        "answer a Group that does not exist gets",
        answers=[a[0] for a in artifacts],
        agent=outsider.principal.id,
    )
    poc.report.check(
        "isolation.context",
        events[0] == events[1] and events[0][0] == "GROUP_NOT_FOUND",
        "asking for the Events a Context Package of the Group cites, it gets the same "
        "refusal as for a Group that does not exist",
        answers=[e[0] for e in events],
    )
