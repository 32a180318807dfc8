"""Knowledge publication (spec 13.3): the small Mission's date-parser fix, reused by the hotfix.

Nothing of one Group enters another Mission by default. The fix crosses only as an approved
import: the Organization's operators write a Knowledge Reuse Policy (the small Mission's work
may go to the Organization's other Missions, up to ``internal``); the lead Coordinator's
``reuse`` function names the fix for the hotfix Mission, and its runtime asks the gateway's
policy service for the approval (signed with that service's own registered key, for that one
Artifact and the hotfix Group) and sends the import with the source's signed manifest,
unchanged. Sent without the approval, or with the hotfix's approval into another Group, the
Group refuses and records nothing. Once imported, the hotfix Group's members read it through
their Group; through any other Group it stays the unknown Artifact it was."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mwp.client import KeyStore, new_id
from mwp.client.knowledge import import_payload
from mwp.client.missions import MissionHandle
from mwp.client.state_dir import organization_id_of
from mwp.contracts.messages import knowledge_reuse_service
from mwp.core.group.knowledge import IMPORT_KIND, IMPORTED_KIND
from mwp.demo import cast
from mwp.demo.groups import proof
from mwp.demo.isolation import answer_of
from mwp.demo.setup import ProofOfConcept, until
from mwp.gateway.client import GatewayClient
from mwp.gateway.knowledge_imports import POLICY_FILE
from mwp.gateway.tls import CA_CERT, DEVELOPMENT_FOLDER, client_context

Json = dict[str, Any]
CEILING = "internal"  # the hotfix Mission's clearance, as Organization policy sets it


@dataclass(frozen=True)
class Reused:
    """What the import proved, for the read-back at the end."""

    content_hash: str
    source: MissionHandle
    target: MissionHandle
    manifest: Json
    approval: Json


def allow_reuse(poc: ProofOfConcept, source: MissionHandle) -> None:
    """The operators' Knowledge Reuse Policy in the state folder, where the gateway reads it:
    the small Mission's Artifacts may go to any other Mission of the Organization."""
    rule = {
        "name": "small-mission-fixes",
        "sourceMissions": [source.mission_id],
        "targetMissions": "*",
        "maxClassification": CEILING,
        "ceiling": CEILING,
        "validSeconds": 3600,
    }
    (poc.state / POLICY_FILE).write_text(json.dumps({"rules": [rule]}, indent=1), "utf-8")


async def _fix_manifest(source: MissionHandle) -> Json:
    """The signed manifest the implementation's owner published in ``source``."""
    events = await source.events_this_run()
    implemented = next(
        e["workItemId"]
        for e in events
        if e["kind"] == "work.authorized"
        and e["payload"]["workItem"]["contract"]["goal"].startswith("Implement")
    )
    manifest: Json = next(
        e["payload"]["manifest"]
        for e in events
        if e["kind"] == "artifact.published" and e.get("workItemId") == implemented
    )
    return manifest


async def _refusal(send: Any) -> str:
    code, _ = await answer_of(send)
    return code


async def _import_event(mission: MissionHandle) -> Json | None:
    return next((e for e in await mission.events_this_run() if e["kind"] == IMPORTED_KIND), None)


async def import_fix(poc: ProofOfConcept, source: MissionHandle, target: MissionHandle) -> Reused:
    """The hotfix Group's Coordinator runtime imports the small Mission's fix under the
    Organization's approval."""
    check = poc.report.check
    manifest = await _fix_manifest(source)
    organization = organization_id_of(poc.state)
    imported: Json = await until(
        "the hotfix's Coordinator to import the small Mission's fix",
        lambda: _import_event(target),
    )
    payload = imported.get("payload") or {}
    approval: Json = payload.get("approval") or {}
    listed = {a["contentHash"]: a for a in (await target.view())["artifacts"]}
    entry = listed.get(manifest["contentHash"]) or {}
    lead = KeyStore.in_state_dir(poc.state).load("agent-lead")
    policy = knowledge_reuse_service(organization)
    check(
        "knowledge.published_and_imported",
        imported["actor"]["id"] == lead.principal.id
        and payload.get("sourceGroupId") == source.group_id
        and payload.get("contentHash") == manifest["contentHash"]
        and payload.get("manifest") == manifest
        and approval.get("approvedBy") == policy.to_json()
        and approval.get("targetGroupId") == target.group_id
        and (entry.get("importedFrom") or {}).get("groupId") == source.group_id,
        "the fix crossed as reusable knowledge: the lead Coordinator's runtime asked the "
        "gateway's Knowledge Reuse Policy, which approved that one classified Artifact for the "
        "hotfix Group, and imported it with its signed, provenance-bearing manifest in an "
        "auditable Event; it is listed among the hotfix Group's Artifacts",
        event=proof([imported]),
        classification=manifest["classification"],
        ceiling=CEILING,
        provenance={k: manifest.get(k) for k in ("producer", "missionId", "groupId", "workItemId")},
        approvedBy=policy.id,
    )
    return Reused(manifest["contentHash"], source, target, manifest, approval)


