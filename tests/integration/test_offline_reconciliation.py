"""Offline progress reconciled on Temporal (spec 11.5, MWP-WRK-021, 022): a Worker whose run
lost the Group buffers a checkpoint bound to its lease and window (``mwp.agent.offline``),
reconnects under a new Session, which revokes the lease, and re-signs it; the MissionWorkflow
charges the offline usage and records the checkpoint in one decision, both mirrored and signed
in the Group Event log. An irreversible step is refused while offline, and progress claimed
after the lease's revocation is refused by the Group, changing nothing. A run that never
received its last renewal's receipt binds its checkpoint to the expiry it knew, which the Group
takes from the ``mission-offline-renewals`` patch on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mwp.agent.offline import OfflineRun, reconciled
from mwp.client import MwpClient
from mwp.client.identity import utc_now
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.clock import instant, plus_seconds
from mwp.core.group.offline_execution import OFFLINE_EXTENSION
from mwp.core.group.resource_usage import RECORDED_KIND, ResourceUsage
from mwp.core.wire.values import format_utc
from mwp.workflows import patches
from tests.histories import needs_patch
from tests.integration.missions_helper import (
    EXECUTION_LEASE_RENEW,
    admit_workers,
    event_of,
    eventually,
    membership_epoch_of,
    new_mission,
    refused,
)

PROGRESS = {
    "currentPhase": "indexing",
    "completedMilestones": ["fetched"],
    "nextCheckpoint": "ranked",
    "blockers": [],
    "updatedCompletionEstimate": "2030-01-01T00:00:00Z",
    "evidenceIds": [],
}


async def test_a_checkpoint_buffered_offline_is_charged_and_recorded_on_reconnect(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, workers=1)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    item = await rig.authorize("Index the archive offline")
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)
    session = rig.crew.session(worker)
    assert session is not None
    membership = membership_epoch_of(await rig.mission.view(), worker.principal.id)
    run = OfflineRun(
        worker.principal.id,
        rig.mission.group_id,
        item.work_item_id,
        session,
        epoch,
        lease["leaseId"],
        lease["expiresAt"],
        disconnected_at=format_utc(datetime.now(UTC)),
        grace_seconds=120,
    )

    # Offline: reversible progress is buffered; an irreversible step is not taken.
    buffered = run.checkpoint(
        worker,
        PROGRESS,
        membership_epoch=membership,
        usage=ResourceUsage(model_tokens=120, tool_calls=2),
    )
    with pytest.raises(MwpError) as irreversible:
        run.checkpoint(
            worker,
            PROGRESS,
            membership_epoch=membership,
            usage=ResourceUsage(external_side_effects=1),
        )
    assert irreversible.value.code is ErrorCode.AUTH_FORBIDDEN
    with pytest.raises(MwpError) as too_late:
        run.checkpoint(worker, PROGRESS, membership_epoch=membership, now=run.grace_deadline)
    assert too_late.value.code is ErrorCode.WORK_LEASE_EXPIRED

    # Reconnect: a new Session, which revokes the lease the run held.
    new_session = await rig.renew_session(worker)

    async def revoked() -> bool:
        return (await rig.mission.work_item(item.work_item_id))["state"] == "queued"

    await eventually(revoked)
    sequence = await rig.mission.sequence()

    # Progress claimed after the revocation (a forged buffer time) is refused.
    forged = run.checkpoint(
        worker, PROGRESS, membership_epoch=membership, now=plus_seconds(utc_now(), 1)
    )
    error = await refused(
        rig.mission.send_signed(
            reconciled(forged, worker, session_epoch=new_session, membership_epoch=membership)
        )
    )
    assert error.code is ErrorCode.WORK_LEASE_EXPIRED
    assert await rig.mission.sequence() == sequence

    # The buffered checkpoint, re-signed under the new Session: charged, then recorded.
    result = await rig.mission.send_signed(
        reconciled(buffered, worker, session_epoch=new_session, membership_epoch=membership)
    )

    charge, checkpoint = result["events"]
    assert [charge["kind"], checkpoint["kind"]] == [RECORDED_KIND, "work.checkpointed"]
    assert charge["payload"]["sessionEpoch"] == session
    assert charge["payload"]["reconciliation"]["sessionEpoch"] == new_session
    assert charge["payload"]["delta"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    view: dict[str, Any] = await rig.mission.work_item(item.work_item_id)
    assert view["checkpoint"]["leaseId"] == lease["leaseId"]
    assert view["resourceUsage"]["cumulative"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    # The binding travelled as signed: the Group's log holds both Events, chained and signed.
    assert OFFLINE_EXTENSION in buffered["extensions"]
    log, _ = await rig.verified_log()
    kinds = [e.event["kind"] for e in log.read(sequence, 10)]
    assert kinds == [RECORDED_KIND, "work.checkpointed"]


async def test_a_checkpoint_bound_to_an_expiry_a_lost_renewal_receipt_left_needs_its_patch(
    mwp_client: MwpClient, monkeypatch: Any
) -> None:
    rig = await new_mission(mwp_client, workers=1)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    item = await rig.authorize("Index the archive through a lost receipt")
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch, lease_seconds=200)
    session = rig.crew.session(worker)
    assert session is not None
    membership = membership_epoch_of(await rig.mission.view(), worker.principal.id)

    # The Group renews the lease, but the receipt never reaches the run: the connection is
    # lost first, and the run goes on offline under the expiry it started with.
    renewed = await rig.send(
        worker,
        EXECUTION_LEASE_RENEW,
        {"ownershipEpoch": epoch, "leaseId": lease["leaseId"], "leaseSeconds": 300},
        work_item_id=item.work_item_id,
    )
    held = event_of(renewed, "work.progressed")["payload"]["executionLease"]["expiresAt"]
    assert instant(held) > instant(lease["expiresAt"])
    run = OfflineRun(
        worker.principal.id,
        rig.mission.group_id,
        item.work_item_id,
        session,
        epoch,
        lease["leaseId"],
        lease["expiresAt"],
        disconnected_at=format_utc(datetime.now(UTC)),
        grace_seconds=120,
    )
    buffered = run.checkpoint(
        worker, PROGRESS, membership_epoch=membership, usage=ResourceUsage(model_tokens=80)
    )
    binding = buffered["extensions"][OFFLINE_EXTENSION]["data"]
    assert binding["executionLeaseExpiresAt"] == lease["expiresAt"]

    # Reconnect under a new Session, which revokes the lease; the checkpoint is taken.
    new_session = await rig.renew_session(worker)

    async def revoked() -> bool:
        return (await rig.mission.work_item(item.work_item_id))["state"] == "queued"

    await eventually(revoked)
    result = await rig.mission.send_signed(
        reconciled(buffered, worker, session_epoch=new_session, membership_epoch=membership)
    )
    assert [e["kind"] for e in result["events"]] == [RECORDED_KIND, "work.checkpointed"]
    view: dict[str, Any] = await rig.mission.work_item(item.work_item_id)
    assert view["checkpoint"]["leaseId"] == lease["leaseId"]
    assert view["resourceUsage"]["cumulative"] == {"modelTokenLimit": 80}

    # The run's history replays; under the rules before the patch it does not: they refuse
    # the checkpoint the history accepted.
    history = await rig.client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    await needs_patch(history, patches.MISSION_OFFLINE_RENEWALS.id, monkeypatch)
