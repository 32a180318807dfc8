"""An Agent for the agent runtime tests: a capability of several checkpointed steps, each
with one external effect, that can be held at a step by the test.

``build(agent_id, identity, organization_id)`` declares one in-process; the module attribute
``agent`` is the one ``mwp agent run tests.integration.runtime_agent:agent`` serves, configured
by ``MWP_TEST_AGENT_ID``, ``MWP_TEST_AGENT_ORG`` and ``MWP_TEST_AGENT_KEY_DIR`` (as in
``tool_agent``). The "external system" is ``MWP_TEST_TOOL_EFFECTS`` (see ``tool_agent``):
each step's effect is a file named by its idempotency key. While ``<effects>/hold`` exists a
run waits before its next step (after its checkpoint), so a test can kill or preempt it at a
known safe point; while ``<effects>/hold-submit`` exists it waits before submitting;
``<effects>/runs.log`` gets one line per run start with the state it resumed from.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mwp.agent import (
    Agent,
    CapabilityContext,
    CapabilityFailure,
    CardInfo,
    EvidenceItem,
    Progress,
    Submission,
)
from mwp.client import Identity, KeyStore
from mwp.core.trust.registry import Principal
from tests.integration import tool_agent

STEPS = 3
KEY_NAME = "agent-runtime-tester"


def effects_dir() -> Path:
    return Path(os.environ["MWP_TEST_TOOL_EFFECTS"])


def _log_run(item: str, resumed: object) -> None:
    root = effects_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / "runs.log").open("a") as f:
        f.write(json.dumps({"item": item, "resumed": resumed}) + "\n")


def runs(root: Path) -> list[dict[str, object]]:
    log = root / "runs.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def _held(name: str = "hold") -> None:
    while (effects_dir() / name).exists():
        await asyncio.sleep(0.1)


def _first_time(item: str, what: str) -> bool:
    """True the first time ``what`` happens to ``item`` (a marker in the effects folder)."""
    marker = effects_dir() / f"{what}-{item.rsplit(':', 1)[-1]}"
    if marker.exists():
        return False
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return True


def build(
    agent_id: str, identity: Identity, organization_id: str, slots: int = 1, steps: int = STEPS
) -> Agent:
    agent = Agent(
        agent_id,
        identity,
        card=CardInfo(organization_id, Principal("human", "urn:mwp:human:tester"), "Stepper"),
        max_concurrency=slots,
    )
    agent.tool("effect")(tool_agent.effect)

    @agent.capability("mwp.dev.general", "1.0.0")
    async def run_steps(ctx: CapabilityContext) -> Submission:
        state = ctx.resume_state or {"next": 0}
        _log_run(ctx.work_item_id, ctx.resume_state)
        # Every run repeats this op ID: the ledger answers all but the first.
        await ctx.tool("prepare", "effect", f"{ctx.work_item_id}#prepare")
        goal = ctx.contract["goal"]
        if "flaky" in goal and _first_time(ctx.work_item_id, "flaky"):
            raise CapabilityFailure("the source timed out", code="TRANSIENT_TOOL_FAILURE")
        if "broken" in goal:
            raise ValueError("the input cannot be parsed")
        if "blocked" in goal and _first_time(ctx.work_item_id, "blocked"):
            await ctx.block("needs the customer's data export")
        for step in range(int(state["next"]), steps):
            await ctx.tool(f"step-{step}", "effect", f"{ctx.work_item_id}#{step}")
            await ctx.checkpoint(
                Progress(
                    f"step {step}",
                    [f"step {step} done"],
                    f"step {step + 1}",
                    revised_estimate=datetime.now(UTC) + timedelta(minutes=1),
                ),
                {"next": step + 1},
            )
            await _held()
        inputs = [await ctx.read_artifact(h) for h in ctx.input_artifacts]  # hash-checked
        content = await ctx.publish(
            b" | ".join([f"done: {ctx.contract['goal']}".encode(), *inputs]),
            media_type="text/plain",
            schema_uri="urn:mwp:schema:text",
        )
        evidence = [
            EvidenceItem(f"{ctx.work_item_id}:evidence:{c['criterionId']}", [c["criterionId"]])
            for c in ctx.contract["acceptanceCriteria"]
        ]
        await _held("hold-submit")  # published, about to submit
        return Submission([content], evidence)

    return agent


def _identity(agent_id: str) -> Identity:
    principal = Principal("agent", agent_id)
    key_dir = os.environ.get("MWP_TEST_AGENT_KEY_DIR")
    if not key_dir:
        return Identity.generate(principal)
    keys = KeyStore(Path(key_dir))
    if not keys.exists(KEY_NAME):
        keys.save(KEY_NAME, Identity.generate(principal))
    return keys.load(KEY_NAME)


_AGENT_ID = os.environ.get("MWP_TEST_AGENT_ID", "urn:mwp:agent:runtime-tester")
agent = build(
    _AGENT_ID,
    _identity(_AGENT_ID),
    os.environ.get("MWP_TEST_AGENT_ORG", "urn:mwp:organization:dev"),
)