async def refuse_unapproved(poc: ProofOfConcept, reused: Reused, other: MissionHandle) -> None:
    """The same import sent into ``other`` (the full Mission's Group) without an approval,
    or with the one given for the hotfix, is refused and records nothing (beside the rest:
    only its own Commands are asked about)."""
    manifest, approval = reused.manifest, reused.approval
    lead = KeyStore.in_state_dir(poc.state).load("agent-lead")
    sessions = await other.client.registry(organization_id_of(poc.state)).session_epochs()
    session = sessions[lead.principal.id]

    async def send(payload: Json) -> Json:
        return await other.send(lead, IMPORT_KIND, payload, session_epoch=session)

    before = await other.sequence()
    unapproved = await _refusal(send({"manifest": manifest}))
    elsewhere = await _refusal(send(import_payload(manifest, approval)))
    # The full Mission's own work goes on meanwhile: "nothing recorded" is no import Event and
    # the fix not among the Group's Artifacts, not an unmoved sequence.
    recorded = [e for e in await other.events_this_run(before) if e["kind"] == IMPORTED_KIND]
    held = {a["contentHash"] for a in (await other.view())["artifacts"]}
    unchanged = not recorded and manifest["contentHash"] not in held
    poc.report.check(
        "knowledge.requires_approval",
        unapproved == "APPROVAL_REQUIRED" and elsewhere == "INVALID_COMMAND" and unchanged,
        "the lead Coordinator importing the small Mission's fix into the full Mission without "
        "the Organization's approval, or with the approval given for the hotfix Group, is "
        "refused and records nothing",
        withoutApproval=unapproved,
        approvalForAnotherGroup=elsewhere,
        sequence=before,
    )


async def prove_reuse(poc: ProofOfConcept, reused: Reused, other: MissionHandle) -> None:
    """Run once the tester's work is done: its HELLO here opens a new Session of the tester,
    which ends its runtime's. The tester is a member of the hotfix Group and of
    ``other`` (the full Mission's), where the fix was never imported."""
    tester = KeyStore.in_state_dir(poc.state).load("agent-tester")
    digest = reused.content_hash
    unknown = "sha256:" + hashlib.sha256(new_id().encode()).hexdigest()
    context = client_context(poc.state / DEVELOPMENT_FOLDER / CA_CERT)
    async with GatewayClient.connect(poc.gateway_url, context) as client:
        await client.hello(tester)
        url = poc.artifacts_url
        served, elsewhere, absent = await asyncio.gather(  # each on its own connection
            answer_of(client.artifact(url, reused.target.group_id, digest)),
            answer_of(client.artifact(url, other.group_id, digest)),
            answer_of(client.artifact(url, other.group_id, unknown)),
        )
    poc.report.check(
        "knowledge.readable_where_imported",
        served[0] == "served",
        "the tester, a member of the hotfix Group, reads the imported fix through that Group, "
        "its bytes matching the content hash",
        answer=served[0],
        agent=tester.principal.id,
        group=reused.target.group_id,
        artifact=digest,
    )
    poc.report.check(
        "knowledge.not_by_default",
        elsewhere == absent and elsewhere[0] != "served",
        "through the full Mission's Group, where it was never imported, the same member gets "
        "the answer of an Artifact that does not exist",
        answers={"fix": elsewhere[0], "unknown": absent[0]},
        agent=cast.agent_id("tester"),
    )
