"""What a Coordinator's functions see and answer crosses Temporal as JSON (mwp.coordinator.codec):
every value comes back equal, a context is rebuilt for its function, an answer of the wrong
type is refused, and a decision's workflow ID is fixed by the five things that make it one."""

from __future__ import annotations

import json

import pytest

from mwp.agent.declaration import AgentDeclarationError
from mwp.contracts.coordinator import (
    ON_CHANGES_REQUESTED,
    ON_MESSAGE,
    ON_PROPOSAL,
    PLAN,
    REUSE,
    REVIEW,
    CoordinatorDecision,
    coordinator_task_queue,
    decision_workflow_id,
)
from mwp.coordinator import (
    ChangesContext,
    ChildMission,
    KnowledgeSource,
    MessageContext,
    Plan,
    PlannedItem,
    PlanningContext,
    ProposalContext,
    ReuseContext,
    Review,
    ReviewContext,
    codec,
)

MISSION = {"missionId": "urn:uuid:m", "objective": "Ship it"}
ITEM = PlannedItem(
    "notes",
    "Write the notes",
    criteria=("Readable", "Complete"),
    depends_on=("draft",),
    capability=("acme.writing", "2.0.0"),
    budget={"currency": "USD", "maxCost": "5"},
    candidates=("urn:mwp:agent:a",),
    deadline_hours=3.5,
    reassign_to=("urn:mwp:agent:b",),
    child=ChildMission("The notes", "urn:mwp:agent:c", ("Published",)),
)


def through_json(value: dict[str, object]) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(json.dumps(value))
    return loaded


def test_plans_reviews_and_answers_come_back_equal() -> None:
    plan = Plan([PlannedItem("draft", "Draft"), ITEM])
    assert codec.plan_of(through_json(codec.answer_json(PLAN, plan))) == plan
    review = Review.reject("Missing a section", failed=("criterion-2",))
    assert codec.review_of(through_json(codec.answer_json(REVIEW, review))) == review
    assert codec.proposal_answer_of(through_json(codec.answer_json(ON_PROPOSAL, ITEM))) == ITEM
    assert codec.proposal_answer_of(codec.answer_json(ON_PROPOSAL, None)) is None
    assert codec.reply_of(codec.answer_json(ON_MESSAGE, "Use Markdown.")) == "Use Markdown."
    assert codec.reply_of(codec.answer_json(ON_MESSAGE, None)) is None
    fix = KnowledgeSource("urn:uuid:g", "sha256:" + "a" * 64)
    assert codec.sources_of(through_json(codec.answer_json(REUSE, [fix, fix]))) == (fix,)
    assert codec.sources_of(codec.answer_json(REUSE, ())) == ()


async def test_each_function_gets_its_own_context_back() -> None:
    async def download(digest: str) -> bytes:
        return digest.encode()

    view = {"workItemId": "w", "submission": {"artifactHashes": ["sha256:aa"]}}
    evidence = {"criterion-1": [{"result": "passed"}]}
    contexts = {
        PLAN: codec.planning(MISSION),
        ON_CHANGES_REQUESTED: codec.changes(MISSION, "Add notes", [view]),
        ON_PROPOSAL: codec.proposal(MISSION, {"proposalId": "p"}),
        REVIEW: codec.review(MISSION, view, evidence),
        ON_MESSAGE: codec.message(MISSION, {"messageId": "x"}, None),
        REUSE: codec.reuse(MISSION, [{"groupId": "g", "artifacts": []}]),
    }
    built = {h: codec.context_of(h, through_json(c), download) for h, c in contexts.items()}
    assert built[PLAN] == PlanningContext(MISSION)
    assert built[ON_CHANGES_REQUESTED] == ChangesContext(MISSION, "Add notes", [view])
    assert built[ON_PROPOSAL] == ProposalContext(MISSION, {"proposalId": "p"})
    assert built[ON_MESSAGE] == MessageContext(MISSION, {"messageId": "x"}, None)
    assert built[REUSE] == ReuseContext(MISSION, [{"groupId": "g", "artifacts": []}])
    review = built[REVIEW]
    assert isinstance(review, ReviewContext)
    assert review.evidence_covers_every_criterion and review.artifact_hashes == ["sha256:aa"]
    assert await review.artifact("sha256:aa") == b"sha256:aa"


@pytest.mark.parametrize(
    ("handler", "answer"),
    [
        (PLAN, [ITEM]),
        (REVIEW, True),
        (ON_PROPOSAL, Plan([ITEM])),
        (ON_MESSAGE, 42),
        (REUSE, None),
        (REUSE, "sha256:aa"),
        (REUSE, [("urn:uuid:g", "sha256:aa")]),
    ],
)
def test_an_answer_of_the_wrong_type_is_refused(handler: str, answer: object) -> None:
    with pytest.raises(codec.InvalidAnswerError):
        codec.answer_json(handler, answer)


def test_a_knowledge_source_names_a_group_and_a_content_hash() -> None:
    with pytest.raises(AgentDeclarationError):
        KnowledgeSource("urn:uuid:g", "aa")
    with pytest.raises(AgentDeclarationError):
        KnowledgeSource("not an id", "sha256:" + "a" * 64)


def test_a_decisions_workflow_id_is_fixed_by_group_coordinator_epoch_function_and_key() -> None:
    parts = ("urn:uuid:g", "urn:mwp:agent:lead", 1, PLAN, "urn:uuid:m")
    wid = decision_workflow_id(*parts)
    assert wid.startswith("mwp-coordinator-decision/plan/urn:uuid:")
    assert CoordinatorDecision(*parts, context={}).workflow_id == wid  # the context is not in it
    for at, other in enumerate(("urn:uuid:h", "urn:mwp:agent:other", 2, REVIEW, "urn:uuid:n")):
        changed = list(parts)
        changed[at] = other
        assert decision_workflow_id(*changed) != wid  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        CoordinatorDecision(*parts[:3], "planner", "k", {})  # type: ignore[arg-type]
    assert coordinator_task_queue("urn:mwp:agent:lead") == "mwp-coordinator/urn:mwp:agent:lead"
