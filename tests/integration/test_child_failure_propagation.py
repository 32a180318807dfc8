"""A declared child-failure propagation on a real dev server (spec 7.1, 10.2, 14).

Two WorkItems of a parent Mission are promoted to child Missions: one whose failure only blocks
its item (``block``), one declared indispensable (``fail_mission``). The first child's
termination leaves the parent Mission active; the second's fails the parent Mission and, with
it, every unfinished WorkItem. Each child's own terminated WorkItems carry failure Evidence.
"""

from __future__ import annotations

from typing import Any

from mwp.client import MwpClient
from mwp.client.missions import in_seconds
from mwp.core.models import validate_document
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.trust.signed_document import PROFILES, verify_value
from mwp.dev.scenario import definition_of_done
from tests.histories import production_replayer
from tests.integration.missions_helper import (
    Crew,
    MissionRig,
    WorkItemRef,
    event_of,
    eventually,
    new_mission,
)
from tests.integration.test_workflow_replay import _histories

ITEM_BUDGET = {"currency": "USD", "financialLimit": 10, "toolCallLimit": 100}


async def _promote(rig: MissionRig, item: WorkItemRef, spare: int, policy: str) -> MissionRig:
    """The parent Coordinator promotes ``item`` under ``policy``; a rig for the running child."""
    crew = rig.crew
    child_coordinator = crew.spares[spare]
    child, result = await rig.mission.create_child(
        crew.coordinator,
        item.work_item_id,
        session_epoch=crew.sessions[crew.coordinator.principal.id],
        objective="Check the report's figures",
        child_coordinator_agent_id=child_coordinator.principal.id,
        definition_of_done=definition_of_done("The figures are checked."),
        budget=ITEM_BUDGET,
        deadline=in_seconds(80_000),
        failure_policy=policy,
    )
    assert event_of(result, "mission.child.created")["payload"]["failurePolicy"] == policy

    async def founded() -> bool:
        try:
            return (await child.view()).get("state") == "active"
        except Exception:
            return False

    await eventually(founded, timeout=20)
    child_crew = Crew(
        rig.client,
        crew.organization,
        crew.coordinator,  # the Parent Coordinator owns the child
        child_coordinator,
        crew.workers,
        [],
        crew.sessions,
    )
    return MissionRig(child_crew, rig.missions, child, {"events": []}, {})


async def _terminate(child: MissionRig, reason: str) -> dict[str, Any]:
    """The child Coordinator terminates its Mission with one WorkItem still open."""
    item = await child.authorize("Check the figures")
    result = await child.coordinate("mission.terminate", {"reason": reason})
    failed = event_of(result, "work.failed")
    assert failed["workItemId"] == item.work_item_id
    [record] = failed["payload"]["failureEvidence"]
    assert failed["payload"]["failureEvidenceIds"] == [record["evidenceId"]]
    assert (record["type"], record["result"], record["workItemId"]) == (
        "failure_report",
        "failed",
        item.work_item_id,
    )
    return event_of(result, "mission.terminated")


async def test_a_terminated_mission_s_failure_evidence_is_signed_by_the_group_authority(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    item = await rig.authorize("Write the report")
    result = await rig.coordinate("mission.terminate", {"reason": "The budget was withdrawn."})
    [returned] = event_of(result, "work.failed")["payload"]["failureEvidence"]

    # The signed Group Event log carries it as the Update returned it, signed and schema-valid.
    log, through = await rig.verified_log()
    evidence = RegistryEvidence.from_json(await rig.crew.organization.registry.evidence_json())
    [failed] = [e.event for e in log.read(0, through) if e.event["kind"] == "work.failed"]
    assert failed["workItemId"] == item.work_item_id
    [record] = failed["payload"]["failureEvidence"]
    assert record == returned
    validate_document("evidence.schema.json", record)
    # Six-stage verification against the Registry evidence: the Group Authority signed it,
    # with the key that signs its Events.
    verified = verify_value(record, PROFILES["evidence"], evidence)
    authority = failed["acceptedBy"]
    assert verified.principal == Principal(authority["type"], authority["id"])
    assert record["generatedBy"] == authority
    assert verified.key_id == failed["signature"]["keyId"]
    assert record["createdAt"] == failed["occurredAt"]
    # The signing activity is in the history: the run replays to the same Commands.
    history = await rig.client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    await production_replayer().replay_workflow(history)


async def test_an_indispensable_child_s_failure_fails_the_parent_mission(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, spares=2)
    replaceable = await rig.authorize("Write the report")
    indispensable = await rig.authorize("Draw the charts")
    open_item = await rig.authorize("Summarize")
    blocking = await _promote(rig, replaceable, 0, "block")
    failing = await _promote(rig, indispensable, 1, "fail_mission")

    # A child whose failure only blocks its item: the parent Mission stays active.
    await _terminate(blocking, "the figures cannot be checked")

    async def item_state(item: WorkItemRef, expected: str) -> bool:
        view = await rig.mission.work_item(item.work_item_id)
        return view["state"] == expected and view["childMission"]["status"] == "failed"

    await eventually(lambda: item_state(replaceable, "blocked"), timeout=20)
    assert (await rig.mission.view())["state"] == "active"

    # The indispensable child fails: so does the parent Mission, and every unfinished item.
    ended = await _terminate(failing, "the chart data is gone")

    async def parent_failed() -> bool:
        return (await rig.mission.view())["state"] == "failed"

    await eventually(parent_failed, timeout=20)
    events = await rig.mission.events_this_run()
    closing = next(e for e in events if e["kind"] == "mission.terminated")
    assert closing["cause"] == {"type": "event", "id": ended["eventId"]}
    assert closing["payload"]["childMissionId"] == failing.mission.mission_id
    assert closing["payload"]["failurePolicy"] == "fail_mission"
    assert set(closing["payload"]["workItemIds"]) == {
        i.work_item_id for i in (replaceable, indispensable, open_item)
    }
    for item in (replaceable, indispensable, open_item):
        assert (await rig.mission.work_item(item.work_item_id))["state"] == "failed"
    # Both Groups' histories (child reports, the propagated failure) replay deterministically.
    replayer = production_replayer()
    for workflow_id in (rig.workflow_id, failing.workflow_id):
        for history in await _histories(mwp_client.temporal, workflow_id):
            await replayer.replay_workflow(history)
