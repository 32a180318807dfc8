"""A Group that runs forever: more than 1,200 accepted Commands across more than ten runs.

The Mission continues as new every ``UPDATES_PER_RUN`` accepted Updates, carrying its compact
snapshot. The test keeps ten Commands in flight, retries ``BACKPRESSURE`` (sent while a run
rolls over) after the ``retryAfterMs`` it names, and collects the Events of every Update
result. It proves that no Event is lost or duplicated, that the Group sequence is exactly
``1..N``, that a Command accepted in the first run still returns its original receipt at the
end, and that a WorkItem whose child workflow was started in the first run can still be driven
to ``verified`` in a later run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from temporalio.client import WorkflowExecutionStatus

from mwp.client import Identity, MwpClient
from mwp.contracts.errors import RemoteMwpError
from mwp.core.errors import ErrorCode
from tests.integration.missions_helper import (
    MissionRig,
    admit_workers,
    eventually,
    new_mission,
)

# Small runs, so that many rollovers take few Commands (`make bench-group` floods bigger ones).
UPDATES_PER_RUN = 100
MESSAGES = 1_200
IN_FLIGHT = 10


async def send_until_decided(
    rig: MissionRig, command: Mapping[str, Any], backpressure: list[int]
) -> dict[str, Any]:
    """Send one Command; while the Group rolls over (BACKPRESSURE), wait and resend it."""
    while True:
        try:
            return await rig.mission.send_signed(command)
        except RemoteMwpError as error:
            if error.code != ErrorCode.BACKPRESSURE:
                raise
            backpressure.append(error.retry_after_ms or 0)
            await asyncio.sleep((error.retry_after_ms or 100) / 1000)


async def run_number(rig: MissionRig) -> int:
    value: int = await rig.client.query(rig.workflow_id, "run_number")
    return value


async def test_a_group_outlives_many_runs_without_losing_an_event(mwp_client: MwpClient) -> None:
    started = time.monotonic()
    rig = await new_mission(mwp_client, updates_per_run=UPDATES_PER_RUN)
    crew = rig.crew
    await admit_workers(rig)
    worker = crew.workers[0]

    # Run 1: a Command to replay at the very end, and a WorkItem left queued.
    first_command = await rig.command(crew.coordinator, "message.post", _text("first"))
    first = await rig.mission.send_signed(first_command)
    rig.log.extend(first["events"])
    item = await rig.authorize("Survive continue-as-new")
    offer = (await rig.offer(item, worker))["offers"][0]
    epoch = await rig.accept(worker, item, offer["offerId"])
    assert await run_number(rig) == 1
    child = mwp_client.temporal.get_workflow_handle(
        rig.mission.work_item_workflow_id(item.work_item_id)
    )
    child_run = (await child.describe()).run_id

    # The flood: message.post by every member, ten in flight.
    view = await rig.mission.view()
    members: list[Identity] = [crew.owner, crew.coordinator, *crew.workers]
    results: list[dict[str, Any]] = []
    backpressure: list[int] = []  # retryAfterMs of each BACKPRESSURE refusal
    lease: dict[str, Any] | None = None
    for batch in range(MESSAGES // IN_FLIGHT):
        commands = [
            await rig.command(
                members[n % len(members)], "message.post", _text(f"message {n}"), view=view
            )
            for n in range(batch * IN_FLIGHT, (batch + 1) * IN_FLIGHT)
        ]
        results += await asyncio.gather(
            *(send_until_decided(rig, c, backpressure) for c in commands)
        )
        if lease is None and await run_number(rig) >= 4:
            # The WorkItem of run 1 starts in a later run; its child of run 1 still runs.
            running = await child.describe()
            assert running.status == WorkflowExecutionStatus.RUNNING
            assert running.run_id == child_run
            lease = await rig.start(worker, item, epoch)

            # ... and this run's transition reaches it, with the new Execution Lease timer.
            async def child_follows() -> bool:
                timers: list[dict[str, str]] = await child.query("timers")
                view: dict[str, Any] = await child.query("work_item")
                return view["state"] == "active" and [t["kind"] for t in timers] == [
                    "execution_lease"
                ]

            await eventually(child_follows, timeout=5)
    flood_done = time.monotonic()

    # ... and completes in a later run still.
    assert lease is not None
    await rig.submit(worker, item, epoch, lease["leaseId"])
    await rig.accept_result(item)
    assert (await rig.mission.work_item(item.work_item_id))["state"] == "verified"
    described = await child.describe()
    assert described.run_id == child_run  # the very child started in run 1
    final_view: dict[str, Any] = await asyncio.wait_for(child.result(), timeout=10)
    assert final_view["state"] == "verified"

    # Every flood Command was accepted once, with its own Events.
    assert all(r["duplicate"] is False for r in results)
    for result in results:
        assert result["receipt"]["eventIds"] == [e["eventId"] for e in result["events"]]
    events = rig.log + [e for r in results for e in r["events"]]
    # One accepted Command per (actor, actionId) that caused Events.
    accepted_commands = len(
        {(e["actor"]["id"], e["cause"]["id"]) for e in events if e["cause"]["type"] == "command"}
    )
    assert accepted_commands > MESSAGES

    # No Event lost or duplicated; the Group sequence is exactly 1..N.
    sequence = await rig.mission.sequence()
    assert len(events) == sequence
    assert len({e["eventId"] for e in events}) == sequence
    assert sorted(e["sequence"] for e in events) == list(range(1, sequence + 1))
    assert (await rig.mission.view())["sequence"] == sequence

    # A duplicate of a Command accepted in run 1: its original receipt, no new Event.
    runs = await run_number(rig)
    assert runs >= 11, f"only {runs} runs"
    replay = await rig.mission.send_signed(first_command)
    assert replay == {"receipt": first["receipt"], "events": [], "duplicate": True}
    assert await rig.mission.sequence() == sequence

    # The closed runs are all continued-as-new, and the current one is still running.
    async def all_runs_listed() -> bool:
        listed = [
            execution
            async for execution in mwp_client.temporal.list_workflows(
                f'WorkflowId = "{rig.workflow_id}"'
            )
        ]
        return len(listed) == runs

    await eventually(all_runs_listed, timeout=15, interval=0.5)
    statuses = [
        execution.status
        async for execution in mwp_client.temporal.list_workflows(
            f'WorkflowId = "{rig.workflow_id}"'
        )
    ]
    assert statuses.count(WorkflowExecutionStatus.RUNNING) == 1
    assert statuses.count(WorkflowExecutionStatus.CONTINUED_AS_NEW) == runs - 1

    elapsed = time.monotonic() - started
    print(
        f"\n{accepted_commands} accepted Commands, {sequence} Events, {runs} runs: "
        f"{len(backpressure)} BACKPRESSURE retries; flood {flood_done - started:.1f} s, "
        f"total {elapsed:.1f} s"
    )


def _text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}
