"""A Group whose carried-over state reaches its capacity takes no new WorkItems (a typed
refusal, nothing changed) and goes on with the work it has, on the real dev server."""

from __future__ import annotations

from mwp.client import MwpClient
from mwp.core.errors import ErrorCode
from tests.integration.missions_helper import eventually, new_mission


async def test_a_group_past_its_snapshot_capacity_refuses_new_work_items(
    mwp_client: MwpClient,
) -> None:
    # Any carried-over snapshot is "full" here; a run rolls over after 4 Updates.
    rig = await new_mission(mwp_client, updates_per_run=4, snapshot_capacity=1)
    first = await rig.authorize("Before the rollover")  # the first run carries no snapshot
    for n in range(3):
        await rig.post(rig.crew.coordinator, f"note {n}")  # fills the first run's Updates

    async def rolled_over() -> bool:
        described = await mwp_client.temporal.get_workflow_handle(rig.workflow_id).describe()
        info = described.raw_description.workflow_execution_info
        return bool(described.run_id != info.first_run_id)

    await eventually(rolled_over, timeout=30)
    error = await rig.assert_refused(
        lambda: rig.authorize("One too many"), ErrorCode.INVALID_COMMAND
    )
    assert error.wire["details"]["reason"] == "group_capacity"
    # The work already in the Group goes on.
    offered = await rig.offer(first, rig.crew.workers[0])
    assert offered["offers"][0]["agentId"] == rig.crew.workers[0].principal.id
