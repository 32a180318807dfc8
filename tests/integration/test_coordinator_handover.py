"""A replacement Coordinator is handed a Context Package, on a real dev server (spec 7.2,
MWP-MSN-005): without one the MissionOwner's ``mission.assign_coordinator`` is refused and
changes nothing; with a Mission-wide package the outgoing Coordinator published it is taken."""

from __future__ import annotations

from typing import Any

from mwp.client import MwpClient, new_id
from mwp.client.identity import Identity, utc_now
from mwp.core.errors import ErrorCode
from mwp.core.group.context_package import PUBLISH_KIND
from tests.integration.missions_helper import MissionRig, event_of, new_mission


async def handover_package(rig: MissionRig, generator: Identity) -> dict[str, Any]:
    """A Mission-wide Context Package signed by ``generator`` (the current Coordinator) citing
    the Group's founding Event, published in the Group."""
    first = rig.created["events"][0]
    package = generator.sign(
        {
            "contextPackageId": new_id(),
            "version": 1,
            "missionId": rig.mission.mission_id,
            "groupId": rig.mission.group_id,
            "sourceEventRange": {
                "fromSequence": first["sequence"],
                "toSequence": first["sequence"],
                "eventIds": [first["eventId"]],
            },
            "artifactHashes": [],
            "summary": "Hand-over: the Mission as founded; no WorkItem yet.",
            "decisions": [],
            "constraints": [],
            "unresolvedQuestions": [],
            "generatedBy": generator.principal.to_json(),
            "generatedAt": utc_now(),
        },
        "context-package",
    )
    await rig.send(generator, PUBLISH_KIND, {"contextPackage": package})
    return package


async def test_a_replacement_coordinator_needs_a_context_package(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client, spares=1)
    old, new = rig.crew.coordinator, rig.crew.spares[0]

    # assert_refused also checks that the Group's sequence and view are unchanged.
    refusal = await rig.assert_refused(
        lambda: rig.send(
            rig.crew.owner, "mission.assign_coordinator", {"agentId": new.principal.id}
        ),
        ErrorCode.INVALID_COMMAND,
    )
    assert (refusal.details or {}).get("reason") == "context_package_required"

    package = await handover_package(rig, old)
    assigned = await rig.send(
        rig.crew.owner,
        "mission.assign_coordinator",
        {"agentId": new.principal.id, "contextPackageId": package["contextPackageId"]},
    )
    payload = event_of(assigned, "mission.coordinator.assigned")["payload"]
    assert payload["contextPackageId"] == package["contextPackageId"]
    assert payload["coordinator"]["agentId"] == new.principal.id
