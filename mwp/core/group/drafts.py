"""Event drafts: what ``decide`` produces before the Authority assigns order and identity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The aggregate an Event changes, as (kind, id): its revision becomes the Event's
# ``aggregateRevision``. Kinds: mission, coordinator_lease, membership, conversation,
# proposal, work_item.
Aggregate = tuple[str, str]


@dataclass(frozen=True, slots=True)
class EventDraft:
    kind: str
    aggregate: Aggregate
    payload: dict[str, Any]
    work_item_id: str | None = None
    conversation_id: str | None = None


class Drafts:
    """Drafts of one decision, in Group order. The last one is the Command's primary Event:
    its aggregate revision is the receipt's ``aggregateRevision``."""

    __slots__ = ("base_sequence", "items")

    def __init__(self, base_sequence: int) -> None:
        self.base_sequence = base_sequence
        self.items: list[EventDraft] = []

    @property
    def next_sequence(self) -> int:
        """The Group sequence the next added draft will get (IDs are derived from it)."""
        return self.base_sequence + len(self.items)

    def add(
        self,
        kind: str,
        aggregate: Aggregate,
        payload: dict[str, Any],
        *,
        work_item_id: str | None = None,
        conversation_id: str | None = None,
    ) -> None:
        self.items.append(EventDraft(kind, aggregate, payload, work_item_id, conversation_id))
