"""Context Packages on the Temporal path (spec 8, 13.3; MWP-WRK-027): the Coordinator
publishes a signed package built by the client SDK from a WorkItem's view; an offer admits a
new Worker naming it, or carries one inline; the grant names the package, the WorkItem view
lists the Events that stated its contract. The MissionWorkflow verifies a carried package's
signature; an unpublished package ID or a tampered package is refused and changes nothing."""

from __future__ import annotations

from typing import Any

from mwp.client import MwpClient, new_id
from mwp.client.missions import in_seconds
from mwp.core.errors import ErrorCode
from mwp.core.group.context_package import PUBLISH_KIND, PUBLISHED_KIND
from mwp.core.trust.registry import RegistryEvidence
from mwp.dev.scenario import selection_basis
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import open_store
from mwp.workflows import patches
from tests.histories import needs_patch
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import MissionRig, event_of, eventually, new_mission


def _offer(agent_id: str, **package: Any) -> dict[str, Any]:
    return {
        "candidates": [{"agentId": agent_id, "selectionBasis": selection_basis(in_seconds(60))}],
        "expiresAt": in_seconds(3600),
        **package,
    }


async def _mirrored(log: GroupEventLog, through: int) -> bool:
    return log.last_sequence() >= through


def _grant_of(result: dict[str, Any]) -> dict[str, Any]:
    membership: dict[str, Any] = event_of(result, "membership.changed")["payload"]["membership"]
    return membership


async def test_packages_are_published_named_by_offers_and_carried_inline_behind_a_patch(
    mwp_client: MwpClient, monkeypatch: Any
) -> None:
    rig: MissionRig = await new_mission(mwp_client, workers=2, spares=1)
    coordinator, (first, second), (spare,) = (
        rig.crew.coordinator,
        rig.crew.workers,
        rig.crew.spares,
    )
    item = await rig.authorize("Draft the schema")
    authorized = next(e for e in reversed(rig.log) if e["kind"] == "work.authorized")
    view = await rig.mission.work_item(item.work_item_id)
    assert view["contractEvents"] == [
        {"sequence": authorized["sequence"], "eventId": authorized["eventId"]}
    ]

    # Published on its own, then named by an offer that admits a new Worker.
    package = await rig.mission.offer_context_package(coordinator, item.work_item_id)
    assert package["sourceEventRange"]["eventIds"] == [authorized["eventId"]]
    published = await rig.coordinate(PUBLISH_KIND, {"contextPackage": package})
    event = event_of(published, PUBLISHED_KIND)
    assert event["payload"] == {"contextPackage": package}
    assert event["workItemId"] == item.work_item_id
    named = await rig.coordinate(
        "work.offer",
        _offer(first.principal.id, contextPackageId=package["contextPackageId"]),
        work_item_id=item.work_item_id,
    )
    assert _grant_of(named)["contextPackageId"] == package["contextPackageId"]

    # Carried inline: one Command publishes the package, then grants and offers.
    other = await rig.authorize("Write the migration")
    inline = await rig.mission.offer_context_package(coordinator, other.work_item_id)
    offered = await rig.coordinate(
        "work.offer",
        _offer(second.principal.id, contextPackage=inline),
        work_item_id=other.work_item_id,
    )
    assert [e["kind"] for e in offered["events"]] == [
        PUBLISHED_KIND,
        "membership.changed",
        "work.offer.created",
    ]
    assert _grant_of(offered)["contextPackageId"] == inline["contextPackageId"]
    assert offered["events"][0]["payload"]["contextPackage"] == inline

    # Refused, changing nothing: an ID the Group never published; a package altered after
    # its generator signed it (the workflow verifies the signature before the core decides).
    third = await rig.authorize("Review the migration")
    unknown = await rig.assert_refused(
        lambda: rig.coordinate(
            "work.offer",
            _offer(spare.principal.id, contextPackageId=new_id()),
            work_item_id=third.work_item_id,
        ),
        ErrorCode.INVALID_COMMAND,
    )
    assert unknown.wire["details"]["agentId"] == spare.principal.id
    signed = await rig.mission.offer_context_package(coordinator, third.work_item_id)
    tampered = {**signed, "summary": "Something else entirely."}
    await rig.assert_refused(
        lambda: rig.coordinate(
            "work.offer",
            _offer(spare.principal.id, contextPackage=tampered),
            work_item_id=third.work_item_id,
        ),
        ErrorCode.AUTH_INVALID_SIGNATURE,
    )

    # The Group Event log holds the packages' Events, signed and chained like every other.
    through = await rig.mission.sequence()
    log = GroupEventLog(open_store(stack_log_location()), rig.mission.group_id)
    evidence = RegistryEvidence.from_json(await rig.crew.organization.registry.evidence_json())
    await eventually(lambda: _mirrored(log, through), timeout=20)
    verdict = log.verify_all(evidence)
    assert verdict.ok and verdict.last_sequence == through, verdict
    kinds = [e.event["kind"] for e in log.read(0, through)]
    assert kinds.count(PUBLISHED_KIND) == 2

    # The run's history replays; without the patch's check (the old rules) it does not.
    history = await rig.client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    await needs_patch(history, patches.MISSION_CONTEXT_PACKAGES.id, monkeypatch)
