"""MissionWorkflow and WorkItemWorkflow on a real dev server: the Update path end to end,
queries, visibility (search attributes, summaries, current details) and durable timers.

Timers run in real time (the dev server does not skip time), with offers and Execution Leases
of one to three seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf.any_pb2 import Any as ProtoAny
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from mwp.client import ClientError, MwpClient, new_id
from mwp.client.missions import (
    group_authority,
    in_seconds,
    resending_until_decided,
    workflow_not_ready,
)
from mwp.contracts.errors import RemoteMwpError
from mwp.contracts.mission import TimerReport
from mwp.contracts.names import (
    CAPABILITY,
    GROUP_ID,
    MISSION_ID,
    MISSION_STATE,
    OWNER,
    WORK_ITEM_ID,
    WORK_ITEM_STATE,
)
from mwp.core.errors import ErrorCode
from mwp.core.group.context_package import PUBLISHED_KIND
from mwp.core.wire.values import instant_to_datetime, parse_timestamp
from tests.integration.missions_helper import (
    EXECUTION_LEASE_RENEW,
    OWNERSHIP_EXPIRED,
    MissionRig,
    WorkItemRef,
    assert_contiguous,
    event_of,
    eventually,
    new_mission,
    raw,
    refused,
)

# --- helpers -------------------------------------------------------------------------------------


async def listed(client: MwpClient, query: str) -> list[str]:
    """Workflow IDs a visibility query lists (eventually consistent: callers poll)."""
    return [execution.id async for execution in client.temporal.list_workflows(query)]


async def eventually_listed(client: MwpClient, query: str, expected: list[str]) -> None:
    async def check() -> bool:
        return sorted(await listed(client, query)) == sorted(expected)

    await eventually(check, timeout=10, interval=0.2)


async def current_details(client: MwpClient, workflow_id: str) -> str:
    """What the UI shows as a workflow's current details (the SDK's metadata query)."""
    handle = client.temporal.get_workflow_handle(workflow_id)
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    details: str = metadata.current_details
    return details


def child_handle(rig: MissionRig, item: WorkItemRef) -> Any:
    return rig.client.temporal.get_workflow_handle(
        rig.mission.work_item_workflow_id(item.work_item_id)
    )


async def child_query(rig: MissionRig, item: WorkItemRef, query: str) -> Any:
    """A query of the item's child; a child that has not run its first task yet cannot answer
    (FAILED_PRECONDITION), so ask again for a moment."""
    for _ in range(50):
        try:
            return await child_handle(rig, item).query(query)
        except RPCError as error:
            if error.status != RPCStatusCode.FAILED_PRECONDITION:
                raise
        await asyncio.sleep(0.1)
    pytest.fail(f"the WorkItemWorkflow of {item.work_item_id} never answered {query}")


async def child_view(rig: MissionRig, item: WorkItemRef) -> dict[str, Any]:
    view: dict[str, Any] = await child_query(rig, item, "work_item")
    return view


async def child_timers(rig: MissionRig, item: WorkItemRef) -> list[dict[str, str]]:
    timers: list[dict[str, str]] = await child_query(rig, item, "timers")
    return timers


async def assert_item_state(rig: MissionRig, item: WorkItemRef, state: str) -> None:
    """The Mission's WorkItem view, its row in the Mission view and the child all agree."""
    assert (await rig.mission.work_item(item.work_item_id))["state"] == state
    rows = {w["workItemId"]: w for w in (await rig.mission.view())["workItems"]}
    assert rows[item.work_item_id]["state"] == state

    async def child_caught_up() -> bool:
        return bool((await child_view(rig, item))["state"] == state)

    await eventually(child_caught_up, timeout=5)


async def eventually_timers(rig: MissionRig, item: WorkItemRef, expected: list[Any]) -> None:
    """The child holds exactly ``expected`` timers, as ``(kind, token, due_at)``."""

    async def check() -> bool:
        try:
            timers = await child_timers(rig, item)
        except RPCError as exc:
            # The Mission starts the child beside its handlers: it may not exist yet.
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return [(t["kind"], t["token"], t["due_at"]) for t in timers] == expected

    await eventually(check, timeout=10)


def moment(timestamp: str) -> datetime:
    return instant_to_datetime(parse_timestamp(timestamp).instant)


