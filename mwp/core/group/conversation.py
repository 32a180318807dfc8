"""Conversations and Messages (spec 9): append-only context that never authorizes anything.

A Message changes only its Conversation's revision and the recent-Message window: no handler
here reads or writes a WorkItem, the Mission or a lease (invariant 2). Corrections,
retractions and redactions are new Messages naming their target; the target's text is never
rewritten. Redaction needs an auditable policy reason and the MissionOwner, the Coordinator or
Organization policy.
"""

from __future__ import annotations

from typing import Any

from mwp.core.group.api import AuthorityContext
from mwp.core.group.conversation_window import MessageEntry
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import message_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import Members, members
from mwp.core.group.rejection import bad_transition, forbidden, invalid
from mwp.core.group.roles import anyone, coordinator_owner_or_service, members_only
from mwp.core.group.rules import CommandRule, Target, by_agent
from mwp.core.group.state import Conversation, GroupState
from mwp.core.group.work_contract import wire_form
from mwp.core.kinds import CommandKind
from mwp.core.models import DocumentInvalid, validate_document

Json = dict[str, Any]

_RETRACTED = [{"type": "text", "text": "This Message was retracted by its author."}]
_REDACTED = [{"type": "text", "text": "This Message was redacted under Organization policy."}]


def _conversation(state: GroupState, cmd: Incoming) -> Conversation:
    mission = state.mission
    assert mission is not None
    conversation_id = cmd.conversation_id or mission.main_conversation_id
    conversation = state.conversations.get(conversation_id)
    if conversation is None:
        invalid("no such Conversation in this Group", conversationId=conversation_id)
    return conversation


def _conversation_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    mission = state.mission
    if mission is None:
        return None
    conversation = state.conversations.get(cmd.conversation_id or mission.main_conversation_id)
    return ("Conversation", conversation.revision) if conversation else None


def _amendment_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    target = cmd.payload.raw("targetMessageId") if cmd.payload.has("targetMessageId") else None
    entry = state.messages.get(target) if isinstance(target, str) else None
    conversation = state.conversations.get(entry.conversation_id) if entry else None
    return ("Conversation", conversation.revision) if conversation else None


def _may_post_provisionally(state: GroupState, cmd: Incoming, conversation: Conversation) -> bool:
    """A Worker with a just-in-time Membership talks only in the Conversation of the WorkItem
    it is offered or owns (spec 8: scoped provisional Membership)."""
    item = state.work_items.get(conversation.primary_work_item_id or "")
    if item is None:
        return False
    if item.owner is not None and item.owner.agent_id == cmd.actor_id:
        return True
    return any(o.agent_id == cmd.actor_id and o.status == "pending" for o in item.offers)


def _message(
    state: GroupState,
    cmd: Incoming,
    ctx: AuthorityContext,
    drafts: Drafts,
    *,
    kind: str,
    conversation_id: str,
    content: Any,
    target: str | None = None,
    reason: str | None = None,
) -> Json:
    doc: Json = {
        "messageId": message_id(state.group_id, drafts.next_sequence),
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "conversationId": conversation_id,
        "author": cmd.actor,
        "kind": kind,
        "authority": False,
        "content": content,
        "committedAt": ctx.now,
    }
    p = cmd.payload
    for member in ("mentions", "references"):
        if p.has(member):
            doc[member] = p.raw(member)
    if target is not None:
        doc["targetMessageId"] = target
    if reason is not None:
        doc["reason"] = reason
    try:
        model = validate_document("message.schema.json", doc)
    except DocumentInvalid as exc:
        invalid(f"the Message is invalid: {exc.reason}", reason=exc.reason)
    return wire_form(model, "payload.content")


def _post(
    state: GroupState, drafts: Drafts, event_kind: str, conversation_id: str, message: Json
) -> None:
    drafts.add(
        event_kind,
        ("conversation", conversation_id),
        {"message": message},
        conversation_id=conversation_id,
    )


# --- message.post --------------------------------------------------------------------------------


