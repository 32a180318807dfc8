"""Attention filters decide live delivery only (MWP-MSN-013); the pure decision."""

from __future__ import annotations

from typing import Any

from mwp.core.models.websocket_frame import Attention
from mwp.gateway.attention import wanted

ME = "urn:mwp:agent:me"
OTHER = "urn:mwp:agent:other"


def message(conversation: str = "urn:c:planning", *mentions: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"content": [{"type": "text", "text": "hi"}]}
    if mentions:
        msg["mentions"] = [{"type": "agent", "id": m} for m in mentions]
    return {"kind": "message.posted", "conversationId": conversation, "payload": {"message": msg}}


def event(kind: str, **members: Any) -> dict[str, Any]:
    return {"kind": kind, "payload": {}, **members}


def membership(kind: str, member: str) -> dict[str, Any]:
    return {"kind": kind, "payload": {"membership": {"member": {"type": "agent", "id": member}}}}


def attention(**members: Any) -> Attention:
    return Attention.model_validate(members)


def test_no_filter_and_an_empty_filter_want_everything() -> None:
    for filter_ in (None, attention()):
        assert wanted(filter_, message(), ME)
        assert wanted(filter_, event("work.authorized", workItemId="urn:w:1"), ME)


def test_each_criterion_selects_its_events_and_only_those() -> None:
    kinds = attention(eventKinds=["work.offered"])
    assert wanted(kinds, event("work.offered"), ME)
    assert not wanted(kinds, event("work.authorized"), ME)
    items = attention(workItemIds=["urn:w:1"])
    assert wanted(items, event("work.started", workItemId="urn:w:1"), ME)
    assert not wanted(items, event("work.started", workItemId="urn:w:2"), ME)
    assert not wanted(items, message(), ME)
    conversations = attention(conversationIds=["urn:c:item"])
    assert wanted(conversations, message("urn:c:item"), ME)
    assert not wanted(conversations, message("urn:c:planning"), ME)
    announcements = attention(announcements=True)
    assert wanted(announcements, event("mission.completed"), ME)
    assert not wanted(announcements, event("work.started"), ME)


def test_mentions_and_own_membership_always_pass() -> None:
    narrow = attention(eventKinds=["work.offered"])
    assert wanted(narrow, message("urn:c:planning", ME), ME)
    assert not wanted(narrow, message("urn:c:planning", OTHER), ME)
    assert wanted(narrow, membership("membership.ended", ME), ME)
    assert not wanted(narrow, membership("membership.ended", OTHER), ME)


def test_mentions_only_keeps_only_messages_naming_the_agent() -> None:
    only = attention(mentionsOnly=True)
    assert wanted(only, message("urn:c:planning", ME), ME)
    assert not wanted(only, message("urn:c:planning"), ME)
    assert wanted(only, event("work.offered"), ME)  # not a Message: no other criterion
    with_items = attention(mentionsOnly=True, conversationIds=["urn:c:item"])
    assert not wanted(with_items, message("urn:c:item"), ME)
