"""What ``python -m tests.histories.record`` runs to make a Mission's histories (not collected by
``make test``): a Group through several continue-as-new runs holding WorkItems in every kind of
state, with an Execution Lease and an offer that lapse so their WorkItems' timers fire."""

from __future__ import annotations

from mwp.client import MwpClient
from mwp.client.missions import in_seconds
from tests.integration.missions_helper import admit_workers, eventually, new_mission


async def test_a_group_rolls_over_with_work_items_in_every_state(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client, updates_per_run=4)
    await admit_workers(rig)
    first, second = rig.crew.workers
    verified = await rig.authorize("Write the report")
    await rig.complete(verified, first)
    await rig.offer(await rig.authorize("Review the report"), second)  # stays offered
    active = await rig.authorize("Check the figures")
    offer = (await rig.offer(active, first))["offers"][0]
    epoch = await rig.accept(first, active, offer["offerId"])
    await rig.start(first, active, epoch)  # active under a lease that is renewed by nobody
    cancelled = await rig.authorize("Translate the report")
    await rig.coordinate(
        "work.cancel", {"reason": "not needed"}, work_item_id=cancelled.work_item_id
    )
    lapsing = await rig.authorize("Draw the charts")
    offer = (await rig.offer(lapsing, second, expires_at=in_seconds(2)))["offers"][0]
    fenced = await rig.authorize("Index the sources")
    offer = (await rig.offer(fenced, first))["offers"][0]
    epoch = await rig.accept(first, fenced, offer["offerId"])
    await rig.start(first, fenced, epoch, lease_seconds=2)

    async def lease_expired() -> bool:
        return bool((await rig.mission.work_item(fenced.work_item_id)).get("ownerFencedReason"))

    await eventually(lease_expired, timeout=15)
    await rig.post(rig.crew.coordinator, "Two items left to staff.")
    runs = await rig.client.temporal.get_workflow_handle(rig.workflow_id).query("run_number")
    assert runs >= 3
