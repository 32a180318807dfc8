"""The runtime charges what a run consumes to the budget ledger (spec 12, MWP-AUT-004): each
executed tool call once per op_id, what a tool declares, the run's wall clock; a call over what
the WorkItem has left is not run, and a record the Group refuses blocks the item."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from mwp.agent import (
    CapabilityContext,
    LocalCapabilityRunner,
    ResourceUsage,
    Spent,
    Submission,
)
from mwp.agent.context import Blocked
from mwp.agent.execution import LeaseLost
from mwp.agent.progress import WORK_BLOCK, WORK_SUBMIT
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.resource_usage import RECORD_KIND
from tests.unit.agent.test_local_runner import new_agent, progress, published, runner_of

USD = {"currency": "USD", "financialLimit": 1}


def recorded(runner: LocalCapabilityRunner) -> list[dict[str, Any]]:
    """The deltas of every usage record the Group was sent."""
    return [c.payload["delta"] for c in runner.commands if c.kind == RECORD_KIND]


def cumulative(runner: LocalCapabilityRunner) -> dict[str, Any]:
    usage: dict[str, Any] = runner.work_item["resourceUsage"]["cumulative"]
    return usage


async def test_tool_calls_are_charged_once_per_op_id_across_a_resume(tmp_path: Path) -> None:
    agent = new_agent()
    calls: list[str] = []

    @agent.tool("search")
    async def search(query: str) -> str:
        calls.append(query)
        return f"found {query}"

    async def work(ctx: CapabilityContext) -> Submission:
        first = await ctx.tool("search:a", "search", "a")  # answered by the ledger on resume
        if ctx.resume_state is None:
            await ctx.tool("search:b", "search", "b")
            runner.request_preemption()
            await ctx.checkpoint(progress("searched"), state=1)
        await ctx.tool("search:c", "search", "c")
        return await published(ctx, first)

    runner = runner_of(tmp_path, work, agent, budget={"toolCallLimit": 10})
    assert (await runner.run()).status == "preempted"
    assert (await runner.run()).status == "submitted"
    assert calls == ["a", "b", "c"]
    first, second = recorded(runner)
    assert first["toolCallLimit"] == 2 and second["toolCallLimit"] == 1
    assert cumulative(runner)["toolCallLimit"] == 3  # search:a counted once
    assert runner.work_item["resourceUsage"]["remaining"]["toolCallLimit"] == 7
    # One record per release, each just before it.
    kinds = [c.kind for c in runner.commands]
    assert kinds.count(RECORD_KIND) == 2
    assert kinds[kinds.index("work.checkpoint") - 1] == RECORD_KIND
    assert kinds[-2:] == [RECORD_KIND, WORK_SUBMIT]


async def test_what_a_tool_declares_is_charged_with_the_call(tmp_path: Path) -> None:
    agent = new_agent()

    @agent.tool("price")
    async def price() -> str:
        return "quoted"

    @agent.tool("ask_model")
    async def ask_model(prompt: str) -> Spent:
        return Spent(f"answer to {prompt}", ResourceUsage(model_tokens=120))

    async def work(ctx: CapabilityContext) -> Submission:
        quote = await ctx.tool(
            "price", "price", spend=ResourceUsage(financial=0.25, currency="USD")
        )
        answer = await ctx.tool("ask", "ask_model", "why")
        assert (quote, answer) == ("quoted", "answer to why")  # the result, not the Spent
        return await published(ctx, answer)

    runner = runner_of(tmp_path, work, agent, budget={**USD, "modelTokenLimit": 1000})
    assert (await runner.run()).status == "submitted"
    usage = cumulative(runner)
    assert usage["currency"] == "USD" and usage["financialLimit"] == 0.25
    assert usage["modelTokenLimit"] == 120 and usage["toolCallLimit"] == 2


async def test_the_wall_clock_is_charged_in_whole_seconds_rounded_up_per_run(
    tmp_path: Path,
) -> None:
    async def slow(ctx: CapabilityContext) -> Submission:
        if ctx.resume_state is None:
            await asyncio.sleep(1.05)
            runner.request_preemption()
            await ctx.checkpoint(progress("waited"), state=1)
        return await published(ctx, "done")

    runner = runner_of(tmp_path, slow, budget={"wallClockSecondsLimit": 60})
    await runner.run()
    assert (await runner.run()).status == "submitted"
    assert [d["wallClockSecondsLimit"] for d in recorded(runner)] == [2, 1]
    assert cumulative(runner) == {"wallClockSecondsLimit": 3}


async def test_a_call_over_what_the_item_has_left_is_not_run_and_the_item_is_blocked(
    tmp_path: Path,
) -> None:
    agent = new_agent()
    calls: list[str] = []

    @agent.tool("write")
    async def write(text: str) -> str:
        calls.append(text)
        return text

    async def work(ctx: CapabilityContext) -> Submission:
        if ctx.resume_state is None:
            await ctx.tool("write:1", "write", "1")
            await ctx.tool("write:2", "write", "2")
            runner.request_preemption()
            await ctx.checkpoint(progress("wrote"), state=1)
        await ctx.tool("write:3", "write", "3")  # the last call the budget allows
        await ctx.tool("write:4", "write", "4")
        return await published(ctx, "never")

    # Each run makes at most 2 calls (its own limit of 3 never binds): the ledger does.
    runner = runner_of(tmp_path, work, agent, budget={"toolCallLimit": 3})
    await runner.run()
    outcome = await runner.run()
    assert outcome.status == "blocked" and outcome.command.kind == WORK_BLOCK
    assert calls == ["1", "2", "3"]  # write:4 never ran
    resolution = outcome.command.payload["requiredResolution"]
    assert resolution.startswith("budget exhausted: toolCallLimit")
    assert runner.work_item["state"] == "blocked"
    assert cumulative(runner)["toolCallLimit"] == 3  # what ran was charged before the block


async def test_a_declared_cost_over_the_budget_is_not_run(tmp_path: Path) -> None:
    agent = new_agent()
    calls: list[str] = []

    @agent.tool("buy")
    async def buy() -> str:
        calls.append("bought")
        return "bought"

    async def work(ctx: CapabilityContext) -> Submission:
        await ctx.tool("buy", "buy", spend=ResourceUsage(financial=2, currency="USD"))
        return await published(ctx, "never")

    runner = runner_of(tmp_path, work, agent, budget=USD)
    outcome = await runner.run()
    assert outcome.status == "blocked" and calls == []
    assert "financialLimit" in outcome.command.payload["requiredResolution"]


async def test_usage_the_group_refuses_as_over_budget_blocks_instead_of_submitting(
    tmp_path: Path,
) -> None:
    agent = new_agent()

    @agent.tool("ask_model")
    async def ask_model() -> Spent:  # it learns its cost only once it ran
        return Spent("long answer", ResourceUsage(model_tokens=5000))

    async def work(ctx: CapabilityContext) -> Submission:
        return await published(ctx, await ctx.tool("ask", "ask_model"))

    runner = runner_of(tmp_path, work, agent, budget={"modelTokenLimit": 1000})
    outcome = await runner.run()
    assert outcome.status == "blocked"
    kinds = [c.kind for c in runner.commands]
    assert WORK_SUBMIT not in kinds and kinds[-2:] == [RECORD_KIND, WORK_BLOCK]
    resolution = outcome.command.payload["requiredResolution"]
    assert resolution.startswith("budget exhausted: modelTokenLimit")
    view = runner.work_item
    assert view["state"] == "blocked" and "resourceUsage" not in view  # nothing charged


async def test_concurrent_calls_share_what_is_left(tmp_path: Path) -> None:
    agent = new_agent()
    calls: list[str] = []

    @agent.tool("buy")
    async def buy(what: str) -> str:
        await asyncio.sleep(0.01)
        calls.append(what)
        return what

    async def work(ctx: CapabilityContext) -> Submission:
        price = ResourceUsage(financial=0.75, currency="USD")
        await asyncio.gather(
            ctx.tool("buy:a", "buy", "a", spend=price), ctx.tool("buy:b", "buy", "b", spend=price)
        )
        return await published(ctx, "never")

    runner = runner_of(tmp_path, work, agent, budget=USD)
    outcome = await runner.run()
    await asyncio.sleep(0.05)  # the call admitted first may still be finishing
    # 0.75 + 0.75 passes 1 USD: one of them runs, whichever reached admission first (their
    # ledger look-ups run in threads, so that order is the threads').
    assert outcome.status == "blocked" and calls in (["a"], ["b"])


async def test_a_declared_amount_in_another_currency_is_refused_before_the_call(
    tmp_path: Path,
) -> None:
    agent = new_agent()
    calls: list[str] = []
    refused: list[Any] = []

    @agent.tool("buy")
    async def buy() -> str:
        calls.append("bought")
        return "bought"

    async def work(ctx: CapabilityContext) -> Submission:
        for spend in (
            ResourceUsage(financial=0.5, currency="EUR"),
            ResourceUsage(financial=0.5),  # no currency
        ):
            try:
                await ctx.tool("buy", "buy", spend=spend)
            except MwpError as error:
                refused.append(error.code)
        return await published(ctx, "done")

    runner = runner_of(tmp_path, work, agent, budget=USD)
    assert (await runner.run()).status == "submitted"
    assert calls == [] and refused == [ErrorCode.INVALID_COMMAND] * 2
    assert "financialLimit" not in cumulative(runner)


async def test_a_capability_that_catches_the_block_acts_no_more(tmp_path: Path) -> None:
    agent = new_agent()
    calls: list[str] = []

    @agent.tool("buy")
    async def buy(what: str) -> str:
        calls.append(what)
        return what

    async def work(ctx: CapabilityContext) -> Submission:
        with contextlib.suppress(Blocked):
            await ctx.tool("buy:a", "buy", "a", spend=ResourceUsage(financial=5, currency="USD"))
        with contextlib.suppress(LeaseLost):
            await ctx.tool("buy:b", "buy", "b")  # no side effect once the lease is given back
        return await published(ctx, "never")

    runner = runner_of(tmp_path, work, agent, budget=USD)
    outcome = await runner.run()
    assert outcome.status == "blocked" and calls == []
    assert runner.commands[-1].kind == WORK_BLOCK and runner.work_item["state"] == "blocked"
