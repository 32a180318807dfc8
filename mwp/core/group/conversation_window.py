"""The recent-Message window: what correction, retraction and redaction need to know.

Messages themselves live only in the Event log. To check an amendment the Authority needs the
target's author, Conversation and status, so it keeps those for the most recent
``capacity`` Messages (1,000 by default; about 20 bytes each in a snapshot, because authors
and Conversations are interned). Older Messages can no longer be amended through the
Authority: the snapshot must not grow with the number of Messages. Message IDs are derived
from the Group and the sequence of their ``message.posted`` Event, so the snapshot stores the
sequence only.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mwp.core.group.ids import message_id
from mwp.core.group.policy import MESSAGE_WINDOW


@dataclass(slots=True)
class MessageEntry:
    sequence: int
    author: tuple[str, str]  # (type, id)
    conversation_id: str
    status: str  # posted | corrected | retracted | redacted


class MessageWindow:
    __slots__ = ("_entries", "capacity")

    def __init__(self, capacity: int = MESSAGE_WINDOW) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, MessageEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, message_id_: str) -> MessageEntry | None:
        return self._entries.get(message_id_)

    def add(self, message_id_: str, entry: MessageEntry) -> None:
        self._entries[message_id_] = entry
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def to_json(self) -> dict[str, Any]:
        authors: dict[tuple[str, str], int] = {}
        conversations: dict[str, int] = {}
        rows = []
        for entry in self._entries.values():
            a = authors.setdefault(entry.author, len(authors))
            c = conversations.setdefault(entry.conversation_id, len(conversations))
            rows.append([entry.sequence, a, c, entry.status])
        return {
            "capacity": self.capacity,
            "authors": [list(author) for author in authors],
            "conversations": list(conversations),
            "entries": rows,
        }

    @classmethod
    def from_json(cls, group_id: str, data: dict[str, Any]) -> MessageWindow:
        window = cls(data["capacity"])
        authors = [(kind, ident) for kind, ident in data["authors"]]
        conversations = data["conversations"]
        for sequence, a, c, status in data["entries"]:
            window._entries[message_id(group_id, sequence)] = MessageEntry(
                sequence, authors[a], conversations[c], status
            )
        return window
