"""Determinism: histories the current code makes replay against it, as the workers run it.

A Mission through several runs (continue-as-new), its WorkItem children and its Organization
registry replay with the production configuration; a history whose recorded commands differ
from what the code does is refused. Histories of earlier releases are replayed by
``tests/workflows/test_recorded_histories.py``.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from mwp.client import MwpClient
from mwp.contracts.mission import MIRROR_EVENTS
from mwp.contracts.organization import organization_workflow_id
from mwp.contracts.work_item import work_item_workflow_id
from tests.histories import production_replayer
from tests.integration.missions_helper import admit_workers, new_mission


async def _histories(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    query = f"WorkflowId = '{workflow_id}'"
    runs = [execution.run_id async for execution in client.list_workflows(query)]
    return [
        await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        for run_id in runs
    ]


async def test_every_history_replays_with_the_production_configuration(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, updates_per_run=4)
    await admit_workers(rig)
    item = await rig.authorize()
    await rig.complete(item, rig.crew.workers[0])
    temporal = mwp_client.temporal

    mission_runs = await _histories(temporal, rig.workflow_id)
    assert len(mission_runs) >= 3  # continue-as-new happened
    histories = [
        *mission_runs,
        *await _histories(
            temporal, work_item_workflow_id(rig.mission.mission_id, item.work_item_id)
        ),
        *await _histories(
            temporal, organization_workflow_id(rig.crew.organization.organization_id)
        ),
    ]
    replayer = production_replayer()
    for history in histories:
        await replayer.replay_workflow(history)  # raises on any nondeterminism


async def test_a_history_the_code_would_not_produce_is_refused(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    (history,) = (await _histories(mwp_client.temporal, rig.workflow_id))[-1:]
    scheduled = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == MIRROR_EVENTS
    ]
    assert scheduled, "the mirror scheduled its activity"
    scheduled[0].activity_task_scheduled_event_attributes.activity_type.name = "another_activity"
    result = await production_replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
