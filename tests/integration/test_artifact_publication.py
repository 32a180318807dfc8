"""``artifact.publish`` on the Temporal path: the Authority verifies the producer's manifest
signature against the Registry before the core decides, and a submission names only
published Artifacts."""

from __future__ import annotations

from typing import Any

from mwp.client import MwpClient, utc_now
from mwp.core.errors import ErrorCode
from mwp.dev.scenario import result_manifest
from tests.integration.missions_helper import (
    MissionRig,
    WorkItemRef,
    admit_workers,
    event_of,
    new_mission,
)


async def _active_item(rig: MissionRig) -> tuple[WorkItemRef, int, str]:
    await admit_workers(rig)
    item = await rig.authorize()
    worker = rig.crew.workers[0]
    offer = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)
    return item, epoch, lease["leaseId"]


def _manifest(rig: MissionRig, item: WorkItemRef) -> dict[str, Any]:
    return result_manifest(
        rig.crew.workers[0],
        mission_id=rig.mission.mission_id,
        group_id=rig.mission.group_id,
        work_item_id=item.work_item_id,
        text=item.contract["goal"],
        created_at=utc_now(),
    )


async def test_a_signed_manifest_is_published_and_a_forged_one_is_refused(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    item, epoch, lease = await _active_item(rig)
    worker, other = rig.crew.workers

    def publish(manifest: dict[str, Any], signer: Any = worker) -> Any:
        payload = {"ownershipEpoch": epoch, "leaseId": lease, "manifest": manifest}
        return rig.send(signer, "artifact.publish", payload, work_item_id=item.work_item_id)

    # Changed after signing: the signature no longer covers it.
    tampered = {**_manifest(rig, item), "sizeBytes": 1}
    await rig.assert_refused(lambda: publish(tampered), ErrorCode.AUTH_INVALID_SIGNATURE)
    # Signed with another agent's key while naming the Worker as producer.
    forged = result_manifest(
        other,
        mission_id=rig.mission.mission_id,
        group_id=rig.mission.group_id,
        work_item_id=item.work_item_id,
        text=item.contract["goal"],
        created_at=utc_now(),
    )
    forged["producer"] = {**forged["producer"], "agentId": worker.principal.id}
    refused = await rig.assert_refused(lambda: publish(forged), ErrorCode.AUTH_INVALID_SIGNATURE)
    assert refused.code == ErrorCode.AUTH_INVALID_SIGNATURE
    # Submitting an unpublished Artifact is refused too.
    await rig.assert_refused(
        lambda: rig.send(
            worker,
            "work.submit",
            rig.submission(item, epoch, lease),
            work_item_id=item.work_item_id,
        ),
        ErrorCode.INVALID_COMMAND,
    )

    manifest = _manifest(rig, item)
    published = event_of(await publish(manifest), "artifact.published")
    assert published["payload"]["manifest"] == manifest
    listed = (await rig.mission.view())["artifacts"]
    assert [a["contentHash"] for a in listed] == [manifest["contentHash"]]
    submitted = await rig.send(
        worker, "work.submit", rig.submission(item, epoch, lease), work_item_id=item.work_item_id
    )
    assert event_of(submitted, "work.submitted")
