"""Commands too large for Temporal are refused before history, and the Group keeps answering.

Without these limits one Update over 2 MiB wedged its Mission for good: the worker's echo of
the request in its rejection was over the blob limit, so every retried workflow task failed
with ``PAYLOADS_TOO_LARGE`` (mwp/contracts/command_size.py). Each test sends the sizes of the
finding (1.9, 2.1, 3 and 5 MB, plus one in the validator's own window), then shows that the
same Mission answers queries and accepts a valid Command, and that no workflow task failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from mwp.client import MwpClient, new_id, wire_text
from mwp.client.limits import server_limits_as_mwp_errors
from mwp.client.missions import MissionClient, workflow_not_ready
from mwp.contracts.command_size import (
    MAX_COMMAND_BYTES,
    MAX_IN_FLIGHT_UPDATE_BYTES,
    command_payload_bytes,
)
from mwp.contracts.errors import RemoteMwpError, raising_mwp_errors
from mwp.contracts.mission import (
    MISSION_WORKFLOW_TYPE,
    UPDATE_COMMAND,
    MissionInput,
    mission_workflow_id,
)
from mwp.core.errors import ErrorCode, MwpError
from tests.integration.missions_helper import MissionRig, create_command, new_crew, new_mission

MB = 1_000_000
# Over the Group's limit but small enough for the validator to see it (its echo fits).
IN_VALIDATOR_WINDOW = 600_000
FINDING_SIZES = (1.9 * MB, 2.1 * MB, 3 * MB, 5 * MB)
TEXT_ITEM = 100_000  # message.schema.json: the longest text of one content item


def content(size: int, char: str = "a") -> list[dict[str, str]]:
    count = size // len(char.encode())
    return [
        {"type": "text", "text": char * min(TEXT_ITEM, count - start)}
        for start in range(0, count, TEXT_ITEM)
    ]


async def post_of(rig: MissionRig, size: float, char: str = "a") -> dict[str, Any]:
    """A validly signed ``message.post`` by the Coordinator, about ``size`` bytes of text."""
    return await rig.command(
        rig.crew.coordinator, "message.post", {"content": content(int(size), char)}
    )


async def history_types(rig: MissionRig) -> list[int]:
    handle = rig.client.temporal.get_workflow_handle(rig.workflow_id)
    return [event.event_type for event in (await handle.fetch_history()).events]


async def updates_in_history(rig: MissionRig) -> int:
    """The Updates that entered the Mission's history (each accepted one has this event)."""
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return (await history_types(rig)).count(accepted)


async def assert_still_answering(rig: MissionRig) -> None:
    """The Mission answers a query and accepts a valid Command, and no workflow task failed."""
    before = await rig.mission.sequence()
    result = await rig.post(rig.crew.coordinator, "still here")
    assert [e["kind"] for e in result["events"]] == ["message.posted"]
    assert await rig.mission.sequence() == before + 1
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in await history_types(rig)


async def typed(call: Awaitable[Any]) -> MwpError:
    """The typed MWP error ``call`` raised (fails the test if it succeeded)."""
    try:
        result = await call
    except MwpError as exc:
        return exc
    pytest.fail(f"expected a typed MWP error, got a result: {str(result)[:200]}")


