"""The declaration's values as JSON and back, in one place: what the handlers see and answer
(a decision's context and result cross Temporal as JSON) and the planned items the journal
keeps.

A context is built from JSON on the side that runs the handler; an answer is turned into JSON
there and read back on the side that applies it, so a :class:`Plan` read back is validated
again (its keys, goals, criteria) before anything is authorized from it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mwp.contracts.coordinator import (
    ON_CHANGES_REQUESTED,
    ON_MESSAGE,
    ON_PROPOSAL,
    PLAN,
    REUSE,
    REVIEW,
)
from mwp.coordinator.declaration import (
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
)

Json = dict[str, Any]
Download = Callable[[str], Awaitable[bytes]]
T = TypeVar("T")


def item_json(item: PlannedItem) -> Json:
    return {
        "key": item.key,
        "goal": item.goal,
        "criteria": list(item.criteria),
        "dependsOn": list(item.depends_on),
        "capability": list(item.capability),
        "budget": dict(item.budget) if item.budget is not None else None,
        "candidates": list(item.candidates),
        "deadlineHours": item.deadline_hours,
        "reassignTo": list(item.reassign_to),
        "child": {
            "objective": item.child.objective,
            "coordinator": item.child.coordinator,
            "definitionOfDone": list(item.child.definition_of_done),
        }
        if item.child is not None
        else None,
    }


def item_of(value: Json) -> PlannedItem:
    capability = value["capability"]
    return PlannedItem(
        value["key"],
        value["goal"],
        tuple(value["criteria"]),
        tuple(value["dependsOn"]),
        (str(capability[0]), str(capability[1])),
        value["budget"],
        tuple(value["candidates"]),
        float(value["deadlineHours"]),
        tuple(value.get("reassignTo", ())),  # absent from journals written before it
        _child(value.get("child")),
    )


def _child(value: Json | None) -> ChildMission | None:
    if value is None:
        return None
    return ChildMission(value["objective"], value["coordinator"], tuple(value["definitionOfDone"]))


def plan_json(plan: Plan) -> Json:
    return {"items": [item_json(i) for i in plan.items]}


def plan_of(value: Json) -> Plan:
    return Plan([item_of(i) for i in value["items"]])


def review_json(review: Review) -> Json:
    return {"accepted": review.accepted, "comments": review.comments, "failed": list(review.failed)}


def review_of(value: Json) -> Review:
    return Review(bool(value["accepted"]), str(value["comments"]), tuple(value["failed"]))


def proposal_answer_of(value: Json) -> PlannedItem | None:
    item = value["item"]
    return item_of(item) if item is not None else None


def source_json(source: KnowledgeSource) -> Json:
    return {"groupId": source.group_id, "contentHash": source.content_hash}


def source_of(value: Json) -> KnowledgeSource:
    return KnowledgeSource(str(value["groupId"]), str(value["contentHash"]))


def sources_of(value: Json) -> tuple[KnowledgeSource, ...]:
    """A ``reuse`` answer read back, validated again (each source's Group and hash)."""
    return tuple(source_of(s) for s in value["sources"])


def reply_of(value: Json) -> str | None:
    reply = value["reply"]
    return str(reply) if reply is not None else None


# --- contexts: what the runtime sends, what the handler sees ---------------------------------


def planning(mission: Json) -> Json:
    return {"mission": mission}


def changes(mission: Json, reason: str, work_items: list[Json]) -> Json:
    return {"mission": mission, "reason": reason, "workItems": work_items}


def proposal(mission: Json, proposal: Json) -> Json:
    return {"mission": mission, "proposal": proposal}


def review(mission: Json, work_item: Json, evidence: dict[str, list[Json]]) -> Json:
    return {"mission": mission, "workItem": work_item, "evidence": evidence}


def message(mission: Json, message: Json, work_item: Json | None) -> Json:
    return {"mission": mission, "message": message, "workItem": work_item}


def reuse(mission: Json, catalog: list[Json]) -> Json:
    return {"mission": mission, "catalog": catalog}


def context_of(handler: str, value: Json, download: Download) -> Any:
    """The context object ``handler`` is called with; ``download`` reads an Artifact."""
    mission = value["mission"]
    if handler == PLAN:
        return PlanningContext(mission)
    if handler == ON_CHANGES_REQUESTED:
        return ChangesContext(mission, value["reason"], value["workItems"])
    if handler == ON_PROPOSAL:
        return ProposalContext(mission, value["proposal"])
    if handler == REVIEW:
        return ReviewContext(mission, value["workItem"], download, value["evidence"])
    if handler == ON_MESSAGE:
        return MessageContext(mission, value["message"], value["workItem"])
    if handler == REUSE:
        return ReuseContext(mission, value["catalog"])
    raise ValueError(f"no Coordinator handler is named {handler!r}")


class InvalidAnswerError(TypeError):
    """A handler answered something other than what its decorator promises."""


def answer_json(handler: str, answer: object) -> Json:
    """``answer`` as JSON, after checking it is what ``handler`` must return."""
    if handler in (PLAN, ON_CHANGES_REQUESTED):
        return plan_json(_expect(handler, answer, Plan))
    if handler == REVIEW:
        return review_json(_expect(handler, answer, Review))
    if handler == ON_PROPOSAL:
        item = None if answer is None else _expect(handler, answer, PlannedItem)
        return {"item": item_json(item) if item is not None else None}
    if handler == REUSE:
        if isinstance(answer, str | bytes) or not isinstance(answer, list | tuple):
            raise InvalidAnswerError(f"reuse returned a {type(answer).__name__}, not a list")
        sources = [_expect(handler, s, KnowledgeSource) for s in answer]
        return {"sources": [source_json(s) for s in dict.fromkeys(sources)]}
    if answer is not None and not isinstance(answer, str):
        raise InvalidAnswerError(f"on_message returned a {type(answer).__name__}, not str | None")
    return {"reply": answer}


def _expect(handler: str, answer: object, kind: type[T]) -> T:
    if not isinstance(answer, kind):
        raise InvalidAnswerError(
            f"{handler} returned a {type(answer).__name__}, not a {kind.__name__}"
        )
    return answer
