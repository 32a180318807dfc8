"""A capability unit-tested with the local runner: tools once per op_id, checkpoint and
resume after preemption, block, and a checked submission."""

from __future__ import annotations

from pathlib import Path

from mwp.agent import (
    Agent,
    CapabilityContext,
    CardInfo,
    EvidenceItem,
    LocalCapabilityRunner,
    Progress,
    Submission,
    tool_key,
)
from mwp.client import Identity
from mwp.core.trust.registry import Principal
from mwp.stores.objects import FolderObjectStore
from tests.unit.group.harness import contract

AGENT_ID = "urn:mwp:agent:acme:writer"
CAPABILITY = {"id": "code.backend", "version": "1.0.0"}  # what the harness contract requires


def writer(searches: list[str]) -> Agent:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    agent = Agent(
        AGENT_ID,
        identity,
        card=CardInfo(
            "urn:mwp:organization:acme", Principal("human", "urn:mwp:human:olivia"), "Writer"
        ),
    )

    @agent.tool("search")
    async def search(query: str, *, idempotency_key: str) -> str:
        searches.append(idempotency_key)
        return f"found {query}"

    @agent.capability(CAPABILITY["id"], CAPABILITY["version"])
    async def write(ctx: CapabilityContext) -> Submission:
        found = await ctx.tool("search:q1", "search", "pagination")
        step = ctx.resume_state or 0
        while step < 2:
            step += 1
            await ctx.checkpoint(
                Progress(
                    f"step {step}",
                    ["searched"],
                    "next step",
                    revised_estimate="2026-07-16T00:00:00Z",
                ),
                state=step,
            )
        if "blocked" in ctx.contract["goal"]:
            await ctx.block("need access to the billing API")
        content = await ctx.publish(
            found.encode(), media_type="text/plain", schema_uri="urn:mwp:schema:text"
        )
        return Submission(
            [content],
            [
                EvidenceItem("urn:x:e:tests", ["tests-pass"]),
                EvidenceItem("urn:x:e:review", ["reviewed"]),
            ],
        )

    return agent


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
    done = await runner.run()  # resumes at step 1, same Ownership Epoch
    assert done.status == "submitted" and done.command.kind == "work.submit"
    kinds = [c.kind for c in runner.commands]
    assert kinds == [
        "work.checkpoint",
        "ext.missionweaveprotocol.core.execution_lease_renew",
        "artifact.publish",
        "work.submit",
    ]
    key = tool_key(runner.mission_id, runner.work_item_id, 1, "search:q1")
    assert searches == [key]  # the search ran once and received its idempotency key


async def test_a_blocked_capability_records_its_required_resolution(tmp_path: Path) -> None:
    runner = LocalCapabilityRunner(
        writer([]),
        contract(requiredCapabilities=[CAPABILITY], goal="A blocked goal."),
        FolderObjectStore(tmp_path),
    )
    outcome = await runner.run()
    assert outcome.status == "blocked"
    assert outcome.command.payload["requiredResolution"] == "need access to the billing API"