def _decide_post(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    conversation = _conversation(state, cmd)
    member = state.memberships.get(cmd.actor_id)
    provisional = member is not None and member.state == "provisional"
    if provisional and not _may_post_provisionally(state, cmd, conversation):
        forbidden("a provisional Member posts only in its offered WorkItem's Conversation")
    message = _message(
        state,
        cmd,
        ctx,
        drafts,
        kind="message",
        conversation_id=conversation.conversation_id,
        content=cmd.payload.raw("content"),
    )
    _post(state, drafts, "message.posted", conversation.conversation_id, message)


def _evolve_message(status: str | None) -> Any:
    def evolve(state: GroupState, event: Json) -> None:
        message = event["payload"]["message"]
        conversation = state.conversations[message["conversationId"]]
        conversation.revision = event["aggregateRevision"]
        author = (message["author"]["type"], message["author"]["id"])
        if message["kind"] in ("message", "correction"):
            # Posts and corrections are themselves amendable (and redactable) later.
            entry = MessageEntry(event["sequence"], author, conversation.conversation_id, "posted")
            state.messages.add(message["messageId"], entry)
        target = state.messages.get(message.get("targetMessageId", ""))
        if status is not None and target is not None:
            target.status = status

    return evolve


# --- message.correct / message.retract / message.redact ------------------------------------------
# Their Events are evolved by _evolve_message, in the message.post section above.


def _target(state: GroupState, cmd: Incoming, *, own: bool) -> tuple[str, MessageEntry]:
    target = cmd.payload.id("targetMessageId")
    entry = state.messages.get(target)
    if entry is None:
        invalid(
            "the target Message is unknown or older than the amendment window",
            targetMessageId=target,
        )
    if own and entry.author != (cmd.actor_type, cmd.actor_id):
        forbidden("only a Message's author may correct or retract it")
    if entry.status in ("retracted", "redacted") and cmd.kind != "message.redact":
        bad_transition("Message", entry.status, cmd.kind)
    if entry.status == "redacted":
        bad_transition("Message", entry.status, cmd.kind)
    return target, entry


def _decide_correct(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    target, entry = _target(state, cmd, own=True)
    message = _message(
        state,
        cmd,
        ctx,
        drafts,
        kind="correction",
        conversation_id=entry.conversation_id,
        content=cmd.payload.raw("content"),
        target=target,
        reason=cmd.payload.text("reason"),
    )
    _post(state, drafts, "message.corrected", entry.conversation_id, message)


def _decide_retract(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    target, entry = _target(state, cmd, own=True)
    message = _message(
        state,
        cmd,
        ctx,
        drafts,
        kind="retraction",
        conversation_id=entry.conversation_id,
        content=_RETRACTED,
        target=target,
        reason=cmd.payload.text("reason"),
    )
    _post(state, drafts, "message.retracted", entry.conversation_id, message)


def _decide_redact(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    target, entry = _target(state, cmd, own=False)
    p = cmd.payload
    reason = p.text("reason")
    policy = p.text("policy", max_length=200)
    message = _message(
        state,
        cmd,
        ctx,
        drafts,
        kind="redaction",
        conversation_id=entry.conversation_id,
        content=_REDACTED,
        target=target,
        reason=f"{policy}: {reason}"[:4000],
    )
    _post(state, drafts, "message.redacted", entry.conversation_id, message)


def _rule(
    kind: CommandKind,
    decide: Any,
    authorize: Any,
    target: Target,
    *,
    payload: Members,
    clauses: tuple[str, ...],
) -> CommandRule:
    return CommandRule(
        kind,
        decide,
        authorize,
        target=target,
        provisional_ok=True,
        payload=payload,
        clauses=clauses,
    )


RULES = (
    _rule(
        "message.post",
        _decide_post,
        anyone,
        _conversation_target,
        payload=members("content", "mentions", "references"),
        clauses=("MWP-FND-014", "MWP-MSN-017", "MWP-MSN-018"),
    ),
    _rule(
        "message.correct",
        _decide_correct,
        members_only,
        _amendment_target,
        payload=members("targetMessageId", "reason", "content", "mentions", "references"),
        clauses=("MWP-FND-014", "MWP-MSN-017", "MWP-MSN-023"),
    ),
    _rule(
        "message.retract",
        _decide_retract,
        members_only,
        _amendment_target,
        payload=members("targetMessageId", "reason", "mentions", "references"),
        clauses=("MWP-FND-014", "MWP-MSN-017", "MWP-MSN-023"),
    ),
    CommandRule(
        "message.redact",
        _decide_redact,
        coordinator_owner_or_service,
        target=_amendment_target,
        coordinator=by_agent,
        payload=members("targetMessageId", "reason", "policy", "mentions", "references"),
        clauses=("MWP-EVT-002", "MWP-FND-014", "MWP-MSN-017", "MWP-MSN-023"),
    ),
)

EVOLVERS = {
    "message.posted": _evolve_message(None),
    "message.corrected": _evolve_message("corrected"),
    "message.retracted": _evolve_message("retracted"),
    "message.redacted": _evolve_message("redacted"),
}
