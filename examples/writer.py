"""`mwp registry add-agent writer --owner ada`, then `mwp agent run examples.writer:agent`."""

import os
from pathlib import Path

from mwp.agent import Agent, CapabilityContext, CardInfo, EvidenceItem, Progress, Submission
from mwp.client import KeyStore
from mwp.client.state_dir import organization_id_of
from mwp.core.trust.registry import Principal

STATE = Path(os.environ.get("MWP_STATE_DIR", ".mwp"))
card = CardInfo(organization_id_of(STATE), Principal("human", "urn:mwp:human:ada"), "Writer")
agent = Agent("urn:mwp:agent:writer", KeyStore.in_state_dir(STATE).load("agent-writer"), card=card)


@agent.tool("outline")
async def outline(topic: str, *, idempotency_key: str) -> list[str]:
    return [f"Why {topic}", f"How {topic}"]  # an external API would get idempotency_key


@agent.capability("mwp.dev.general", "1.0.0")
async def write(ctx: CapabilityContext) -> Submission:
    sections = await ctx.tool("outline", "outline", ctx.contract["goal"])  # once per op ID
    done = Progress("drafting", ["outlined"], "publish", revised_estimate="2030-01-01T00:00:00Z")
    await ctx.checkpoint(done, {"sections": sections})  # a safe point to preempt and resume
    text = "\n".join(sections).encode()
    report = await ctx.publish(text, media_type="text/plain", schema_uri="urn:mwp:schema:text")
    criteria = [c["criterionId"] for c in ctx.contract["acceptanceCriteria"]]
    return Submission([report], [EvidenceItem(f"{ctx.work_item_id}:evidence", criteria)])
