"""`mwp registry add-agent planner --owner ada --capability mwp.coordination@1.0.0`, then
`mwp coordinator run examples.planner:coordinator`."""

import os
from pathlib import Path

from mwp.agent import CardInfo
from mwp.client import KeyStore
from mwp.client.state_dir import organization_id_of
from mwp.coordinator import Coordinator, Plan, PlannedItem, PlanningContext, Review, ReviewContext
from mwp.core.trust.registry import Principal

STATE = Path(os.environ.get("MWP_STATE_DIR", ".mwp"))
card = CardInfo(organization_id_of(STATE), Principal("human", "urn:mwp:human:ada"), "Planner")
identity = KeyStore.in_state_dir(STATE).load("agent-planner")
coordinator = Coordinator(
    "urn:mwp:agent:planner", identity, card=card, workers=["urn:mwp:agent:writer"]
)


@coordinator.plan
async def plan(ctx: PlanningContext) -> Plan:
    return Plan(
        [
            PlannedItem("outline", f"Outline: {ctx.objective}"),
            PlannedItem("draft", f"Draft: {ctx.objective}", depends_on=["outline"]),
        ]
    )


@coordinator.review
async def review(ctx: ReviewContext) -> Review:
    text = b"".join([await ctx.artifact(digest) for digest in ctx.artifact_hashes])
    if ctx.evidence_covers_every_criterion and text.strip():
        return Review.accept("Read it; the Evidence covers every criterion.")
    return Review.reject("Empty, or a criterion has no passing Evidence.")
