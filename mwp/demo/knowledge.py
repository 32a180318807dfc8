"""Knowledge publication (spec 13.3): the small Mission's date-parser fix, reused by the hotfix.

Nothing of one Group enters another Mission by default. The fix crosses only as an approved
import: the Organization's policy (its authority service) signs a Knowledge Reuse Approval
naming that one Artifact, its classification and the receiving Group, and the hotfix Group's
Coordinator imports it with the source's signed manifest, unchanged. Asked without the
approval, or with one for another Group, the Group refuses and records nothing. Once imported,
the hotfix Group's members read it through their Group; through any other Group it stays the
unknown Artifact it was."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mwp.client import KeyStore, new_id
from mwp.client.knowledge import import_payload, reuse_approval
from mwp.client.missions import MissionHandle
from mwp.client.state_dir import organization_id_of
from mwp.contracts.messages import group_authority
from mwp.core.group.knowledge import IMPORT_KIND, IMPORTED_KIND
from mwp.demo import cast
from mwp.demo.groups import proof
from mwp.demo.isolation import answer_of
from mwp.demo.setup import ProofOfConcept
from mwp.gateway.client import GatewayClient
from mwp.gateway.tls import CA_CERT, DEVELOPMENT_FOLDER, client_context
from mwp.log.keys import AuthorityKeyring

Json = dict[str, Any]
CEILING = "internal"  # the hotfix Mission's clearance, as Organization policy sets it


@dataclass(frozen=True)
class Reused:
    """What the import proved, for the read-back at the end."""

    content_hash: str
    source: MissionHandle
    target: MissionHandle


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


async def import_fix(poc: ProofOfConcept, source: MissionHandle, target: MissionHandle) -> Reused:
    """The hotfix Group's Coordinator imports the small Mission's fix under the Organization's
    approval (signed with the Coordinator's own key and Session, as its operator's tool
    would); refused first without an approval and with one naming another Group."""
    check = poc.report.check
    manifest = await _fix_manifest(source)
    organization = organization_id_of(poc.state)
    policy = AuthorityKeyring.in_state_dir(poc.state).get(group_authority(organization).id)
    if policy is None:
        raise RuntimeError("the Organization's authority key is not in the demo's state folder")
    lead = KeyStore.in_state_dir(poc.state).load("agent-lead")
    sessions = await target.client.registry(organization).session_epochs()
    session = sessions[lead.principal.id]

    def approved_for(mission: MissionHandle) -> Json:
        return reuse_approval(
            policy,
            manifest,
            target_mission_id=mission.mission_id,
            target_group_id=mission.group_id,
            ceiling=CEILING,
        )

    async def send(payload: Json) -> Json:
        return await target.send(lead, IMPORT_KIND, payload, session_epoch=session)

    before = await target.sequence()
    unapproved = await _refusal(send({"manifest": manifest}))
    elsewhere = await _refusal(send(import_payload(manifest, approved_for(source))))
    # The hotfix's own work goes on meanwhile: "nothing recorded" is no import Event and the
    # fix not among the Group's Artifacts, not an unmoved sequence.
    recorded = [e for e in await target.events_this_run(before) if e["kind"] == IMPORTED_KIND]
    held = {a["contentHash"] for a in (await target.view())["artifacts"]}
    unchanged = not recorded and manifest["contentHash"] not in held
    check(
        "knowledge.requires_approval",
        unapproved == "APPROVAL_REQUIRED" and elsewhere == "INVALID_COMMAND" and unchanged,
        "the hotfix's Coordinator importing the small Mission's fix without the Organization's "
        "approval, or with an approval for another Group, is refused and records nothing",
        withoutApproval=unapproved,
        approvalForAnotherGroup=elsewhere,
        sequence=before,
    )
    approval = approved_for(target)
    answer = await send(import_payload(manifest, approval))
    imported = next((e for e in answer["events"] if e["kind"] == IMPORTED_KIND), None)
    listed = {a["contentHash"]: a for a in (await target.view())["artifacts"]}
    payload = (imported or {}).get("payload") or {}
    entry = listed.get(manifest["contentHash"]) or {}
    check(
        "knowledge.published_and_imported",
        imported is not None
        and imported["actor"]["id"] == lead.principal.id
        and payload.get("sourceGroupId") == source.group_id
        and payload.get("contentHash") == manifest["contentHash"]
        and payload.get("approvalId") == approval["approvalId"]
        and payload.get("approval", {}).get("approvedBy") == policy.principal.to_json()
        and (entry.get("importedFrom") or {}).get("groupId") == source.group_id,
        "the fix crossed as reusable knowledge: an Organization-approved, classified Artifact "
        "whose signed manifest carries its provenance, imported by the hotfix's Coordinator in "
        "an auditable Event and listed among the hotfix Group's Artifacts",
        event=proof([imported]),
        classification=manifest["classification"],
        ceiling=CEILING,
        provenance={k: manifest.get(k) for k in ("producer", "missionId", "groupId", "workItemId")},
        approvedBy=policy.principal.id,
    )
    return Reused(manifest["contentHash"], source, target)


async def prove_reuse(poc: ProofOfConcept, reused: Reused, other: MissionHandle) -> None:
    """Run once every Mission is approved: the tester's HELLO here opens a new Session of the
    tester, which ends its runtime's. The tester is a member of the hotfix Group and of
    ``other`` (the full Mission's), where the fix was never imported."""
    tester = KeyStore.in_state_dir(poc.state).load("agent-tester")
    digest = reused.content_hash
    unknown = "sha256:" + hashlib.sha256(new_id().encode()).hexdigest()
    context = client_context(poc.state / DEVELOPMENT_FOLDER / CA_CERT)
    async with GatewayClient.connect(poc.gateway_url, context) as client:
        await client.hello(tester)
        url = poc.artifacts_url
        served = await answer_of(client.artifact(url, reused.target.group_id, digest))
        elsewhere = await answer_of(client.artifact(url, other.group_id, digest))
        absent = await answer_of(client.artifact(url, other.group_id, unknown))
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
