"""The agent runtime charges what a run consumes on the real path (spec 12, MWP-AUT-004): a
capability's tool calls, what its tools declare and its wall clock are recorded through the
gateway in one ``resource_usage_recorded`` Event before the submission; a tool call whose
declared cost passes what the WorkItem has left is never run and the item is blocked, naming
the exhausted dimension."""

from __future__ import annotations

from pathlib import Path

from mwp.agent import Agent, CapabilityContext, Submission
from mwp.client import MwpClient
from mwp.core.group.resource_usage import RECORDED_KIND, ResourceUsage
from mwp.dev.stack import BackgroundStack
from tests.integration.gateway_agents import covering_submission, sample_agent, served_agent
from tests.integration.missions_helper import eventually, new_mission

# What the tools did, by goal (they run as activities of this process).
CALLED: list[str] = []
OVER = "Buy the expensive dataset"


def spending_agent(organization_id: str) -> Agent:
    agent = sample_agent(organization_id, "Spending")

    @agent.tool("buy")
    async def buy(goal: str) -> str:
        CALLED.append(goal)
        return "bought"

    @agent.capability("mwp.dev.general", "1.0.0")
    async def spend(ctx: CapabilityContext) -> Submission:
        goal = ctx.contract["goal"]
        price = 25 if goal == OVER else 0.75  # the item's budget is 10 USD
        await ctx.tool("buy", "buy", goal, spend=ResourceUsage(financial=price, currency="USD"))
        await ctx.tool("buy-again", "buy", goal)
        return await covering_submission(ctx, b"spent")

    return agent


async def test_the_runtime_charges_a_run_and_blocks_a_call_over_budget(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    agent = spending_agent(rig.crew.organization.organization_id)
    async with served_agent(
        mwp_client, rig.crew.organization, agent, temporal_stack.address, tmp_path
    ):
        within = await rig.authorize("Buy the cheap dataset")  # budget: 10 USD, 100 tool calls
        over = await rig.authorize(OVER)
        await rig.offer(within, agent.identity)
        await rig.offer(over, agent.identity)

        async def settled() -> bool:
            states = [
                (await rig.mission.work_item(i.work_item_id))["state"] for i in (within, over)
            ]
            return states == ["submitted", "blocked"]

        await eventually(settled, timeout=60)

    events = await rig.mission.events_this_run()
    [charged] = [
        e for e in events if e["kind"] == RECORDED_KIND and e["workItemId"] == within.work_item_id
    ]
    delta = charged["payload"]["delta"]
    assert delta["currency"] == "USD" and delta["financialLimit"] == 0.75
    assert delta["toolCallLimit"] == 2 and delta["wallClockSecondsLimit"] >= 1
    submitted = next(
        e
        for e in events
        if e["kind"] == "work.submitted" and e["workItemId"] == within.work_item_id
    )
    assert charged["sequence"] < submitted["sequence"]  # charged before the lease ended
    view = await rig.mission.work_item(within.work_item_id)
    assert view["resourceUsage"]["remaining"]["financialLimit"] == 9.25

    # The over-budget call never ran; nothing was charged; the item waits for escalation.
    assert CALLED.count(OVER) == 0 and CALLED.count("Buy the cheap dataset") == 2
    blocked = await rig.mission.work_item(over.work_item_id)
    assert blocked["state"] == "blocked" and "resourceUsage" in blocked
    assert blocked["resourceUsage"]["cumulative"].get("financialLimit", 0) == 0
    [block] = [
        e for e in events if e["kind"] == "work.blocked" and e["workItemId"] == over.work_item_id
    ]
    assert block["payload"]["requiredResolution"].startswith("budget exhausted: financialLimit")
