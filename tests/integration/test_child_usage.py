"""A child Mission's usage charged to its parent Group on a real dev server (spec 12, 14;
child_usage.py): the child's MissionWorkflow asks its parent's through the ``charge_parent``
activity and records the usage only once the parent charged it; a charge the parent refuses
refuses the child's Command and changes neither Group. Only a request the Organization's Group
Authority sealed for the parent, from the child's own workflow, is taken."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError

from mwp.client import MwpClient, new_id
from mwp.client.missions import in_seconds
from mwp.contracts.errors import from_temporal_failure
from mwp.contracts.mission import UPDATE_CHILD_USAGE
from mwp.core.errors import ErrorCode
from mwp.core.group.resource_usage import RECORDED_KIND, ResourceUsage
from mwp.dev.scenario import work_contract
from mwp.workflows import patches
from tests.histories import needs_patch, production_replayer
from tests.integration.missions_helper import MissionRig, WorkItemRef, admit_workers, new_mission
from tests.integration.test_child_and_follow_up_missions import _promote
from tests.integration.test_workflow_replay import _histories


async def _running(rig: MissionRig, goal: str) -> tuple[WorkItemRef, int]:
    """An item of ``rig`` (5 USD, 100 tool calls) started by its first worker: the item and
    its Ownership Epoch."""
    worker = rig.crew.workers[0]
    contract = work_contract(goal, deadline=in_seconds(86400))
    contract["budget"] = {"currency": "USD", "financialLimit": 5, "toolCallLimit": 100}
    item = WorkItemRef(new_id(), contract)
    await rig.coordinate("work.authorize", {"contract": contract}, work_item_id=item.work_item_id)
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    await rig.start(worker, item, epoch)
    return item, epoch


def _charges(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["kind"] == RECORDED_KIND]


async def test_a_child_missions_usage_is_charged_to_its_parent_or_refused_in_both(
    mwp_client: MwpClient, monkeypatch: Any
) -> None:
    rig = await new_mission(mwp_client, spares=1)
    parent_item = await rig.authorize("Write the report")  # 10 USD, 100 tool calls
    # The child limits money only: on its own it would take any number of tool calls.
    child, _ = await _promote(rig, parent_item, {"currency": "USD", "financialLimit": 10})
    await admit_workers(child)
    worker = child.crew.workers[0]
    session = child.crew.session(worker)
    assert session is not None
    first, _ = await _running(child, "Count the calls")
    second, _ = await _running(child, "Count more calls")

    recorded = await child.mission.record_usage(
        worker,
        first.work_item_id,
        ResourceUsage(financial=0.5, currency="USD", tool_calls=60),
        session_epoch=session,
    )

    (child_event,) = recorded["events"]
    charged = {"currency": "USD", "financialLimit": 0.5, "toolCallLimit": 60}
    assert child_event["payload"]["cumulative"] == charged
    (parent_charge,) = _charges(await rig.mission.events_this_run())
    cited = child_event["payload"]["parentCharge"]
    assert cited["missionId"] == rig.mission.mission_id
    assert cited["remaining"] == parent_charge["remaining"]
    assert parent_charge["childMission"]["missionId"] == child.mission.mission_id
    assert parent_charge["childMission"]["workItemId"] == first.work_item_id
    assert parent_charge["delta"] == child_event["payload"]["delta"]
    view = await rig.mission.work_item(parent_item.work_item_id)
    assert view["resourceUsage"]["cumulative"] == charged
    assert (await rig.mission.view())["budgetUsed"] == charged

    # 60 + 50 passes the parent item's 100 tool calls: refused in both Groups, nothing changed.
    parent_before = await rig.state()
    error = await child.assert_refused(
        lambda: child.mission.record_usage(
            worker, second.work_item_id, ResourceUsage(tool_calls=50), session_epoch=session
        ),
        ErrorCode.BUDGET_EXCEEDED,
    )
    details = error.wire["details"]
    assert details["dimension"] == "toolCallLimit"
    assert details["workItemId"] == parent_item.work_item_id
    assert details["parentMissionId"] == rig.mission.mission_id
    assert error.wire["groupId"] == child.mission.group_id
    assert await rig.state() == parent_before

    # What is left still charges: 40 more, in both Groups.
    await child.mission.record_usage(
        worker, second.work_item_id, ResourceUsage(tool_calls=40), session_epoch=session
    )
    view = await rig.mission.work_item(parent_item.work_item_id)
    assert view["resourceUsage"]["cumulative"]["toolCallLimit"] == 100
    # The child's item has 60 of its own 100 tool calls left, and the parent none: a token
    # for it is capped at nothing.
    second_view = await child.mission.work_item(second.work_item_id)
    assert second_view["resourceUsage"]["remaining"]["toolCallLimit"] == 0

    # Anyone else who reaches Temporal is refused at the parent's door, typed, unrecorded.
    handle = mwp_client.temporal.get_workflow_handle(rig.workflow_id)
    forged = {
        "childMissionId": child.mission.mission_id,
        "chargeId": "urn:uuid:00000000-0000-4000-8000-000000000001",
        "delta": {"toolCallLimit": 1},
        "childWorkItemId": first.work_item_id,
    }
    before = await rig.state()
    for body in (forged, {"format": "not sealed"}, "text"):
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await handle.execute_update(UPDATE_CHILD_USAGE, body, result_type=dict)
        remote = from_temporal_failure(failed.value)
        assert remote is not None and remote.code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert await rig.state() == before

    # Both histories replay; the child's only with the patch (without it the child decides
    # alone, and the history's parent charge is a command it never issues).
    replayer = production_replayer()
    for workflow_id in (rig.workflow_id, child.workflow_id):
        for history in await _histories(mwp_client.temporal, workflow_id):
            await replayer.replay_workflow(history)
    history = await mwp_client.temporal.get_workflow_handle(child.workflow_id).fetch_history()
    await needs_patch(history, patches.MISSION_CHILD_USAGE.id, monkeypatch)
