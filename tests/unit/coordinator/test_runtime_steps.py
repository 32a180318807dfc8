"""The Coordinator runtime's steps against the pure Group Authority (the harness stands where
the gateway and the MissionWorkflow are): the Commands it signs for a plan, offers, reviews, a
Work Proposal and the submission are ones the Authority accepts, and a Group moves to Approval
with no other Command than the Worker's own. A replacement appointed from the hand-over package
the first runtime published takes the Group to Approval without planning or authorizing."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from mwp.agent import CardInfo
from mwp.client import Identity
from mwp.contracts.errors import RemoteMwpError
from mwp.coordinator import (
    Coordinator,
    KnowledgeSource,
    MessageContext,
    Plan,
    PlannedItem,
    PlanningContext,
    ProposalContext,
    ReuseContext,
    Review,
    ReviewContext,
)
from mwp.coordinator.decisions import Handlers, InProcessDecisions
from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.remaining_plan import remaining_plan
from mwp.coordinator.runtime import CoordinatorRuntime
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.api import RULES_CONTEXT
from mwp.core.group.context_package import PUBLISH_KIND, PUBLISHED_KIND
from mwp.core.group.knowledge import IMPORT_KIND, IMPORTED_KIND
from mwp.core.trust.registry import Principal
from mwp.core.wire.ed25519 import SigningKey
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    COORD2,
    KEYS_VALID_FROM,
    OWNER,
    W1,
    Harness,
    item_id,
    mission_harness,
)
from tests.unit.group.test_knowledge_reuse import import_payload as reuse_payload

CAPABILITY = ("acme.software.python", "2.1.0")  # what the harness's worker declares


class PureLink:
    """A gateway link whose Commands the harness's Group Authority decides at once."""

    def __init__(self, h: Harness, agent: Principal = COORD) -> None:
        self.h = h
        self.session_epoch = h.sessions[agent.id]
        self.sent: list[dict[str, Any]] = []
        self.closed = asyncio.Event()

    async def command(self, command: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.sent.append(dict(command))
        return list(self.h.send(dict(command)).events)

    async def performance_records(self, agent_id: str, capability: str | None = None) -> Any:
        # A gateway that serves no Registry records: the runtime offers on its own.
        raise MwpError(ErrorCode.INTERNAL_ERROR, "no Registry records here")


def coordinator(agent: Principal = COORD) -> Coordinator:
    key_id = "urn:example:key:" + agent.id.rsplit(":", 1)[-1]
    c = Coordinator(
        agent.id,
        # The key the harness's Registry evidence (and First Admission) knows the agent by.
        Identity(agent, key_id, SigningKey.generate(), KEYS_VALID_FROM),
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


def in_process(c: Coordinator) -> InProcessDecisions:
    """The functions called in the test's task: no Temporal here (the integration tests run
    them as activities)."""

    async def no_artifacts(group_id: str, digest: str) -> bytes:
        raise AssertionError("the harness serves no Artifacts")

    return InProcessDecisions(Handlers(c, no_artifacts))


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
    c = coordinator()
    rt = CoordinatorRuntime(
        c,
        cast(Any, PureLink(h)),
        PlanJournal(tmp_path),
        report=lines.append,
        clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
        id_of=lambda group, key: item_id(key),
        decisions=in_process(c),
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
    # The submission, then the hand-over package that cites the last verification.
    assert kinds[-2:] == ["mission.submit_for_approval", PUBLISH_KIND]
    assert all(c["actor"]["id"] == COORD.id for c in cast(PureLink, rt.link).sent)


async def test_a_question_is_answered_once_in_its_conversation_even_after_a_restart(
    tmp_path: Path,
) -> None:
    h = mission_harness()
    journal = PlanJournal(tmp_path)

    def fresh() -> CoordinatorRuntime:
        c = coordinator()
        return CoordinatorRuntime(
            c,
            cast(Any, PureLink(h)),
            journal,
            report=lambda line: None,
            clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
            id_of=lambda group, key: item_id(key),
            decisions=in_process(c),
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


def runtime_of(h: Harness, agent: Principal, journal: PlanJournal, lines: list[str]) -> Any:
    c = coordinator(agent)
    return CoordinatorRuntime(
        c,
        cast(Any, PureLink(h, agent)),
        journal,
        report=lines.append,
        clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
        id_of=lambda group, key: item_id(key),
        decisions=in_process(c),
    )


async def test_a_replacement_takes_over_from_the_latest_package_and_finishes_without_planning(
    tmp_path: Path,
) -> None:
    h = mission_harness()
    a_lines: list[str] = []
    a = runtime_of(h, COORD, PlanJournal(tmp_path / "a"), a_lines)
    await settle(a, h)
    work(h, "analyse")
    await settle(a, h)
    assert h.view("analyse")["state"] == "verified" and h.view("build")["state"] == "offered"
    packages = [e["payload"]["contextPackage"] for e in h.events if e["kind"] == PUBLISHED_KIND]
    # One carrying the plan before it was authorized, one once it was, one when "analyse" was
    # verified; none on other ticks.
    assert [p["version"] for p in packages] == [1, 2, 3]
    assert a.journal.handover(h.group_id).context_package_id == packages[-1]["contextPackageId"]
    await settle(a, h)
    assert len([e for e in h.events if e["kind"] == PUBLISHED_KIND]) == 3

    latest = packages[-1]["contextPackageId"]
    h.submit(
        OWNER, "mission.assign_coordinator", {"agentId": COORD2.id, "contextPackageId": latest}
    )
    b_lines: list[str] = []
    b_journal = PlanJournal(tmp_path / "b")
    b = runtime_of(h, COORD2, b_journal, b_lines)

    async def never(ctx: PlanningContext) -> Plan:
        raise AssertionError("a replacement must not plan the Mission again")

    b.coordinator.planner = never
    await settle(b, h)
    (line,) = [line for line in b_lines if "took over" in line]
    assert f"from Context Package {latest}" in line and "Coordinator Epoch 2" in line
    work(h, "build")
    await settle(b, h)
    assert h.view("build")["state"] == "verified"
    # A restarted replacement reads its journal: it neither takes over nor plans again.
    b = runtime_of(h, COORD2, b_journal, b_lines)
    b.coordinator.planner = never
    await settle(b, h)
    assert len([line for line in b_lines if "took over" in line]) == 1

    assert h.authority.mission_view()["state"] == "awaiting_approval"
    sent = cast(PureLink, b.link).sent
    assert "work.authorize" not in [c["kind"] for c in sent]
    assert all(c["actor"]["id"] == COORD2.id for c in sent)
    authorized = [e["workItemId"] for e in h.events if e["kind"] == "work.authorized"]
    assert authorized == [item_id("analyse"), item_id("build")]  # each once, by A
    await settle(a, h)  # the former Coordinator says so once and sends nothing
    assert a_lines[-1].endswith("another Coordinator took over")


async def test_a_group_that_refuses_hand_over_packages_is_still_coordinated(
    tmp_path: Path,
) -> None:
    """Under rules from before Context Packages the Authority refuses every package: the
    refusal is said once per package (the one carrying the plan, the one once it is
    authorized) and holds up neither the authorizations nor an offer."""
    h = mission_harness()
    h.rules = RULES_CONTEXT - 1
    lines: list[str] = []
    rt = runtime_of(h, COORD, PlanJournal(tmp_path), lines)
    await settle(rt, h)
    await settle(rt, h)
    assert h.view("analyse")["state"] == "offered"
    refused = [line for line in lines if "PublishHandover" in line]
    assert len(refused) == 2, lines
    await settle(rt, h)
    assert len([line for line in lines if "PublishHandover" in line]) == 2
    assert not [e for e in h.events if e["kind"] == PUBLISHED_KIND]


async def test_a_replacement_continues_the_plan_its_predecessor_published_but_never_authorized(
    tmp_path: Path,
) -> None:
    """A plans, publishes its plan as the package's remaining plan and stops before it
    authorizes anything: B adopts the plan from that package, authorizes each item once under
    A's WorkItem IDs and takes the Mission to Approval without planning; restarted, it
    authorizes nothing again."""
    h = mission_harness()
    a_lines: list[str] = []
    a = runtime_of(h, COORD, PlanJournal(tmp_path / "a"), a_lines)
    for _ in range(2):  # its plan, then the package carrying it; then A stops
        for event in h.events:
            a.follow(event)
        for group in list(a.groups.values()):
            await a._reconcile(group)
    assert "work.authorize" not in [c["kind"] for c in cast(PureLink, a.link).sent]
    (published,) = [e for e in h.events if e["kind"] == PUBLISHED_KIND]
    package = published["payload"]["contextPackage"]
    assert "carries 2 planned WorkItems before they are authorized" in a_lines[-1], a_lines
    carried = remaining_plan(package)
    ids = (item_id("analyse"), item_id("build"))
    assert tuple(r.work_item_id for r in carried) == ids
    assert a.journal.handover(h.group_id).remaining == ids  # as journaled, remaining plan and all

    h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": package["contextPackageId"]},
    )
    b_lines: list[str] = []
    b_journal = PlanJournal(tmp_path / "b")

    async def never(ctx: PlanningContext) -> Plan:
        raise AssertionError("a replacement must not plan the Mission again")

    b = runtime_of(h, COORD2, b_journal, b_lines)
    b.coordinator.planner = never
    await settle(b, h)
    (line,) = [line for line in b_lines if "took over" in line]
    assert "adopted 2 WorkItems (2 planned)" in line, line
    (adopted,) = b_journal.plans(h.group_id)  # a restart authorizes with the same contracts
    assert adopted.adopted == ids and adopted.contracts == tuple(r.contract for r in carried)
    for key in ("analyse", "build"):
        work(h, key)
        b = runtime_of(h, COORD2, b_journal, b_lines)  # restarted: its journal, not the package
        b.coordinator.planner = never
        await settle(b, h)
    assert h.authority.mission_view()["state"] == "awaiting_approval"
    authorized = [
        (e["workItemId"], e["actor"]["id"]) for e in h.events if e["kind"] == "work.authorized"
    ]
    assert authorized == [(item_id("analyse"), COORD2.id), (item_id("build"), COORD2.id)]
    assert len([line for line in b_lines if "took over" in line]) == 1


class PolicyLink(PureLink):
    """A link whose gateway approves the imports of ``approved`` (content hash: the import
    payload) and refuses any other as the Knowledge Reuse Policy does."""

    def __init__(self, h: Harness, approved: dict[str, dict[str, Any]]) -> None:
        super().__init__(h)
        self.approved = approved
        self.asked: list[str] = []

    async def knowledge_import(
        self, group_id: str, source_group_id: str, content_hash: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        assert group_id == self.h.group_id
        self.asked.append(content_hash)
        payload = self.approved.get(content_hash)
        if payload is None:
            raise RemoteMwpError(
                {"code": "AUTH_FORBIDDEN", "message": "Not approved.", "retryable": False}
            )
        return payload["manifest"], payload["approval"]


async def test_the_runtime_imports_what_reuse_names_once_and_leaves_a_refused_one(
    tmp_path: Path,
) -> None:
    h = mission_harness()
    payload = reuse_payload(h)
    fix = KnowledgeSource(payload["manifest"]["groupId"], payload["manifest"]["contentHash"])
    refused = KnowledgeSource(fix.group_id, "sha256:" + "b" * 64)
    asked: list[ReuseContext] = []
    c = coordinator()

    @c.reuse
    async def reuse(ctx: ReuseContext) -> list[KnowledgeSource]:
        asked.append(ctx)
        return [fix, refused]

    journal = PlanJournal(tmp_path)
    lines: list[str] = []

    def runtime() -> CoordinatorRuntime:
        return CoordinatorRuntime(
            c,
            cast(Any, PolicyLink(h, {fix.content_hash: payload})),
            journal,
            report=lines.append,
            clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
            id_of=lambda group, key: item_id(key),
            decisions=in_process(c),
        )

    rt = runtime()
    await settle(rt, h)
    await settle(rt, h)
    link = cast(PolicyLink, rt.link)
    imported = [e for e in h.events if e["kind"] == IMPORTED_KIND]
    assert len(imported) == 1 and imported[0]["actor"]["id"] == COORD.id
    assert imported[0]["payload"]["contentHash"] == fix.content_hash
    assert [s["kind"] for s in link.sent].count(IMPORT_KIND) == 1
    # The refused source was asked for once in this run, reported, and nothing recorded.
    assert link.asked.count(refused.content_hash) == 1
    assert any("ImportKnowledge refused: AUTH_FORBIDDEN" in line for line in lines), lines
    assert len(asked) == 1 and asked[0].mission["missionId"] == h.authority.mission_id
    # Planning went on meanwhile.
    assert h.authority.work_item_view(item_id("analyse"))["state"] == "offered"

    # Restarted: reuse is not asked again and what the Group holds is not imported again.
    again = runtime()
    await settle(again, h)
    assert len(asked) == 1
    assert fix.content_hash not in cast(PolicyLink, again.link).asked
    assert len([e for e in h.events if e["kind"] == IMPORTED_KIND]) == 1
