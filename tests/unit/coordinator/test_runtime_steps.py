"""The Coordinator runtime's steps against the pure Group Authority (the harness stands where
the gateway and the MissionWorkflow are): the Commands it signs for a plan, offers, reviews, a
Work Proposal and the submission are ones the Authority accepts, and a Group moves to Approval
with no other Command than the Worker's own."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from mwp.agent import CardInfo
from mwp.client import Identity
from mwp.coordinator import (
    Coordinator,
    MessageContext,
    Plan,
    PlannedItem,
    PlanningContext,
    ProposalContext,
    Review,
    ReviewContext,
)
from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.runtime import CoordinatorRuntime
from mwp.core.wire.ed25519 import SigningKey
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    KEYS_VALID_FROM,
    W1,
    Harness,
    item_id,
    mission_harness,
)

CAPABILITY = ("acme.software.python", "2.1.0")  # what the harness's worker declares


class PureLink:
    """A gateway link whose Commands the harness's Group Authority decides at once."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.session_epoch = h.sessions[COORD.id]
        self.sent: list[dict[str, Any]] = []

    async def command(self, command: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.sent.append(dict(command))
        return list(self.h.send(dict(command)).events)


def coordinator() -> Coordinator:
    c = Coordinator(
        COORD.id,
        # The key the harness's Registry evidence (and First Admission) knows COORD by.
        Identity(COORD, "urn:example:key:coordinator", SigningKey.generate(), KEYS_VALID_FROM),
        card=CardInfo("urn:example:organization:acme", COORD, "Planner"),
        workers=[W1.id],
    )

    @c.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return Plan(
            [
                PlannedItem("analyse", "Analyse", capability=CAPABILITY),
                PlannedItem("build", "Build", depends_on=["analyse"], capability=CAPABILITY),
            ]
        )

    @c.review
    async def review(ctx: ReviewContext) -> Review:
        return Review.accept() if ctx.evidence_covers_every_criterion else Review.reject("No.")

    @c.on_message
    async def answer(ctx: MessageContext) -> str | None:
        if "?" not in ctx.text:
            return None
        about = ctx.work_item["contract"]["goal"] if ctx.work_item else "the Mission"
        return f"About {about}: use Markdown."

    @c.on_proposal
    async def proposal(ctx: ProposalContext) -> PlannedItem | None:
        return PlannedItem("bench", str(ctx.proposal["title"]), capability=CAPABILITY)

    return c


async def settle(rt: CoordinatorRuntime, h: Harness) -> None:
    """Let the runtime follow the log and decide until it has nothing more to do."""
    for _ in range(20):
        for event in h.events:
            rt.follow(event)
        before = len(cast(PureLink, rt.link).sent), rt.steps_taken
        for group in list(rt.groups.values()):
            await rt._reconcile(group)
        if (len(cast(PureLink, rt.link).sent), rt.steps_taken) == before:
            return


def work(h: Harness, key: str) -> None:
    from tests.unit.coordinator.test_reconcile import work as worked

    worked(h, key)


async def test_the_runtime_takes_a_group_to_approval_with_the_authoritys_consent(
    tmp_path: Path,
) -> None:
    h = mission_harness()
    lines: list[str] = []
    rt = CoordinatorRuntime(
        coordinator(),
        cast(Any, PureLink(h)),
        PlanJournal(tmp_path),
        report=lines.append,
        clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
        id_of=lambda group, key: item_id(key),
    )
    await settle(rt, h)
    analyse = item_id("analyse")
    assert h.authority.work_item_view(analyse)["state"] == "offered", lines
    assert "planned 2 WorkItems" in lines[0]

    # A Worker's proposal is taken as a WorkItem citing it.
    h.submit(W1, "work.propose", {"title": "Add a benchmark"})
    await settle(rt, h)
    bench = h.authority.work_item_view(item_id("bench"))
    assert bench["contract"]["goal"] == "Add a benchmark"
    assert h.authority.mission_view()["proposals"] == []

    for key in ("analyse", "bench", "build"):
        await settle(rt, h)
        work(h, key)
        await settle(rt, h)
        assert h.view(key)["state"] == "verified"

    mission = h.authority.mission_view()
    assert mission["state"] == "awaiting_approval"
    assert mission["submission"]["artifactHashes"] == [ARTIFACT_A]
    kinds = [c["kind"] for c in cast(PureLink, rt.link).sent]
    assert kinds.count("work.authorize") == 3 and kinds.count("work.accept_result") == 3
    assert kinds[-1] == "mission.submit_for_approval"
    assert all(c["actor"]["id"] == COORD.id for c in cast(PureLink, rt.link).sent)


async def test_a_question_is_answered_once_in_its_conversation_even_after_a_restart(
    tmp_path: Path,
) -> None:
    h = mission_harness()
    journal = PlanJournal(tmp_path)

    def fresh() -> CoordinatorRuntime:
        return CoordinatorRuntime(
            coordinator(),
            cast(Any, PureLink(h)),
            journal,
            report=lambda line: None,
            clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
            id_of=lambda group, key: item_id(key),
        )

    await settle(fresh(), h)
    conversation = h.view("analyse")["conversationId"]
    asked = h.submit(
        W1,
        "message.post",
        {"content": [{"type": "text", "text": "Which format?"}]},
        conversationId=conversation,
    )
    h.submit(W1, "message.post", {"content": [{"type": "text", "text": "Started."}]})
    question = asked.events[0]["payload"]["message"]["messageId"]
    rt = fresh()
    await settle(rt, h)

    replies = [
        e for e in h.events if e["kind"] == "message.posted" and e["actor"]["id"] == COORD.id
    ]
    (reply,) = replies  # "Started." asks nothing: no reply
    assert reply["conversationId"] == conversation
    message = reply["payload"]["message"]
    assert message["content"] == [{"type": "text", "text": "About Analyse: use Markdown."}]
    assert message["references"] == [question]
    assert question in journal.answered(h.group_id)
    # A restarted runtime reads the same log and answers nothing again.
    await settle(fresh(), h)
    assert (
        len([e for e in h.events if e["actor"]["id"] == COORD.id and e["kind"] == "message.posted"])
        == 1
    )
