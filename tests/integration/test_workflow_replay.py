"""Determinism: recorded histories of a Group replay against the current workflow code.

The product runs the authority workflows outside Temporal's sandbox (workers/authority.py), so
nothing but replay itself guards their determinism there. This test records a Mission through
several runs (continue-as-new), its WorkItem children and its Organization registry, and
replays every history with both runners; a history whose recorded commands differ from what
the code does is refused.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, WorkflowRunner

from mwp.client import MwpClient
from mwp.contracts.mission import MIRROR_EVENTS, work_item_workflow_id
from mwp.core.organization.service import organization_workflow_id
from mwp.workers.authority import workflow_runner
from mwp.workers.registry import WORKFLOWS
from tests.integration.missions_helper import admit_workers, new_mission


async def _histories(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    query = f"WorkflowId = '{workflow_id}'"
    runs = [execution.run_id async for execution in client.list_workflows(query)]
    return [
        await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        for run_id in runs
    ]


def _replayer(runner: WorkflowRunner) -> Replayer:
    return Replayer(workflows=list(WORKFLOWS), workflow_runner=runner)


async def test_every_recorded_history_replays_with_and_without_the_sandbox(
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
    for sandboxed in (True, False):
        replayer = _replayer(workflow_runner(sandboxed=sandboxed))
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
    result = await _replayer(workflow_runner(sandboxed=False)).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert result.replay_failure is not None
