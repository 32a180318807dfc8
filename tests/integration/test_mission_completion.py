"""A closed Mission's workflow completes (Failed for a failed Mission) after its retention
window, in which a retry of its last Commands still gets the original receipt; its WorkItems'
workflows end as the items did (Completed, Failed, Cancelled); afterwards the client SDK
refuses a Command with a typed error and the queries still answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from mwp.client import MwpClient, new_id
from mwp.client.missions import MissionClient, settled_work_item_view
from mwp.contracts.mission import CLOSED_RETENTION_SECONDS, MISSION_FAILED
from mwp.contracts.work_item import WORK_ITEM_FAILED
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.signed_document import FreshnessWindow
from mwp.workflows import patches
from tests.histories import production_replayer
from tests.integration.missions_helper import (
    MissionRig,
    WorkItemRef,
    admit_workers,
    create_command,
    event_of,
    new_crew,
    raw,
)
from tests.integration.test_mission_workflow import current_details

RETENTION = 3  # seconds: long enough to retry, short enough for a test


async def closing_mission(client: MwpClient) -> MissionRig:
    crew = await new_crew(client)
    missions = MissionClient(
        client, crew.organization.organization_id, closed_retention_seconds=RETENTION
    )
    command = create_command(crew)
    created = await missions.create_signed(command)
    mission = missions.mission(command["payload"]["missionId"], command["groupId"])
    rig = MissionRig(crew, missions, mission, created, command)
    await admit_workers(rig)
    return rig


async def fail(rig: MissionRig, item: WorkItemRef) -> None:
    await rig.coordinate(
        "work.fail",
        {"reason": "the sources are gone", "failureEvidenceIds": [new_id()]},
        work_item_id=item.work_item_id,
    )


def handle(rig: MissionRig, workflow_id: str) -> WorkflowHandle[Any, Any]:
    return rig.client.temporal.get_workflow_handle(workflow_id)


async def status(rig: MissionRig, workflow_id: str) -> WorkflowExecutionStatus | None:
    return (await handle(rig, workflow_id).describe()).status


def test_the_retention_window_is_the_command_freshness_window() -> None:
    window = FreshnessWindow()
    assert window.max_age_seconds + window.max_skew_seconds == CLOSED_RETENTION_SECONDS


async def test_an_approved_mission_completes_after_answering_retries(
    mwp_client: MwpClient,
) -> None:
    rig = await closing_mission(mwp_client)
    verified = await rig.authorize("Write the closing report")
    failed = await rig.authorize("Gather the missing sources")
    cancelled = await rig.authorize("Translate the closing report")
    await rig.complete(verified, rig.crew.workers[0])
    await fail(rig, failed)
    await rig.coordinate(
        "work.cancel", {"reason": "not needed"}, work_item_id=cancelled.work_item_id
    )
    artifact = [
        h
        for e in rig.log
        if e["kind"] == "work.submitted"
        for h in e["payload"]["submission"]["artifactHashes"]
    ]
    submitted = await rig.coordinate("mission.submit_for_approval", {"artifactHashes": artifact})
    assert event_of(submitted, "mission.submitted_for_approval")["payload"]["missionRevision"]
    approve = await rig.command(rig.crew.owner, "mission.approve", await rig.approval_payload())
    approved = await rig.mission.send_signed(approve)
    assert not approved["duplicate"]

    # The cancelled item's workflow ends Cancelled as soon as its Mission asks, whose
    # summary names its goal; its final view is still read through the Mission's handle.
    child_of = rig.mission.work_item_workflow_id
    described = await handle(rig, child_of(cancelled.work_item_id)).describe()
    assert await described.static_summary() == "WorkItem: Translate the closing report"
    for _ in range(100):
        if await status(rig, child_of(cancelled.work_item_id)) != WorkflowExecutionStatus.RUNNING:
            break
        await asyncio.sleep(0.1)
    assert await status(rig, child_of(cancelled.work_item_id)) == WorkflowExecutionStatus.CANCELED
    view = await settled_work_item_view(rig.client, child_of(cancelled.work_item_id))
    assert view["state"] == "cancelled" and view["workItemId"] == cancelled.work_item_id

    # Within the retention window a retry of the closing Command gets its original receipt.
    assert await status(rig, rig.workflow_id) == WorkflowExecutionStatus.RUNNING
    again = await rig.mission.send_signed(approve)  # Temporal's Update-ID deduplication
    assert again["receipt"] == approved["receipt"]
    decided = await rig.send_wire(raw(approve))  # the Authority's (actor, actionId) table
    assert decided["duplicate"] and decided["receipt"] == approved["receipt"]
    mission_summary = await (await handle(rig, rig.workflow_id).describe()).static_summary()
    assert mission_summary == "Mission: Deliver the quarterly report"
    details = await current_details(rig.client, rig.workflow_id)
    assert "| WorkItem | state | owner |" in details
    assert "| Gather the missing sources | failed | — |" in details
    assert f"| Write the closing report | verified | {rig.crew.workers[0].principal.id} |" in (
        details
    )

    # Then the workflow completes, Completed; the failed item's ends Failed with its view.
    result = await asyncio.wait_for(handle(rig, rig.workflow_id).result(), timeout=RETENTION + 20)
    assert result["state"] == "approved" and result["workItems"] == 3
    assert await status(rig, rig.workflow_id) == WorkflowExecutionStatus.COMPLETED
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle(rig, child_of(failed.work_item_id)).result(), timeout=10)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == WORK_ITEM_FAILED
    assert cause.details[0]["failure"]["reason"] == "the sources are gone"
    view = await settled_work_item_view(rig.client, child_of(failed.work_item_id))
    assert view["state"] == "failed" and view["workItemId"] == failed.work_item_id
    assert await status(rig, child_of(verified.work_item_id)) == WorkflowExecutionStatus.COMPLETED

    # A closed Mission: the server still answers the byte-equal retry of an accepted Update
    # with its outcome; any other Command is a typed, non-retryable error. Reads answer.
    late = await rig.mission.send_signed(approve)
    assert late["receipt"] == approved["receipt"]
    post = {"content": [{"type": "text", "text": "one more thing"}]}
    with pytest.raises(MwpError) as refused:
        await rig.mission.send_signed(await rig.command(rig.crew.coordinator, "message.post", post))
    assert refused.value.code == ErrorCode.INVALID_STATE_TRANSITION
    assert refused.value.retryable is False
    # Its ID is never started again: the retried mission.create gets its receipt, a new one
    # for the same Mission the typed error.
    assert (await rig.missions.create_signed(rig.create_command))["receipt"] == rig.created[
        "receipt"
    ]
    with pytest.raises(MwpError) as recreated:
        await rig.missions.create_signed(
            create_command(rig.crew, mission_id=rig.mission.mission_id)
        )
    assert recreated.value.code == ErrorCode.INVALID_STATE_TRANSITION
    assert await status(rig, rig.workflow_id) == WorkflowExecutionStatus.COMPLETED
    assert (await rig.mission.view())["state"] == "approved"
    assert (await rig.mission.work_item(failed.work_item_id))["state"] == "failed"


async def test_a_terminated_mission_ends_failed(mwp_client: MwpClient) -> None:
    rig = await closing_mission(mwp_client)
    item = await rig.authorize("Draft the plan")
    await rig.coordinate("mission.terminate", {"reason": "the budget was withdrawn"})
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle(rig, rig.workflow_id).result(), timeout=RETENTION + 20)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == MISSION_FAILED
    assert cause.details[0]["state"] == "failed"
    assert "the budget was withdrawn" in str(cause)
    child_id = rig.mission.work_item_workflow_id(item.work_item_id)
    assert await status(rig, child_id) == WorkflowExecutionStatus.FAILED
    assert await status(rig, rig.workflow_id) == WorkflowExecutionStatus.FAILED


async def test_a_new_style_work_item_history_needs_its_patch(
    mwp_client: MwpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The histories of a failed and of a cancelled item's workflow, recorded with the patch,
    replay; with its check removed (the old branch always) they no longer do. (Histories
    from before the patch, which never show a failed item's final view or a cancel request,
    replay in tests/workflows.)"""
    rig = await closing_mission(mwp_client)
    failed = await rig.authorize("Index the archive")
    cancelled = await rig.authorize("Summarize the archive")
    await fail(rig, failed)
    await rig.coordinate(
        "work.cancel", {"reason": "not needed"}, work_item_id=cancelled.work_item_id
    )
    await rig.send(rig.crew.owner, "mission.cancel", {"reason": "replanned"})
    await asyncio.wait_for(handle(rig, rig.workflow_id).result(), timeout=RETENTION + 20)
    histories = []
    for item, ended in (
        (failed, WorkflowExecutionStatus.FAILED),
        (cancelled, WorkflowExecutionStatus.CANCELED),
    ):
        child = handle(rig, rig.mission.work_item_workflow_id(item.work_item_id))
        for _ in range(100):
            if (await child.describe()).status == ended:
                break
            await asyncio.sleep(0.1)
        assert (await child.describe()).status == ended
        histories.append(await child.fetch_history())

    replayer = production_replayer()
    for history in histories:
        await replayer.replay_workflow(history)
    real = workflow.patched
    removed = patches.WORK_ITEM_ENDS_AS_ITEM.id
    monkeypatch.setattr(workflow, "patched", lambda i: False if i == removed else real(i))
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert isinstance(result.replay_failure, workflow.NondeterminismError), history.workflow_id
