"""Context and credential isolation between Groups, at the gateway.

An agent of the Organization that is a member of no Group connects as itself and asks for a
Group's Artifacts and for its Events: it learns nothing, and cannot tell the Group from one
that does not exist. A Worker that is a member of two Groups (the analyst: the full Mission's
and the child Mission's) reads an Artifact through the Group that holds it, and its Session
gets nothing for the same content hash through its other Group (the answer of an unknown
Artifact) or through a Group it is not in (the answer of no Group), though one store holds
every Group's bytes: a Session's access is per Group, not per content hash."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from mwp.client import KeyStore, new_id
from mwp.client.missions import MissionHandle
from mwp.core.errors import MwpError
from mwp.demo import cast
from mwp.demo.setup import ProofOfConcept
from mwp.gateway.client import GatewayClient
from mwp.gateway.tls import CA_CERT, DEVELOPMENT_FOLDER, client_context

Json = dict[str, Any]


async def answer_of(ask: Any) -> tuple[str, str]:
    """What a request was answered: an MWP error's code and message, or ``served``."""
    try:
        await ask
    except MwpError as error:
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
        # Each refusal comes no sooner than the gateway's refusal delay: asked together.
        groups = (mission.group_id, nowhere)
        answers = await asyncio.gather(
            *(answer_of(client.artifact(url, group, artifact)) for group in groups),
            *(answer_of(client.cited_events(url, group, package)) for group in groups),
        )
        artifacts, events = answers[:2], answers[2:]
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


async def prove_credentials(
    poc: ProofOfConcept, child: MissionHandle, full: MissionHandle, small: MissionHandle
) -> None:
    """Run once the analyst is done: its HELLO here opens a new Session of the analyst, which
    ends its runtime's."""
    analyst = KeyStore.in_state_dir(poc.state).load("agent-analyst")
    notes = next(a["contentHash"] for a in (await child.view())["artifacts"])
    requirements = next(a["contentHash"] for a in (await full.view())["artifacts"])
    unknown = "sha256:" + hashlib.sha256(new_id().encode()).hexdigest()
    context = client_context(poc.state / DEVELOPMENT_FOLDER / CA_CERT)
    async with GatewayClient.connect(poc.gateway_url, context) as client:
        await client.hello(analyst)
        url = poc.artifacts_url
        # Both read through the Group that holds them (hash-checked by the client); the
        # refusals, each no sooner than the gateway's refusal delay, asked beside them.
        questions = {
            "otherGroup": (full.group_id, notes),
            "unknownArtifact": (full.group_id, unknown),
            "notMember": (small.group_id, notes),
            "noGroup": (new_id(), notes),
        }
        read = await asyncio.gather(
            client.artifact(url, child.group_id, notes),
            client.artifact(url, full.group_id, requirements),
        )
        answers = await asyncio.gather(
            *(answer_of(client.artifact(url, *asked)) for asked in questions.values())
        )
        asked = dict(zip(questions, answers, strict=True))
    poc.report.check(
        "isolation.credentials",
        all(read)
        and asked["otherGroup"] == asked["unknownArtifact"]
        and asked["otherGroup"][0] != "served"
        and asked["notMember"] == asked["noGroup"]
        and asked["notMember"][0] == "GROUP_NOT_FOUND",
        "the analyst, a member of two Groups, reads the release notes through the child's "
        "Group and the full Mission's Artifacts through that one; the release notes through "
        "the full Mission's Group get the answer of an unknown Artifact, through a Group it "
        "is not in the answer of no Group",
        answers={k: v[0] for k, v in asked.items()},
        agent=analyst.principal.id,
        artifact=notes,
    )
