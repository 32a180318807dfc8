"""The budget ledger on the Temporal path (spec 12, MWP-AUT-005): a WorkItem's owner records
usage through the client SDK; the MissionWorkflow charges the item and the Mission in one
Event, mirrored into the signed Group Event log; a record over the item's budget is refused as
``BUDGET_EXCEEDED`` and changes nothing. The run's history replays only with the
``mission-ledger`` patch's check (without it the Group decides under the old rules). A
capability records its usage with ``ctx.record_usage`` through the gateway the same way."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mwp.agent import Agent, CapabilityContext, Submission
from mwp.client import MwpClient
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.resource_usage import RECORDED_KIND, ResourceUsage
from mwp.dev.stack import BackgroundStack
from mwp.workflows import patches
from tests.histories import needs_patch
from tests.integration.gateway_agents import covering_submission, sample_agent, served_agent
from tests.integration.missions_helper import MissionRig, admit_workers, eventually, new_mission


async def test_usage_is_charged_logged_refused_over_budget_and_needs_the_ledger_patch(
    mwp_client: MwpClient, monkeypatch: Any
) -> None:
    rig: MissionRig = await new_mission(mwp_client, workers=1)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    session = rig.crew.session(worker)
    assert session is not None
    item = await rig.authorize("Count the calls")  # budget: 10 USD, 100 tool calls
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)

    recorded = await rig.mission.record_usage(
        worker,
        item.work_item_id,
        ResourceUsage(financial=0.25, currency="USD", tool_calls=40, model_tokens=900),
        session_epoch=session,
    )

    (event,) = recorded["events"]
    assert event["kind"] == RECORDED_KIND
    payload = event["payload"]
    assert (payload["ownershipEpoch"], payload["leaseId"]) == (epoch, lease["leaseId"])
    assert payload["cumulative"] == {
        "currency": "USD",
        "financialLimit": 0.25,
        "modelTokenLimit": 900,
        "toolCallLimit": 40,
    }
    assert payload["remaining"] == {"currency": "USD", "financialLimit": 9.75, "toolCallLimit": 60}
    view = await rig.mission.view()
    assert view["budgetUsed"] == payload["mission"]["cumulative"] == payload["cumulative"]
    item_view = await rig.mission.work_item(item.work_item_id)
    assert item_view["resourceUsage"]["cumulative"] == payload["cumulative"]

    # One dimension over the item's budget refuses the whole record; nothing is charged.
    error = await rig.assert_refused(
        lambda: rig.mission.record_usage(
            worker,
            item.work_item_id,
            ResourceUsage(financial=0.25, currency="USD", tool_calls=61),
            session_epoch=session,
        ),
        ErrorCode.BUDGET_EXCEEDED,
    )
    assert error.wire["details"]["dimension"] == "toolCallLimit"
    assert (await rig.mission.work_item(item.work_item_id))["resourceUsage"] == item_view[
        "resourceUsage"
    ]

    # The Group Event log holds the Event, signed and chained like every other.
    log, through = await rig.verified_log()
    logged = [e.event for e in log.read(0, through) if e.event["kind"] == RECORDED_KIND]
    assert [e["eventId"] for e in logged] == [event["eventId"]]

    # The run's history replays. Under the old rules it does not: they refuse the record the
    # history accepted. The patch's marker is still matched (an unmatched marker alone would
    # fail the replay, whatever the run did); only its branch is not taken.
    history = await rig.client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    await needs_patch(history, patches.MISSION_LEDGER.id, monkeypatch)


# --- a capability's usage, through the gateway ---------------------------------------------------

# What the capability saw, by WorkItem ID (it runs as an activity of this process).
SEEN: dict[str, list[Any]] = {}


def metered_agent(organization_id: str) -> Agent:
    agent = sample_agent(organization_id, "Metered")

    @agent.capability("mwp.dev.general", "1.0.0")
    async def metered(ctx: CapabilityContext) -> Submission:
        seen = SEEN.setdefault(ctx.work_item_id, [])
        recorded: Mapping[str, Any] = await ctx.record_usage(
            ResourceUsage(financial=0.5, currency="USD", tool_calls=3)
        )
        seen.append(dict(recorded))
        try:
            await ctx.record_usage(ResourceUsage(tool_calls=98))  # 101 of 100
        except MwpError as error:
            seen.append(error.code)
        return await covering_submission(ctx, b"metered")

    return agent


async def test_a_capability_records_its_usage_through_the_gateway(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    agent = metered_agent(rig.crew.organization.organization_id)
    async with served_agent(
        mwp_client, rig.crew.organization, agent, temporal_stack.address, tmp_path
    ):
        item = await rig.authorize("Meter the work")  # budget: 10 USD, 100 tool calls
        await rig.offer(item, agent.identity)

        async def submitted() -> bool:
            view = await rig.mission.work_item(item.work_item_id)
            return bool(view["state"] == "submitted")

        await eventually(submitted, timeout=60)

    recorded, refused = SEEN[item.work_item_id]
    assert recorded["cumulative"] == {"currency": "USD", "financialLimit": 0.5, "toolCallLimit": 3}
    assert recorded["remaining"] == {"currency": "USD", "financialLimit": 9.5, "toolCallLimit": 97}
    assert refused == ErrorCode.BUDGET_EXCEEDED
    events = await rig.mission.events_this_run()
    charged = [e for e in events if e["kind"] == RECORDED_KIND]
    # The capability's own record (the refused one left none), then the runtime's: its wall clock.
    assert [e["actor"]["id"] for e in charged] == [agent.agent_id] * 2
    wall = charged[1]["payload"]["delta"]
    assert set(wall) == {"wallClockSecondsLimit"}
    view = await rig.mission.work_item(item.work_item_id)
    assert view["resourceUsage"]["cumulative"] == {**recorded["cumulative"], **wall}
