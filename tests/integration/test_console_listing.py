"""The console's Mission list queries a closed Mission once: its view is final (its workflow ID
is never started again), and a closed workflow answers a query only by replaying its whole
history. A running Mission is queried on every listing, as its view moves. Visibility names
the human's own Missions (the MissionOwner search attribute): another human's Mission is
never read, and a Mission started before the attribute existed is still listed."""

from __future__ import annotations

import pytest
from temporalio.common import TypedSearchAttributes

from mwp.client import MwpClient, missions
from mwp.console.reading import ClosedViews, owned_missions
from mwp.contracts.mission import mission_workflow_id
from mwp.contracts.names import MISSION_OWNER
from tests.integration.missions_helper import MissionRig, new_crew, new_mission


async def _terminate(client: MwpClient, rig: MissionRig) -> str:
    workflow_id = mission_workflow_id(rig.mission.mission_id)
    await client.temporal.get_workflow_handle(workflow_id).terminate("closed for the test")
    return workflow_id


async def test_a_closed_mission_is_queried_once_and_a_running_one_every_time(
    mwp_client: MwpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    crew = await new_crew(mwp_client)
    closing = await new_mission(mwp_client, crew)
    running = await new_mission(mwp_client, crew)
    with monkeypatch.context() as before_the_attribute:
        before_the_attribute.setattr(
            missions, "owner_attribute", lambda _: TypedSearchAttributes.empty
        )
        legacy = await new_mission(mwp_client, crew)
    others = await _terminate(mwp_client, await new_mission(mwp_client))  # another owner's
    closed_id = await _terminate(mwp_client, closing)
    described = await mwp_client.temporal.get_workflow_handle(closed_id).describe()
    assert described.typed_search_attributes.get(MISSION_OWNER) == crew.owner.principal.id
    closed = ClosedViews()
    owner = crew.owner.principal

    first = await owned_missions(mwp_client, owner, closed)
    assert {m["missionId"] for m in first} == {
        closing.mission.mission_id,
        running.mission.mission_id,
        legacy.mission.mission_id,
    }
    assert closed.get(closed_id)[0]
    assert not closed.get(others)[0]  # another human's closed Mission: never read
    queried = closed.queried
    second = await owned_missions(mwp_client, owner, closed)
    assert second == first
    assert closed.queried == queried  # the closed Mission was not queried again
    # Without the kept views, it is queried again.
    fresh = ClosedViews()
    assert await owned_missions(mwp_client, owner, fresh) == first
    assert fresh.queried == queried
