"""A settled WorkItem leaves the Mission's carried state on the real dev server: after a
continue-as-new the Mission answers for it from its short record, decisions still read that
record, and the client gets the full final view from the item's WorkItemWorkflow result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mwp.client import MwpClient
from mwp.contracts.work_item import work_item_workflow_id
from mwp.core.errors import ErrorCode
from mwp.core.group import WORK_ITEM_VIEW_EXTRAS, schema_part
from mwp.core.models import validate_document
from tests.integration.missions_helper import admit_workers, eventually, new_mission

FIXED = ("workItemId", "state", "revision", "contract", "selectionBasis", "submissionEvidence")


async def test_a_settled_item_is_read_from_its_workflow_after_a_rollover(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, updates_per_run=6)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    done = await rig.authorize("Write the summary")
    await rig.complete(done, worker)
    seen_in_its_run = await rig.mission.work_item(done.work_item_id)
    run = await rig.client.query(rig.workflow_id, "run_number")

    async def rolled_over() -> bool:
        await rig.post(rig.crew.coordinator, "still here")
        return bool(await rig.client.query(rig.workflow_id, "run_number") > run)

    await eventually(rolled_over, timeout=60)

    # The Mission keeps a record, and says where the full view is.
    record = await rig.client.query(rig.workflow_id, "work_item", done.work_item_id)
    child_id = work_item_workflow_id(rig.mission.mission_id, done.work_item_id)
    assert record["state"] == "verified" and "contract" not in record
    assert record["finalView"] == {"workflowId": child_id}
    assert record["artifactHashes"] == seen_in_its_run["submission"]["artifactHashes"]
    # The client reads the full view from the item's WorkItemWorkflow.
    final = await rig.mission.work_item(done.work_item_id)
    assert {k: final[k] for k in FIXED} == {k: seen_in_its_run[k] for k in FIXED}
    assert final["contract"] == done.contract
    validate_document("work-item.schema.json", schema_part(final, WORK_ITEM_VIEW_EXTRAS))
    assert await rig.client.workflow_result(child_id) == final
    with pytest.raises(Exception, match="never-authorized"):
        await rig.client.query(rig.workflow_id, "work_item", "urn:example:never-authorized")

    # Decisions read the record: no Command moves the item; its dependants may start.
    await rig.assert_refused(
        lambda: rig.coordinate("work.cancel", {"reason": "late"}, work_item_id=done.work_item_id),
        ErrorCode.INVALID_STATE_TRANSITION,
    )
    after = await rig.authorize("Publish the summary", dependencies=[done.work_item_id])
    offers = await rig.offer(after, worker)
    epoch = await rig.accept(worker, after, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, after, epoch)
    assert lease["leaseId"]
    listed = {w["workItemId"]: w for w in (await rig.mission.view())["workItems"]}
    assert listed[done.work_item_id]["state"] == "verified"
    assert listed[after.work_item_id]["state"] == "active"


async def test_an_event_that_moves_only_the_revision_is_not_sent_to_the_child(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    item = await rig.authorize("Draft the notes")
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)
    child_id = work_item_workflow_id(rig.mission.mission_id, item.work_item_id)
    started = (await rig.mission.work_item(item.work_item_id))["revision"]

    async def child_revision() -> int:
        summary = await rig.client.query(child_id, "work_item")
        return int(summary["revision"])

    await eventually(lambda: _equals(child_revision(), started), timeout=30)
    published = await rig.publish(worker, item, epoch, lease["leaseId"])
    assert published["events"][0]["aggregateRevision"] == started + 1
    for _ in range(20):  # a signal, were one sent, lands within milliseconds
        assert await child_revision() == started  # state, epoch, timers, attributes unchanged
        await asyncio.sleep(0.1)
    await rig.send(
        worker,
        "work.submit",
        rig.submission(item, epoch, lease["leaseId"]),
        work_item_id=item.work_item_id,
    )
    await eventually(lambda: _equals(child_revision(), started + 2), timeout=30)


async def _equals(value: Any, expected: int) -> bool:
    return bool(await value == expected)
