"""Linked Missions on a real dev server: child Missions (spec 14) and follow-ups (spec 7.1).

A child Mission is its own Group Authority (a MissionWorkflow started by the parent's), founded
from the parent's ``mission.child.created`` Event; its approval comes back as a signal and
verifies the parent WorkItem. A follow-up links to an approved Mission the Organization
registry has been told about.
"""

from __future__ import annotations

from typing import Any

from mwp.client import Identity, MwpClient, new_id
from mwp.client.missions import MissionHandle, in_seconds
from mwp.core.errors import ErrorCode
from mwp.core.trust.registry import Principal
from mwp.dev.scenario import definition_of_done, mission_budget
from tests.histories import production_replayer
from tests.integration.missions_helper import (
    Crew,
    MissionRig,
    WorkItemRef,
    admit_workers,
    event_of,
    eventually,
    new_mission,
    refused,
)
from tests.integration.test_workflow_replay import _histories

ITEM_BUDGET = {"currency": "USD", "financialLimit": 10, "toolCallLimit": 100}


async def _promote(
    rig: MissionRig, item: WorkItemRef, budget: dict[str, Any] | None = None
) -> tuple[MissionRig, dict[str, Any]]:
    """The parent Coordinator promotes ``item`` (the child's ``budget`` defaults to the
    item's); a rig for the child Mission, once it runs."""
    crew = rig.crew
    child_coordinator = crew.spares[0]
    child, result = await rig.mission.create_child(
        crew.coordinator,
        item.work_item_id,
        session_epoch=crew.sessions[crew.coordinator.principal.id],
        objective="Check the report's figures",
        child_coordinator_agent_id=child_coordinator.principal.id,
        definition_of_done=definition_of_done("The figures are checked."),
        budget=budget or ITEM_BUDGET,
        deadline=in_seconds(80_000),
    )
    rig.log.extend(result["events"])

    async def founded() -> bool:
        try:
            view = await child.view()
        except Exception:
            return False
        return bool(view) and view.get("state") == "active"

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
    view = await child.view()
    created = {"events": []}
    return MissionRig(child_crew, rig.missions, child, created, {}), view


async def _approve(rig: MissionRig, owner: Identity) -> dict[str, Any]:
    """Complete one WorkItem, submit the Mission, and have ``owner`` approve it."""
    await admit_workers(rig)
    item = await rig.authorize("Check the figures")
    events = await rig.complete(item, rig.crew.workers[0])
    artifacts = event_of({"events": events}, "work.submitted")["payload"]["submission"]
    hashes = artifacts["artifactHashes"]
    submitted = await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
    assert event_of(submitted, "mission.submitted_for_approval")["payload"]["missionRevision"]
    return await rig.approve(owner)


async def test_a_child_mission_runs_in_its_own_group_and_its_approval_verifies_the_parent_item(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, spares=1)
    item = await rig.authorize("Write the report")

    child, child_view = await _promote(rig, item)

    link = event_of({"events": rig.log}, "mission.child.created")
    assert link["workItemId"] == item.work_item_id
    parent_item = await rig.mission.work_item(item.work_item_id)
    assert parent_item["state"] == "blocked"
    assert parent_item["childMission"]["status"] == "running"
    assert child_view["missionOwner"] == rig.crew.coordinator.principal.to_json()
    assert child_view["parent"]["missionId"] == rig.mission.mission_id
    assert child_view["groupId"] == child.mission.group_id != rig.mission.group_id
    first = (await child.mission.events_this_run())[0]
    assert first["cause"] == {"type": "event", "id": link["eventId"]}

    approved = await _approve(child, rig.crew.coordinator)
    assert event_of(approved, "mission.approved")["payload"]["approval"]["kind"] == "child_mission"

    async def verified() -> bool:
        return (await rig.mission.work_item(item.work_item_id))["state"] == "verified"

    await eventually(verified, timeout=20)
    parent_item = await rig.mission.work_item(item.work_item_id)
    assert parent_item["childMission"]["status"] == "approved"
    hashes = parent_item["submission"]["artifactHashes"]
    # The child's Artifacts are the parent item's result: the parent can now be submitted.
    submitted = await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
    assert event_of(submitted, "mission.submitted_for_approval")
    # Both Groups' histories (child start, child report signal) replay deterministically.
    replayer = production_replayer()
    for workflow_id in (rig.workflow_id, child.workflow_id):
        for history in await _histories(mwp_client.temporal, workflow_id):
            await replayer.replay_workflow(history)


async def test_cancelling_the_parent_item_cancels_its_child_mission(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, spares=1)
    item = await rig.authorize("Write the report")
    child, _ = await _promote(rig, item)

    await rig.coordinate("work.cancel", {"reason": "replanned"}, work_item_id=item.work_item_id)

    async def cancelled() -> bool:
        return (await child.mission.view())["state"] == "cancelled"

    await eventually(cancelled, timeout=20)
    # Only the parent's Coordinator may promote, and never an item that already ended.
    await rig.assert_refused(
        lambda: rig.mission.create_child(
            rig.crew.coordinator,
            item.work_item_id,
            session_epoch=rig.crew.sessions[rig.crew.coordinator.principal.id],
            objective="Again",
            child_coordinator_agent_id=rig.crew.spares[0].principal.id,
            definition_of_done=definition_of_done("Done."),
            budget=ITEM_BUDGET,
            deadline=in_seconds(80_000),
        ),
        ErrorCode.INVALID_STATE_TRANSITION,
    )


async def test_a_follow_up_links_to_an_approved_mission_of_the_same_owner(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    crew = rig.crew

    async def follow_up(owner: Identity, linked: str) -> tuple[MissionHandle, dict[str, Any]]:
        return await rig.missions.create(
            owner,
            objective="Fix what the review found",
            coordinator_agent_id=crew.coordinator.principal.id,
            definition_of_done=definition_of_done("Fixed."),
            budget=mission_budget(),
            deadline=in_seconds(86_400),
            follow_up_to=linked,
        )

    # Not approved yet: refused, and no Group was opened.
    early = await refused(follow_up(crew.owner, rig.mission.mission_id))
    assert early.code == ErrorCode.INVALID_COMMAND

    await _approve(rig, crew.owner)

    other = Identity.generate(Principal("human", f"urn:mwp:human:other-{new_id()[-8:]}"))
    await crew.organization.registry.register_binding(other)
    stranger = await refused(follow_up(other, rig.mission.mission_id))
    assert stranger.code == ErrorCode.AUTH_FORBIDDEN

    handle, created = await follow_up(crew.owner, rig.mission.mission_id)
    event = event_of(created, "mission.follow_up.created")
    assert event["payload"]["mission"]["followUpToMissionId"] == rig.mission.mission_id
    assert (await handle.view())["state"] == "active"