def seconds_until(timestamp: str) -> float:
    return (moment(timestamp) - datetime.now(UTC)).total_seconds()


async def sleep_past(timestamp: str, margin: float = 0.3) -> None:
    await asyncio.sleep(max(0.0, seconds_until(timestamp)) + margin)


def assert_receipt_matches(result: dict[str, Any]) -> None:
    receipt, events = result["receipt"], result["events"]
    assert result["duplicate"] is False
    assert receipt["eventIds"] == [e["eventId"] for e in events]
    assert receipt["firstSequence"] == events[0]["sequence"]
    assert receipt["lastSequence"] == events[-1]["sequence"]
    assert receipt["aggregateRevision"] == events[-1]["aggregateRevision"]


async def run_lifecycle(rig: MissionRig, item: WorkItemRef) -> str:
    """Drive ``item`` to ``verified`` with the first Worker, checking every state on the way
    in the Mission's queries and the child's. The submitted Artifact hash."""
    worker = rig.crew.workers[0]
    await assert_item_state(rig, item, "open")
    await eventually_timers(rig, item, [])

    offered = await rig.offer(item, worker)
    offer = offered["offers"][0]
    assert offer["agentId"] == worker.principal.id and offer["status"] == "pending"
    await assert_item_state(rig, item, "offered")
    await eventually_timers(rig, item, [("offer_expiry", offer["offerId"], offer["expiresAt"])])

    epoch = await rig.accept(worker, item, offer["offerId"])
    assert epoch == 1
    await assert_item_state(rig, item, "queued")
    owner_view = await rig.mission.work_item(item.work_item_id)
    assert owner_view["owner"]["agentId"] == worker.principal.id
    ownership = owner_view["ownershipLease"]
    await eventually_timers(rig, item, [("start_by", ownership["leaseId"], owner_view["startBy"])])

    lease = await rig.start(worker, item, epoch)
    await assert_item_state(rig, item, "active")
    await eventually_timers(rig, item, [("execution_lease", lease["leaseId"], lease["expiresAt"])])

    submitted = await rig.submit(worker, item, epoch, lease["leaseId"])
    artifact: str = event_of(submitted, "work.submitted")["payload"]["submission"][
        "artifactHashes"
    ][0]
    await assert_item_state(rig, item, "submitted")
    await eventually_timers(rig, item, [])

    await rig.accept_result(item)
    await assert_item_state(rig, item, "verified")
    return artifact


async def approve(rig: MissionRig, artifact: str) -> None:
    submitted = await rig.coordinate("mission.submit_for_approval", {"artifactHashes": [artifact]})
    assert event_of(submitted, "mission.submitted_for_approval")["payload"]["missionRevision"]
    assert (await rig.mission.view())["state"] == "awaiting_approval"
    await rig.approve()
    assert (await rig.mission.view())["state"] == "approved"


# --- the Update path -----------------------------------------------------------------------------


