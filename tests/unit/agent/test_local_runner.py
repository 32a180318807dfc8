"""A capability unit-tested with the local runner, which drives the real ``LeasedExecution``
over an in-memory Group: tools once per op_id, checkpoint and resume after preemption, block,
a checked submission, retries and budgets within the contract, and fencing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mwp.agent import (
    Agent,
    CapabilityContext,
    CapabilityFailure,
    CardInfo,
    EvidenceItem,
    LocalCapabilityRunner,
    Progress,
    ResourceAccess,
    Submission,
    tool_key,
)
from mwp.agent.execution import FENCED_CODES, LeaseLost, load_checkpoint
from mwp.agent.progress import LEASE_RENEW
from mwp.client import Identity
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.resource_usage import RECORD_KIND as USAGE
from mwp.core.trust.registry import Principal
from mwp.stores.objects import FolderObjectStore
from tests.unit.group.harness import contract

AGENT_ID = "urn:mwp:agent:acme:writer"
CAPABILITY = {"id": "code.backend", "version": "1.0.0"}  # what the harness contract requires
EVIDENCE = [
    EvidenceItem("urn:x:e:tests", ["tests-pass"]),
    EvidenceItem("urn:x:e:review", ["reviewed"]),
]
NO_BACKOFF = {"maxAttempts": 2, "backoff": "none", "retryableFailures": ["TRANSIENT"]}

Capability = Callable[[CapabilityContext], Awaitable[Submission]]


def new_agent() -> Agent:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    return Agent(
        AGENT_ID,
        identity,
        card=CardInfo(
            "urn:mwp:organization:acme", Principal("human", "urn:mwp:human:olivia"), "Writer"
        ),
    )


def progress(phase: str) -> Progress:
    return Progress(phase, ["searched"], "next step", revised_estimate="2026-07-16T00:00:00Z")


async def published(ctx: CapabilityContext, text: str) -> Submission:
    content = await ctx.publish(
        text.encode(), media_type="text/plain", schema_uri="urn:mwp:schema:text"
    )
    return Submission([content], EVIDENCE)


def searching(searches: list[str]) -> Agent:
    agent = new_agent()

    @agent.tool("search")
    async def search(query: str, *, idempotency_key: str) -> str:
        searches.append(idempotency_key)
        return f"found {query}"

    return agent


def writer(searches: list[str]) -> Agent:
    agent = searching(searches)

    @agent.capability(CAPABILITY["id"], CAPABILITY["version"])
    async def write(ctx: CapabilityContext) -> Submission:
        found = await ctx.tool("search:q1", "search", "pagination")
        step = ctx.resume_state or 0
        while step < 2:
            step += 1
            await ctx.checkpoint(progress(f"step {step}"), state=step)
        if "blocked" in ctx.contract["goal"]:
            await ctx.block("need access to the billing API")
        return await published(ctx, found)

    return agent


def runner_of(
    tmp_path: Path, capability: Capability, agent: Agent | None = None, **terms: Any
) -> LocalCapabilityRunner:
    agent = agent or new_agent()
    agent.capability(CAPABILITY["id"], CAPABILITY["version"])(capability)
    return LocalCapabilityRunner(
        agent, contract(requiredCapabilities=[CAPABILITY], **terms), FolderObjectStore(tmp_path)
    )


# --- preemption, checkpoints, resume -------------------------------------------------------


async def test_preempted_work_resumes_from_its_checkpoint_and_tools_run_once(
    tmp_path: Path,
) -> None:
    searches: list[str] = []
    runner = LocalCapabilityRunner(
        writer(searches), contract(requiredCapabilities=[CAPABILITY]), FolderObjectStore(tmp_path)
    )
    runner.request_preemption()
    first = await runner.run()
    assert first.status == "preempted" and first.state == 1
    assert first.command.kind == "work.checkpoint"
    # The Group names the checkpoint, stored in the object store; the lease is released.
    view = runner.work_item
    assert view["state"] == "queued" and "executionLease" not in view
    assert load_checkpoint(runner.store, view["checkpoint"]["checkpointRef"]) == 1

    done = await runner.run()  # resumes at step 1, same Ownership Epoch, a new lease
    assert done.status == "submitted" and done.command.kind == "work.submit"
    assert done.lease_id != first.lease_id
    kinds = [c.kind for c in runner.commands]
    assert kinds == [
        "work.start",
        USAGE,  # the search and the run's wall clock, before the lease is released
        "work.checkpoint",
        "work.start",
        LEASE_RENEW,  # step 2's checkpoint rides a renewal: no preemption was asked again
        "artifact.publish",
        USAGE,  # the second run's wall clock only: the search was answered by the ledger
        "work.submit",
    ]
    key = tool_key(runner.mission_id, runner.work_item_id, 1, "search:q1")
    assert searches == [key]  # the search ran once and received its idempotency key
    view = runner.work_item
    assert view["state"] == "submitted"
    assert load_checkpoint(runner.store, view["checkpoint"]["checkpointRef"]) == 2
    assert done.submission is not None
    assert runner.artifacts.get(done.submission.artifact_hashes[0]) == b"found pagination"

    again = await runner.run()  # a submitted item does not start again
    assert again.status == "not_started"
    assert again.detail["refusal"]["code"] == "INVALID_STATE_TRANSITION"


async def test_a_preemption_asked_mid_run_stops_at_the_next_checkpoint(tmp_path: Path) -> None:
    runs: list[Any] = []

    async def count(ctx: CapabilityContext) -> Submission:
        resumed = ctx.resume_state
        runs.append(resumed)
        step = resumed or 0
        while step < 3:
            step += 1
            if step == 2 and resumed is None:
                runner.request_preemption()  # the Scheduler asks while step 2 runs
            await ctx.checkpoint(progress(f"step {step}"), state=step)
        return await published(ctx, "counted")

    runner = runner_of(tmp_path, count)
    first = await runner.run()
    assert first.status == "preempted" and first.state == 2
    assert [c.kind for c in runner.commands] == [
        "work.start",
        LEASE_RENEW,
        USAGE,
        "work.checkpoint",
    ]
    done = await runner.run()
    assert done.status == "submitted"
    assert runs == [None, 2]  # the second run resumed from the preempting checkpoint


async def test_a_slow_preemption_answer_is_awaited_beside_the_renewal(tmp_path: Path) -> None:
    """The Scheduler's answer is a round trip of its own: the renewal does not wait for it,
    and a "yes" that comes after the renewal still releases the lease at that checkpoint."""
    asked: list[int] = []

    async def count(ctx: CapabilityContext) -> Submission:
        for step in (1, 2, 3):
            await ctx.checkpoint(progress(f"step {step}"), state=step)
        return await published(ctx, "counted")

    runner = runner_of(tmp_path, count)
    group = runner.group

    async def slow_answer() -> bool:
        asked.append(len(group.commands))  # Commands sent when the question was asked
        renewals = sum(c.kind == LEASE_RENEW for c in group.commands)
        for _ in range(100):  # answered once this checkpoint's renewal went (or after 1 s)
            if sum(c.kind == LEASE_RENEW for c in group.commands) > renewals:
                break
            await asyncio.sleep(0.01)
        return len(asked) == 2  # asked during step 2

    group.preemption_requested = slow_answer  # type: ignore[method-assign]
    first = await runner.run()
    assert first.status == "preempted" and first.state == 2
    assert [c.kind for c in runner.commands] == [
        "work.start",
        LEASE_RENEW,  # step 1: renewed while the "no" was on its way
        LEASE_RENEW,  # step 2: renewed before the late "yes"...
        USAGE,
        "work.checkpoint",  # ...which releases the lease at the same checkpoint
    ]
    assert asked == [1, 2]
    view = runner.work_item
    assert view["state"] == "queued"
    assert view["checkpoint"]["checkpointRef"] == runner.commands[-1].payload["checkpointRef"]


# --- block, retries, failures, budgets -------------------------------------------------------


async def test_a_blocked_capability_records_its_required_resolution(tmp_path: Path) -> None:
    runner = LocalCapabilityRunner(
        writer([]),
        contract(requiredCapabilities=[CAPABILITY], goal="A blocked goal."),
        FolderObjectStore(tmp_path),
    )
    outcome = await runner.run()
    assert outcome.status == "blocked"
    assert outcome.command.payload["requiredResolution"] == "need access to the billing API"
    assert outcome.detail["resolution"] == "need access to the billing API"
    assert runner.work_item["state"] == "blocked"


async def test_a_retryable_failure_is_retried_without_redoing_finished_tools(
    tmp_path: Path,
) -> None:
    searches: list[str] = []
    attempts: list[int] = []
    agent = searching(searches)

    async def flaky(ctx: CapabilityContext) -> Submission:
        found = await ctx.tool("search:q1", "search", "pagination")
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise CapabilityFailure("the upstream timed out", code="TRANSIENT")
        return await published(ctx, found)

    runner = runner_of(tmp_path, flaky, agent, retryPolicy=NO_BACKOFF)
    outcome = await runner.run()
    assert outcome.status == "submitted" and attempts == [1, 2]
    assert len(searches) == 1  # the second attempt found the first one's recorded result
    assert [c.kind for c in runner.commands] == [
        "work.start",
        "artifact.publish",
        USAGE,
        "work.submit",
    ]


async def test_a_failure_the_contract_does_not_retry_sends_work_fail_with_evidence(
    tmp_path: Path,
) -> None:
    async def broken(ctx: CapabilityContext) -> Submission:
        raise CapabilityFailure("the input is unreadable", code="BAD_INPUT")

    runner = runner_of(tmp_path, broken, retryPolicy=NO_BACKOFF)
    outcome = await runner.run()
    assert outcome.status == "failed" and outcome.detail["failure"] == "BAD_INPUT"
    assert outcome.command.kind == "work.fail"
    assert outcome.command.payload["failureCode"] == "BAD_INPUT"
    assert len(runner.store.list_keys("failure-evidence/")) == 1
    assert runner.work_item["state"] == "failed"


async def test_a_tool_call_over_the_contracts_limit_fails_the_run(tmp_path: Path) -> None:
    agent = searching([])

    async def greedy(ctx: CapabilityContext) -> Submission:
        await ctx.tool("search:1", "search", "one")
        await ctx.tool("search:2", "search", "two")
        return await published(ctx, "never")

    runner = runner_of(tmp_path, greedy, agent, budget={"toolCallLimit": 1})
    outcome = await runner.run()
    assert outcome.status == "failed" and outcome.detail["failure"] == "TOOL_BUDGET_EXHAUSTED"


# --- fencing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(FENCED_CODES))
async def test_a_fenced_refusal_ends_the_run_and_allows_no_further_side_effect(
    tmp_path: Path, code: ErrorCode
) -> None:
    agent = new_agent()
    writes: list[str] = []
    refused: list[str] = []

    @agent.tool("write")
    async def write(text: str) -> str:
        writes.append(text)
        return text

    async def work(ctx: CapabilityContext) -> Submission:
        await ctx.tool("write:1", "write", "before")
        runner.fence(code)  # the Group fences the run while it works
        try:
            await ctx.progress(progress("writing"))
        except LeaseLost:
            refused.append("progress")
            await ctx.tool("write:2", "write", "after")  # no side effect without a lease
        return await published(ctx, "never")

    runner = runner_of(tmp_path, work, agent)
    outcome = await runner.run()
    assert outcome.status == "fenced"
    assert outcome.detail["refusal"]["code"] == code.value
    assert "failure" not in outcome.detail  # stopped by LeaseLost, not failed
    assert refused == ["progress"] and writes == ["before"]
    assert outcome.command.kind == LEASE_RENEW  # the refused renewal was the last Command


async def test_a_submission_refused_as_fenced_is_kept_as_a_late_result(tmp_path: Path) -> None:
    async def late(ctx: CapabilityContext) -> Submission:
        submission = await published(ctx, "late")
        runner.fence()  # the lease lapses before the submission arrives
        return submission

    runner = runner_of(tmp_path, late)
    outcome = await runner.run()
    assert outcome.status == "fenced" and outcome.detail["lateResult"] is True
    assert outcome.submission is not None
    [late] = runner.store.list_keys("late-results/")
    assert json.loads(runner.store.get(late) or b"{}")["command"]["kind"] == "work.submit"
    assert runner.work_item["state"] == "active"  # the late submission completed nothing


# --- resource usage --------------------------------------------------------------------------


async def test_recorded_usage_is_charged_to_the_contract_budget_and_overflow_is_refused(
    tmp_path: Path,
) -> None:
    from mwp.agent.context import ResourceUsage

    answers: list[Any] = []

    async def spend(ctx: CapabilityContext) -> Submission:
        answers.append(await ctx.record_usage(ResourceUsage(model_tokens=600)))
        try:  # 600 + 600 passes the contract's 1,000 tokens: nothing is charged
            await ctx.record_usage(ResourceUsage(model_tokens=600))
        except MwpError as error:
            answers.append(error.code)
        answers.append(await ctx.record_usage(ResourceUsage(model_tokens=400)))
        return await published(ctx, "spent")

    runner = runner_of(tmp_path, spend)
    outcome = await runner.run()
    assert outcome.status == "submitted"
    first, refused, last = answers
    assert first["cumulative"] == {"modelTokenLimit": 600}
    assert first["remaining"] == {"modelTokenLimit": 400}
    assert refused is ErrorCode.BUDGET_EXCEEDED
    assert last["cumulative"] == {"modelTokenLimit": 1000}
    assert runner.work_item["resourceUsage"]["remaining"] == {"modelTokenLimit": 0}


# --- resources -------------------------------------------------------------------------------


async def test_a_tool_call_outside_the_contracts_resources_is_refused_before_it_runs(
    tmp_path: Path,
) -> None:
    """Even with no token (the trusted mode), a call declaring an access the Work Contract's
    ``allowedResources`` do not pair is refused, nothing runs and nothing is charged."""
    searches: list[str] = []
    refused: list[str] = []
    repo = "urn:mwp:resource:repo"

    async def work(ctx: CapabilityContext) -> Submission:
        await ctx.tool("s:1", "search", "one", access=ResourceAccess("read", (repo,)))
        for op_id, access in (
            ("s:2", ResourceAccess("write", (repo,))),
            ("s:3", ResourceAccess("read", (repo, "urn:mwp:resource:other"))),
        ):
            try:
                await ctx.tool(op_id, "search", op_id, access=access)
            except MwpError as error:
                refused.append(error.code.value)
        return await published(ctx, "done")

    allowed = [{"resource": repo, "operations": ["read"]}]
    runner = runner_of(tmp_path, work, searching(searches), allowedResources=allowed)
    outcome = await runner.run()
    assert outcome.status == "submitted"
    assert len(searches) == 1 and refused == ["AUTH_FORBIDDEN", "AUTH_FORBIDDEN"]
    usage = [c for c in runner.commands if c.kind == USAGE]
    assert usage[-1].payload["delta"]["toolCallLimit"] == 1  # only the call that ran
