"""MWP-IDN-003 across an upgrade of a running agent: the assignment pinned Agent Card v1 and
its capability versions; the runtime now serves card v2. A compatible upgrade (v2 still
declares every pinned capability version) continues and records the pinned card on its
Artifacts; an incompatible one gives the work back with its checkpoint, never failing silently
at publication and never running under an acceptance its card no longer honours."""

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
)
from mwp.agent.execution import INCOMPATIBLE_UPGRADE
from mwp.client import Identity
from mwp.core.trust.registry import Principal
from mwp.stores.objects import FolderObjectStore
from tests.unit.group.harness import contract

AGENT_ID = "urn:mwp:agent:acme:writer"
PINNED = {"id": "code.backend", "version": "1.0.0"}


def upgraded(version: str, *, extra: bool = False) -> Agent:
    """The agent as its new card (v2) declares it: ``code.backend`` at ``version``."""
    card = CardInfo("urn:mwp:org:acme", Principal("human", "urn:mwp:human:o"), "W", card_version=2)
    agent = Agent(AGENT_ID, Identity.generate(Principal("agent", AGENT_ID)), card=card)

    @agent.capability("code.backend", version)
    async def write(ctx: CapabilityContext) -> Submission:
        progress = Progress("writing", [], "publish", revised_estimate="2030-01-01T00:00:00Z")
        await ctx.checkpoint(progress, {"step": 1})
        report = await ctx.publish(b"done", media_type="text/plain", schema_uri="urn:x:text")
        return Submission([report], [EvidenceItem("urn:x:e:t", ["tests-pass", "reviewed"])])

    if extra:
        agent.capability("code.frontend", "1.0.0")(write)
    return agent


def runner_for(agent: Agent, tmp_path: Path) -> LocalCapabilityRunner:
    """A WorkItem accepted at Agent Card v1 with ``code.backend@1.0.0`` pinned."""
    runner = LocalCapabilityRunner(
        agent, contract(requiredCapabilities=[PINNED]), FolderObjectStore(tmp_path)
    )
    runner.group.view["owner"].update(agentCardVersion=1, capabilityPins=[PINNED])
    return runner


async def test_a_compatible_upgrade_continues_under_the_pinned_card(tmp_path: Path) -> None:
    runner = runner_for(upgraded("1.0.0", extra=True), tmp_path)
    outcome = await runner.run()
    assert outcome.status == "submitted", outcome.detail
    [publish] = [c for c in runner.commands if c.kind == "artifact.publish"]
    producer = publish.payload["manifest"]["producer"]
    assert producer["agentCardVersion"] == 1
    assert producer["capabilities"] == [PINNED]


async def test_an_incompatible_upgrade_gives_the_work_back_and_runs_nothing(
    tmp_path: Path,
) -> None:
    runner = runner_for(upgraded("1.0.0"), tmp_path)
    runner.agent = upgraded("2.0.0")  # the local runner itself wants the contract's version
    outcome = await runner.run()
    assert outcome.status == "failed"
    [command] = runner.commands  # no work.start: nothing ran under the old acceptance
    assert command.kind == "work.fail"
    assert command.payload["failureCode"] == INCOMPATIBLE_UPGRADE
    assert "pins Agent Card v1 with code.backend@1.0.0" in command.payload["reason"]
    assert "serves Agent Card v2" in command.payload["reason"]
    assert "leaseId" not in command.payload  # the item was queued: no lease to name
    assert runner.work_item["state"] == "failed"