async def test_a_mission_from_creation_to_approval_on_the_update_path(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    crew, mission = rig.crew, rig.mission

    # mission.create came in through update-with-start and returned its receipt and Events.
    created = rig.created
    assert [e["kind"] for e in created["events"]] == [
        "mission.created",
        "membership.changed",
        "membership.changed",
    ]
    assert_receipt_matches(created)
    assert created["receipt"]["firstSequence"] == 1
    assert created["receipt"]["actorId"] == crew.owner.principal.id
    authority = group_authority(crew.organization.organization_id).to_json()
    assert all(e["acceptedBy"] == authority for e in created["events"])
    view = await mission.view()
    assert view["state"] == "active"
    assert (view["missionId"], view["groupId"]) == (mission.mission_id, mission.group_id)
    assert view["coordinator"]["agentId"] == crew.coordinator.principal.id
    assert await mission.sequence() == 3 == view["sequence"]

    item = await rig.authorize()
    artifact = await run_lifecycle(rig, item)

    # A verified item is terminal: its WorkItemWorkflow finishes, returning its final summary.
    final: dict[str, Any] = await asyncio.wait_for(child_handle(rig, item).result(), timeout=10)
    assert final["state"] == "verified" and final["workItemId"] == item.work_item_id
    full = await mission.work_item(item.work_item_id)
    assert final["revision"] == full["revision"]
    assert final["ownershipEpoch"] == full["ownershipEpoch"]

    await approve(rig, artifact)
    view = await mission.view()
    assert view["approval"] is not None and view["submission"]["artifactHashes"] == [artifact]

    # Every Update returned its Events; together they are the Group's log, contiguous from 1,
    # exactly what the run's Event query holds: nothing lost, nothing extra.
    events = rig.log
    assert [e["kind"] for e in events][3:] == [
        "work.authorized",
        PUBLISHED_KIND,  # the Context Package the offer carries for the new Worker
        "membership.changed",  # the provisional Worker Membership of the offer, naming it
        "work.offer.created",
        "membership.changed",  # ... activated by the acceptance
        "work.offer.accepted",
        "work.started",
        "artifact.published",
        "work.submitted",
        "work.result.accepted",
        "mission.submitted_for_approval",
        "mission.approved",
    ]
    assert_contiguous(events)
    assert len({e["eventId"] for e in events}) == len(events)
    assert await mission.sequence() == len(events) == view["sequence"]
    assert await mission.events_this_run() == events
    assert await mission.events_this_run(len(events) - 2) == events[-2:]

    # Queries refuse what does not exist instead of inventing it.
    with pytest.raises(WorkflowQueryFailedError):
        await mission.work_item(new_id())


async def test_search_attributes_summaries_and_current_details_follow_the_state(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    mission, worker = rig.mission, rig.crew.workers[0]
    mission_query = f'MissionId = "{mission.mission_id}"'
    item = await rig.authorize()
    child_id = mission.work_item_workflow_id(item.work_item_id)

    await eventually_listed(
        mwp_client, f'{mission_query} AND MissionState = "active"', [rig.workflow_id]
    )
    await eventually_listed(mwp_client, f'GroupId = "{mission.group_id}"', [rig.workflow_id])

    # While the item is queued its child is listed by state, owner and capability.
    offered = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offered["offers"][0]["offerId"])
    await eventually_listed(
        mwp_client,
        f'{mission_query} AND WorkItemState = "queued" AND Owner = "{worker.principal.id}" '
        f'AND Capability = "mwp.dev.general@1.0.0"',
        [child_id],
    )
    assert await listed(mwp_client, f'{mission_query} AND WorkItemState = "verified"') == []
    queued = await mwp_client.temporal.get_workflow_handle(child_id).describe()
    assert queued.typed_search_attributes.get(OWNER) == worker.principal.id
    assert queued.typed_search_attributes.get(WORK_ITEM_STATE) == "queued"
    assert "**queued**" in await current_details(mwp_client, child_id)
    assert worker.principal.id in await current_details(mwp_client, child_id)

    lease = await rig.start(worker, item, epoch)
    await rig.submit(worker, item, epoch, lease["leaseId"])
    await rig.accept_result(item)
    artifact = rig.submission(item, epoch, lease["leaseId"])["artifactHashes"][0]
    await approve(rig, artifact)

    # The visibility query of the issue: this Mission's verified WorkItems.
    await eventually_listed(
        mwp_client, f'{mission_query} AND WorkItemState = "verified"', [child_id]
    )
    await eventually_listed(
        mwp_client, f'{mission_query} AND MissionState = "approved"', [rig.workflow_id]
    )
    # ... and what is no longer true is no longer listed.
    assert await listed(mwp_client, f'{mission_query} AND WorkItemState = "queued"') == []
    assert await listed(mwp_client, f'{mission_query} AND MissionState = "active"') == []
    assert await listed(mwp_client, f'MissionId = "{new_id()}"') == []

    described = await mwp_client.temporal.get_workflow_handle(rig.workflow_id).describe()
    attributes = described.typed_search_attributes
    assert attributes.get(MISSION_ID) == mission.mission_id
    assert attributes.get(GROUP_ID) == mission.group_id
    assert attributes.get(MISSION_STATE) == "approved"
    # A closed Group keeps answering retries for its retention window (test_mission_completion).
    assert described.status == WorkflowExecutionStatus.RUNNING
    assert await described.static_summary() == "Mission: Deliver the quarterly report"
    sequence = await mission.sequence()
    details = await current_details(mwp_client, rig.workflow_id)
    assert details.startswith("**approved**")
    assert f"sequence {sequence}" in details and "1 WorkItems" in details and "run 1" in details

    child = await mwp_client.temporal.get_workflow_handle(child_id).describe()
    child_attributes = child.typed_search_attributes
    assert child_attributes.get(WORK_ITEM_ID) == item.work_item_id
    assert child_attributes.get(MISSION_ID) == mission.mission_id
    assert child_attributes.get(WORK_ITEM_STATE) == "verified"
    assert child_attributes.get(CAPABILITY) == "mwp.dev.general@1.0.0"
    assert child.status == WorkflowExecutionStatus.COMPLETED
    assert await child.static_summary() == "WorkItem: Write the report"
    assert (await current_details(mwp_client, child_id)).startswith("**verified**")


async def test_mission_create_is_idempotent_and_a_second_create_is_refused(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    command = rig.create_command

    # A byte-equal retry through update-with-start: the same receipt, no new Event.
    again = await rig.missions.create_signed(command)
    assert again["receipt"] == rig.created["receipt"]
    before = await rig.state()
    # ... and decided by the Authority itself (a fresh Update ID): its original receipt.
    replay = await rig.send_wire(raw(command))
    assert replay["duplicate"] is True and replay["events"] == []
    assert replay["receipt"] == rig.created["receipt"]
    assert await rig.state() == before

    # Other content for the same Mission: the Group exists already.
    payload = {**command["payload"], "objective": "Deliver another report"}
    other = rig.crew.owner.command("mission.create", payload, group_id=rig.mission.group_id)
    error = await refused(rig.missions.create_signed(other))
    assert error.code == ErrorCode.INVALID_STATE_TRANSITION
    assert await rig.state() == before

    # A Command for a Mission that was never created names the missing workflow.
    ghost = rig.missions.mission(new_id(), new_id())
    with pytest.raises(ClientError, match="no running workflow"):
        await ghost.send_signed(await rig.command(rig.crew.owner, "message.post", {}))


# --- timers --------------------------------------------------------------------------------------


async def test_an_offer_cannot_be_accepted_after_it_expires(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    first, second = rig.crew.workers
    item = await rig.authorize()
    offer = (await rig.offer(item, first, expires_at=in_seconds(2)))["offers"][0]
    await eventually_timers(rig, item, [("offer_expiry", offer["offerId"], offer["expiresAt"])])

    await sleep_past(offer["expiresAt"])
    await rig.assert_refused(
        lambda: rig.accept(first, item, offer["offerId"]), ErrorCode.WORK_OFFER_EXPIRED
    )
    # Expiry records no Event and no transition: the item is still offered ...
    await assert_item_state(rig, item, "offered")
    assert OWNERSHIP_EXPIRED not in {e["kind"] for e in await rig.mission.events_this_run()}

    # ... and a new round (which withdraws the expired offer) can be accepted.
    round_two = await rig.offer(item, second)
    assert round_two["withdrawnOfferIds"] == [offer["offerId"]]
    await rig.assert_refused(
        lambda: rig.accept(first, item, offer["offerId"]), ErrorCode.WORK_OFFER_EXPIRED
    )
    assert await rig.accept(second, item, round_two["offers"][0]["offerId"]) == 1
    await assert_item_state(rig, item, "queued")


async def test_an_expired_execution_lease_fences_the_owner_and_the_item_is_reoffered(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    first, second = rig.crew.workers
    item = await rig.authorize()
    offer = (await rig.offer(item, first))["offers"][0]
    epoch = await rig.accept(first, item, offer["offerId"])
    lease = await rig.start(first, item, epoch, lease_seconds=2)
    await eventually_timers(rig, item, [("execution_lease", lease["leaseId"], lease["expiresAt"])])
    sequence = await rig.mission.sequence()

    # Nobody renews: the child's timer fires and the Mission records the expiry.
    async def expired() -> bool:
        kinds = [e["kind"] for e in await rig.mission.events_this_run(sequence)]
        return OWNERSHIP_EXPIRED in kinds

    await eventually(expired, timeout=2 + 8)
    [expiry] = await rig.mission.events_this_run(sequence)
    assert expiry["kind"] == OWNERSHIP_EXPIRED and expiry["sequence"] == sequence + 1
    assert expiry["payload"]["reason"] == "execution_lease_expired"
    assert expiry["payload"]["agentId"] == first.principal.id
    assert expiry["payload"]["ownershipEpoch"] == epoch
    assert expiry["payload"]["leaseId"] == lease["leaseId"]
    assert expiry["cause"]["type"] == "timer" and "commandHash" not in expiry
    assert expiry["actor"] == group_authority(rig.crew.organization.organization_id).to_json()
    assert expiry["workItemId"] == item.work_item_id
    assert moment(expiry["occurredAt"]) >= moment(lease["expiresAt"])  # never early
    fenced = await rig.mission.work_item(item.work_item_id)
    assert fenced["state"] == "active"  # 10.2 has no row for an expiry: the owner is fenced
    assert fenced["ownerFencedReason"]
    # Visibility follows: the fenced agent is no longer listed as the item's Owner.
    child_id = rig.mission.work_item_workflow_id(item.work_item_id)
    owned_by = f'MissionId = "{rig.mission.mission_id}" AND Owner = "{{}}"'
    await eventually_listed(mwp_client, owned_by.format(first.principal.id), [])

    # The fenced owner's late result can never complete the item.
    late = rig.submission(item, epoch, lease["leaseId"])
    await rig.assert_refused(
        lambda: rig.send(first, "work.submit", late, work_item_id=item.work_item_id),
        ErrorCode.WORK_STALE_OWNERSHIP,
    )
    renew = {"ownershipEpoch": epoch, "leaseId": lease["leaseId"], "leaseSeconds": 60}
    await rig.assert_refused(
        lambda: rig.send(first, EXECUTION_LEASE_RENEW, renew, work_item_id=item.work_item_id),
        ErrorCode.WORK_STALE_OWNERSHIP,
    )

    # Re-offered to another Worker under a higher Ownership Epoch, it completes.
    reoffer = await rig.offer(item, second)
    assert reoffer["fencedOwnership"]["agentId"] == first.principal.id
    second_epoch = await rig.accept(second, item, reoffer["offers"][0]["offerId"])
    assert second_epoch == epoch + 1
    second_lease = await rig.start(second, item, second_epoch)
    await eventually_listed(mwp_client, owned_by.format(second.principal.id), [child_id])
    await rig.assert_refused(
        lambda: rig.send(first, "work.submit", late, work_item_id=item.work_item_id),
        ErrorCode.WORK_STALE_OWNERSHIP,
    )
    submitted = await rig.submit(second, item, second_epoch, second_lease["leaseId"])
    assert event_of(submitted, "work.submitted")["payload"]["submission"]["ownershipEpoch"] == 2
    await rig.accept_result(item)
    await assert_item_state(rig, item, "verified")
    assert_contiguous(await rig.mission.events_this_run())


async def test_a_renewed_execution_lease_outlives_its_first_deadline(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    worker = rig.crew.workers[0]
    item = await rig.authorize()
    offer = (await rig.offer(item, worker))["offers"][0]
    epoch = await rig.accept(worker, item, offer["offerId"])
    lease = await rig.start(worker, item, epoch, lease_seconds=2)

    renewed = await rig.send(
        worker,
        EXECUTION_LEASE_RENEW,
        {"ownershipEpoch": epoch, "leaseId": lease["leaseId"], "leaseSeconds": 600},
        work_item_id=item.work_item_id,
    )
    new_lease = event_of(renewed, "work.progressed")["payload"]["executionLease"]
    assert new_lease["leaseId"] == lease["leaseId"] and new_lease["renewalCount"] == 1
    # The child moved its timer to the renewed expiry (same token, later due time).
    await eventually_timers(
        rig, item, [("execution_lease", lease["leaseId"], new_lease["expiresAt"])]
    )

    sequence = await rig.mission.sequence()
    await sleep_past(lease["expiresAt"], margin=1.0)
    assert await rig.mission.events_this_run(sequence) == []  # no expiry was recorded
    await rig.submit(worker, item, epoch, lease["leaseId"])
    await assert_item_state(rig, item, "submitted")


# --- Commands racing signals ---------------------------------------------------------------------


async def test_commands_racing_signals_are_still_decided(mwp_client: MwpClient) -> None:
    """Timer reports of children and registry notices reach the Group as signals, at any
    time. One that lands while the workflow task completing an Update and continuing as new
    is in flight makes the server fail that task and abort the Update (``WorkflowNotReady``):
    nothing was applied, and the client SDK resends the byte-equal Command. Here stale timer
    reports (which record nothing) are sprayed while every second Command rolls the Group
    over: every Command must come back decided, exactly once."""
    rig = await new_mission(mwp_client, updates_per_run=2)
    handle = mwp_client.temporal.get_workflow_handle(rig.workflow_id)
    stale = TimerReport(new_id(), "execution_lease", new_id())

    async def spray() -> None:
        for _ in range(10):
            await handle.signal("timer_fired", stale)
            await asyncio.sleep(0.002)

    async def send(command: dict[str, Any]) -> dict[str, Any]:
        while True:
            try:
                return await rig.mission.send_signed(command)
            except RemoteMwpError as error:  # sent while a run rolls over
                assert error.code == ErrorCode.BACKPRESSURE
                await asyncio.sleep((error.retry_after_ms or 100) / 1000)

    sequence = await rig.mission.sequence()
    view = await rig.mission.view()
    for n in range(8):
        command = await rig.command(
            rig.crew.coordinator, "message.post", _text(f"racing {n}"), view=view
        )
        result, _ = await asyncio.gather(send(command), spray())
        assert result["duplicate"] is False
        assert result["receipt"]["firstSequence"] == sequence + n + 1
    assert await rig.mission.sequence() == sequence + 8
    assert await run_number(rig) >= 4


def _rpc_error(status: RPCStatusCode, detail: str | None) -> RPCError:
    grpc_status = GrpcStatus(code=status.value, message="refused")
    if detail is not None:
        grpc_status.details.append(ProtoAny(type_url=f"type.googleapis.com/{detail}"))
    return RPCError("refused", status, grpc_status.SerializeToString())


async def test_only_an_aborted_update_is_resent() -> None:
    """The resend rule itself: WorkflowNotReady is resent (bounded), anything else is not."""
    not_ready = "temporal.api.errordetails.v1.WorkflowNotReadyFailure"
    calls: list[int] = []

    def flaky(failures: int, error: Exception) -> Callable[[], Awaitable[str]]:
        async def send() -> str:
            calls.append(1)
            if len(calls) <= failures:
                raise error
            return "decided"

        return send

    assert (
        await resending_until_decided(
            flaky(3, _rpc_error(RPCStatusCode.FAILED_PRECONDITION, not_ready))
        )
        == "decided"
    )
    assert len(calls) == 4
    calls.clear()
    other = _rpc_error(RPCStatusCode.FAILED_PRECONDITION, "temporal.api.errordetails.v1.Other")
    with pytest.raises(RPCError):
        await resending_until_decided(flaky(1, other))
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(RPCError):
        await resending_until_decided(
            flaky(5, _rpc_error(RPCStatusCode.FAILED_PRECONDITION, not_ready)), attempts=3
        )
    assert len(calls) == 3
    assert not workflow_not_ready(_rpc_error(RPCStatusCode.UNAVAILABLE, not_ready))


async def test_backpressure_is_answered_by_resending_after_retry_after() -> None:
    """A Group rolling over answers BACKPRESSURE: the SDK waits ``retryAfterMs`` and resends,
    for a bounded time; other refusals are raised at once."""
    pressure = RemoteMwpError({"code": "BACKPRESSURE", "retryable": True, "retryAfterMs": 5})
    calls: list[int] = []

    async def send(failures: int, error: Exception = pressure) -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise error
        return "decided"

    assert await resending_until_decided(lambda: send(3)) == "decided"
    assert len(calls) == 4
    calls.clear()
    with pytest.raises(RemoteMwpError) as raised:
        await resending_until_decided(lambda: send(100), backpressure_seconds=0.05)
    assert raised.value.code == ErrorCode.BACKPRESSURE and 2 <= len(calls) < 100
    calls.clear()
    refused = RemoteMwpError({"code": "INVALID_COMMAND", "retryable": False})
    with pytest.raises(RemoteMwpError):
        await resending_until_decided(lambda: send(1, refused))
    assert len(calls) == 1


async def run_number(rig: MissionRig) -> int:
    value: int = await rig.client.query(rig.workflow_id, "run_number")
    return value


def _text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}
