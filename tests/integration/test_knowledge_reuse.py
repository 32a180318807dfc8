"""Reusable knowledge on Temporal (spec 13.3, MWP-WRK-028): an Artifact one Mission's Worker
published enters another Mission of the Organization only by the receiving Coordinator's
import, whose manifest and Organization policy approval the MissionWorkflow verifies against
the Registry evidence (forged or altered ones refused, changing nothing); the import's Event
names the source Group, the content hash, the approval and the actor."""

from __future__ import annotations

from typing import Any

from mwp.client import MwpClient
from mwp.client.identity import Identity
from mwp.client.knowledge import import_payload, reuse_approval
from mwp.core.errors import ErrorCode
from mwp.core.group.knowledge import IMPORT_KIND, IMPORTED_KIND, sign_reuse_approval
from tests.integration.missions_helper import MissionRig, event_of, new_mission
from tests.integration.test_group_archive import authority_identity


async def _published_manifest(rig: MissionRig) -> dict[str, Any]:
    worker = rig.crew.workers[0]
    item = await rig.authorize("Write the design notes")
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)
    published = await rig.publish(worker, item, epoch, lease["leaseId"])
    manifest: dict[str, Any] = event_of(published, "artifact.published")["payload"]["manifest"]
    return manifest


def _approval(signer: Identity, manifest: dict[str, Any], target: MissionRig) -> dict[str, Any]:
    return reuse_approval(
        signer,
        manifest,
        target_mission_id=target.mission.mission_id,
        target_group_id=target.mission.group_id,
    )


async def test_an_artifact_crosses_groups_only_as_a_verified_approved_import(
    mwp_client: MwpClient,
) -> None:
    source = await new_mission(mwp_client, workers=1)
    manifest = await _published_manifest(source)
    target = await new_mission(mwp_client, crew=source.crew)
    assert target.mission.group_id != source.mission.group_id
    policy = authority_identity(target)  # an Organization service key of the Registry

    # No approval; an approval signed by a Worker's key in policy's name; a manifest altered
    # after its producer signed it (the approval names the altered one): each refused.
    await target.assert_refused(
        lambda: target.coordinate(IMPORT_KIND, {"manifest": manifest}),
        ErrorCode.APPROVAL_REQUIRED,
    )
    worker = source.crew.workers[0]
    forged = {k: v for k, v in _approval(policy, manifest, target).items() if k != "signature"}
    forged = sign_reuse_approval(forged, worker.key_id, worker.key)
    await target.assert_refused(
        lambda: target.coordinate(IMPORT_KIND, import_payload(manifest, forged)),
        ErrorCode.AUTH_INVALID_SIGNATURE,
    )
    altered = {**manifest, "uri": "https://elsewhere.example/notes"}
    await target.assert_refused(
        lambda: target.coordinate(
            IMPORT_KIND, import_payload(altered, _approval(policy, altered, target))
        ),
        ErrorCode.AUTH_INVALID_SIGNATURE,
    )

    approval = _approval(policy, manifest, target)
    result = await target.coordinate(IMPORT_KIND, import_payload(manifest, approval))
    event = event_of(result, IMPORTED_KIND)
    assert event["actor"] == source.crew.coordinator.principal.to_json()
    assert event["payload"]["sourceGroupId"] == source.mission.group_id
    assert event["payload"]["contentHash"] == manifest["contentHash"]
    assert event["payload"]["approval"] == approval
    held = {a["contentHash"]: a for a in (await target.mission.view())["artifacts"]}
    assert held[manifest["contentHash"]]["importedFrom"]["approvalId"] == approval["approvalId"]
    # The source Group is unchanged by the import: nothing flows back.
    assert IMPORTED_KIND not in {e["kind"] for e in source.log}