async def test_the_sdk_refuses_an_oversized_command_unsent(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    updates, state = await updates_in_history(rig), await rig.state()
    for size in (IN_VALIDATOR_WINDOW, *FINDING_SIZES):
        command = await post_of(rig, size)
        error = await typed(rig.mission.send_signed(command))
        assert error.code == ErrorCode.PROTOCOL_VIOLATION, error
        assert not isinstance(error, RemoteMwpError)  # decided here, never sent
        assert error.details == {
            "commandBytes": command_payload_bytes(wire_text(command)),
            "maxCommandBytes": MAX_COMMAND_BYTES,
        }
    # Non-Latin text counts as Temporal carries it (escaped): 300 KB of UTF-8 is 900 KB here.
    error = await typed(rig.mission.send_signed(await post_of(rig, 300_000, "é")))
    assert error.code == ErrorCode.PROTOCOL_VIOLATION
    assert await updates_in_history(rig) == updates and await rig.state() == state

    # A Command just under the limit is accepted, and the Group goes on.
    under = await post_of(rig, MAX_COMMAND_BYTES - 10_000)
    assert command_payload_bytes(wire_text(under)) <= MAX_COMMAND_BYTES
    assert (await rig.mission.send_signed(under))["events"][0]["kind"] == "message.posted"
    await assert_still_answering(rig)


async def test_an_oversized_mission_create_starts_nothing(mwp_client: MwpClient) -> None:
    crew = await new_crew(mwp_client)
    template = create_command(crew)
    payload = {**template["payload"], "objective": "x" * IN_VALIDATOR_WINDOW}
    command = crew.owner.command("mission.create", payload, group_id=template["groupId"])
    missions = MissionClient(mwp_client, crew.organization.organization_id)
    error = await typed(missions.create_signed(command))
    assert error.code == ErrorCode.PROTOCOL_VIOLATION
    await assert_never_started(mwp_client, payload["missionId"])


async def assert_never_started(client: MwpClient, mission_id: str) -> None:
    handle = client.temporal.get_workflow_handle(mission_workflow_id(mission_id))
    with pytest.raises(RPCError) as described:
        await handle.describe()
    assert described.value.status == RPCStatusCode.NOT_FOUND


async def test_an_oversized_update_sent_straight_to_the_mission_changes_nothing(
    mwp_client: MwpClient,
) -> None:
    """An attacker with namespace access sends the signed texts to the Update itself."""
    rig = await new_mission(mwp_client)
    handle = mwp_client.temporal.get_workflow_handle(rig.workflow_id)
    state = await rig.state()

    async def attack(text: str) -> Any:
        # The SDK's own mapping of what comes back (the attacker's client sees the raw error).
        # An attacker resends what the server dropped unprocessed, as the SDK does.
        for _ in range(3):
            with raising_mwp_errors(), server_limits_as_mwp_errors():
                try:
                    return await handle.execute_update(UPDATE_COMMAND, text, id=str(uuid.uuid4()))
                except WorkflowUpdateFailedError as exc:
                    if not workflow_not_ready(exc):
                        raise

    async def attack_with_start(mission_id: str, text: str) -> None:
        start = WithStartWorkflowOperation(
            MISSION_WORKFLOW_TYPE,
            MissionInput(rig.crew.organization.organization_id, rig.missions.authority.to_json()),
            id=mission_workflow_id(mission_id),
            task_queue=mwp_client.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            with raising_mwp_errors(), server_limits_as_mwp_errors():
                await mwp_client.temporal.execute_update_with_start_workflow(
                    UPDATE_COMMAND, text, start_workflow_operation=start, id=str(uuid.uuid4())
                )
        finally:
            with contextlib.suppress(Exception):  # read the failed start's error
                await start.workflow_handle()

    sizes = (IN_VALIDATOR_WINDOW, *FINDING_SIZES)
    texts = [wire_text(await post_of(rig, size)) for size in sizes]
    attacks = [asyncio.create_task(typed(attack(text))) for text in texts]
    fresh = new_id()
    creating = asyncio.create_task(typed(attack_with_start(fresh, texts[2])))
    # The server holds the Updates it refuses for a while before answering: meanwhile the
    # Mission answers and decides as if nothing had been sent.
    await asyncio.sleep(0.5)
    assert await rig.state() == state
    await assert_still_answering(rig)

    errors = dict(zip(sizes, await asyncio.gather(*attacks), strict=True))
    # Over the Group's limit, with an echo that fits: the validator's typed rejection.
    validator = errors[IN_VALIDATOR_WINDOW]
    assert isinstance(validator, RemoteMwpError) and validator.code == ErrorCode.PROTOCOL_VIOLATION
    assert validator.wire["details"]["maxCommandBytes"] == MAX_COMMAND_BYTES
    # Over the server's in-flight limit: refused at admission, before any worker sees it.
    for size in FINDING_SIZES[:3]:
        assert size > MAX_IN_FLIGHT_UPDATE_BYTES
        assert errors[size].code == ErrorCode.BACKPRESSURE, errors[size]
        assert isinstance(errors[size].__cause__, RPCError)
    # Over gRPC's 4 MiB: the frontend refuses the request itself.
    assert errors[5 * MB].code == ErrorCode.PROTOCOL_VIOLATION

    # Nor does an update-with-start of 2.1 MB create a Mission.
    assert (await creating).code == ErrorCode.BACKPRESSURE
    await assert_never_started(mwp_client, fresh)

    assert await updates_in_history(rig) == 2  # the creation and the valid post
    await assert_still_answering(rig)
