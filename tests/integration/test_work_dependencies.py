"""Dependency insertion on the Temporal path: ``ext.missionweaveprotocol.core.work_dependency_add``
sent through the client SDK revises the Work Contract and makes the item wait; cycles, edges that
exist and other signers are refused and change nothing."""

from __future__ import annotations

from typing import Any

from mwp.client import Identity, MwpClient
from mwp.core.errors import ErrorCode
from mwp.core.group.work_dependency import WORK_DEPENDENCY_ADD_KIND as ADD
from mwp.core.models import validate_document
from tests.histories import production_replayer
from tests.integration.missions_helper import (
    MissionRig,
    WorkItemRef,
    admit_workers,
    event_of,
    new_mission,
)


def _add(rig: MissionRig, signer: Identity, item: WorkItemRef, *dependencies: WorkItemRef) -> Any:
    """The Command sent by the client SDK's MissionHandle, which attaches the epochs."""
    return rig.mission.send(
        signer,
        ADD,
        {"dependencyWorkItemIds": [d.work_item_id for d in dependencies]},
        session_epoch=rig.crew.session(signer),
        work_item_id=item.work_item_id,
    )


async def test_an_added_dependency_makes_the_item_wait_and_cycles_are_refused(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    coordinator, (worker, other) = rig.crew.coordinator, rig.crew.workers
    first = await rig.authorize("Draft the schema")
    second = await rig.authorize("Write the migration")
    offers = await rig.offer(second, worker)

    result = await _add(rig, coordinator, second, first)

    revised = event_of(result, "work.contract.revised")
    # An Update result carries the Event body; the Group log mirror adds the signature.
    signature = {
        "algorithm": "Ed25519",
        "keyId": "urn:example:key:authority",
        "createdAt": revised["occurredAt"],
        "value": "c2lnbmF0dXJl",
    }
    validate_document("event.schema.json", {**revised, "signature": signature})
    assert revised["payload"]["addedDependencyWorkItemIds"] == [first.work_item_id]
    contract = revised["payload"]["contract"]
    assert contract["contractVersion"] == 2
    assert contract["dependencyWorkItemIds"] == [first.work_item_id]
    view = await rig.mission.work_item(second.work_item_id)
    assert view["contract"] == contract and view["state"] == "offered"

    # The other direction would close a cycle; the edge again changes nothing; only the
    # Coordinator inserts dependencies.
    error = await rig.assert_refused(
        lambda: _add(rig, coordinator, first, second), ErrorCode.INVALID_COMMAND
    )
    assert error.wire["details"]["cycle"] == [
        first.work_item_id,
        second.work_item_id,
        first.work_item_id,
    ]
    error = await rig.assert_refused(
        lambda: _add(rig, coordinator, second, first), ErrorCode.INVALID_COMMAND
    )
    assert error.wire["details"]["reason"] == "dependencies_present"
    await rig.assert_refused(lambda: _add(rig, other, second, first), ErrorCode.AUTH_FORBIDDEN)

    # The offer stands under the revised contract; the item waits for its dependency.
    second.contract = contract
    epoch = await rig.accept(worker, second, offers["offers"][0]["offerId"])
    error = await rig.assert_refused(
        lambda: rig.send(
            worker, "work.start", {"ownershipEpoch": epoch}, work_item_id=second.work_item_id
        ),
        ErrorCode.INVALID_STATE_TRANSITION,
    )
    assert error.wire["details"]["pendingDependencies"] == [first.work_item_id]
    await rig.complete(first, other)
    lease = await rig.start(worker, second, epoch)
    assert lease["leaseId"]

    # The history with the accepted (and the refused) insertions replays as the workers run
    # it: a kind the Authority used to refuse needs no patch, as refused Updates never enter
    # history.
    history = await mwp_client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    await production_replayer().replay_workflow(history)
