"""The console's Mission list queries a closed Mission once: its view is final (its workflow ID
is never started again), and a closed workflow answers a query only by replaying its whole
history. A running Mission is queried on every listing, as its view moves."""

from __future__ import annotations

from mwp.client import MwpClient
from mwp.console.reading import ClosedViews, owned_missions
from mwp.contracts.mission import mission_workflow_id
from tests.integration.missions_helper import new_crew, new_mission


async def test_a_closed_mission_is_queried_once_and_a_running_one_every_time(
    mwp_client: MwpClient,
) -> None:
    crew = await new_crew(mwp_client)
    closing = await new_mission(mwp_client, crew)
    running = await new_mission(mwp_client, crew)
    handle = mwp_client.temporal.get_workflow_handle(
        mission_workflow_id(closing.mission.mission_id)
    )
    await handle.terminate("closed for the test")
    closed = ClosedViews()
    owner = crew.owner.principal

    first = await owned_missions(mwp_client, owner, closed)
    assert {m["missionId"] for m in first} >= {
        closing.mission.mission_id,
        running.mission.mission_id,
    }
    queried = closed.queried
    assert queried >= 1
    second = await owned_missions(mwp_client, owner, closed)
    assert second == first
    assert closed.queried == queried  # the closed Mission was not queried again
    # Without the kept views, it is queried again.
    fresh = ClosedViews()
    assert await owned_missions(mwp_client, owner, fresh) == first
    assert fresh.queried == queried
