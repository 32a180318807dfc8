"""Deterministic identifiers: every ID the Authority mints is a UUIDv5 of the Group and a name.

Nothing random: a replay of the same Events, or a re-run of a workflow, mints the same IDs.
The sequence number of the Event that introduces a thing makes its name unique in the Group.
"""

from __future__ import annotations

import uuid

# One fixed namespace for every name this Authority derives.
NAMESPACE = uuid.uuid5(
    uuid.NAMESPACE_URL, "https://missionweaveprotocol.dev/temporal/group-authority"
)


def derive_id(group_id: str, *parts: object) -> str:
    """``urn:uuid:`` of a UUIDv5 over the Group ID and the parts (unit-separator joined)."""
    name = "\x1f".join([group_id, *(str(part) for part in parts)])
    return f"urn:uuid:{uuid.uuid5(NAMESPACE, name)}"


def event_id(group_id: str, sequence: int) -> str:
    return derive_id(group_id, "event", sequence)


def main_conversation_id(group_id: str) -> str:
    return derive_id(group_id, "conversation", "group")


def work_item_conversation_id(group_id: str, work_item_id: str) -> str:
    return derive_id(group_id, "conversation", "work-item", work_item_id)


def membership_id(group_id: str, member_id: str) -> str:
    return derive_id(group_id, "membership", member_id)


def message_id(group_id: str, sequence: int) -> str:
    return derive_id(group_id, "message", sequence)
