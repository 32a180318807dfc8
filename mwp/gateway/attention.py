"""Attention filters of a SUBSCRIBE: which live Events an Agent wants to be woken for.

A filter narrows live delivery only (MWP-MSN-013): replay after ``afterSequence`` is filtered by
Membership alone, and a filtered-out Event still advances the Agent's position (the gateway's
``ACK`` watermark), so nothing is lost from durable history. Pure.

An Event is wanted when any criterion of the filter names it: its ``kind`` in ``eventKinds``,
its ``conversationId`` in ``conversationIds``, its ``workItemId`` in ``workItemIds``, or, with
``announcements``, a Mission-level Event (``mission.*``). A filter with none of these criteria
wants every Event. Messages (``message.*``) that mention the Agent are always wanted; with
``mentionsOnly`` no other Message is. An Event about the Agent's own Membership is always
wanted: a filter never hides a removal from the member removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mwp.core.models.websocket_frame import Attention
from mwp.gateway.visibility import MEMBERSHIP_KINDS

CLAUSES: tuple[str, ...] = ("MWP-MSN-013", "MWP-EVT-009")


def wanted(attention: Attention | None, event: Mapping[str, Any], agent_id: str) -> bool:
    """Whether live Event ``event`` passes ``attention`` for ``agent_id``."""
    if attention is None:
        return True
    kind = str(event["kind"])
    if kind in MEMBERSHIP_KINDS:
        if event["payload"]["membership"]["member"]["id"] == agent_id:
            return True
    elif kind.startswith("message."):
        if _mentions(event, agent_id):
            return True
        if attention.mentions_only:
            return False
    criteria = (
        attention.event_kinds,
        attention.conversation_ids,
        attention.work_item_ids,
        attention.announcements or None,
    )
    if all(criterion is None for criterion in criteria):
        return True
    return bool(
        (attention.event_kinds is not None and kind in attention.event_kinds)
        or (
            attention.conversation_ids is not None
            and event.get("conversationId") in attention.conversation_ids
        )
        or (
            attention.work_item_ids is not None
            and event.get("workItemId") in attention.work_item_ids
        )
        or (attention.announcements and kind.startswith("mission."))
    )


def _mentions(event: Mapping[str, Any], agent_id: str) -> bool:
    message = event["payload"].get("message")
    if not isinstance(message, Mapping):
        return False
    return any(
        isinstance(actor, Mapping) and actor.get("type") == "agent" and actor.get("id") == agent_id
        for actor in message.get("mentions", ())
    )
