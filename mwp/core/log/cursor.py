"""A subscriber's Cursor on one Group's Event log (pure data, no I/O).

A Cursor is the highest contiguous Group sequence a subscriber has durably processed, plus the
signing hash of the log entry at that sequence. The hash anchors the hash chain: a subscription
resumed from a Cursor verifies that the next entry links to exactly the entry the subscriber
processed, so a log rewritten behind its back is detected at the first new entry rather than
trusted. Sequence 0 (nothing processed yet) has no hash: the entry at sequence 1 links to
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLAUSES: tuple[str, ...] = ("MWP-WRK-030",)

CURSOR_FORMAT = "mwp-group-cursor/1"


def is_sha256_ref(value: object) -> bool:
    """Whether ``value`` is a ``sha256:<64 lowercase hex>`` reference."""
    return (
        isinstance(value, str)
        and len(value) == 71
        and value.startswith("sha256:")
        and all(c in "0123456789abcdef" for c in value[7:])
    )


@dataclass(frozen=True)
class Cursor:
    """Durable progress through ``group_id``'s log: processed up to ``sequence`` inclusive."""

    group_id: str
    sequence: int
    head_hash: str | None  # the signing hash of the entry at ``sequence`` (None at 0)

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ValueError("a Cursor names its Group")
        if not isinstance(self.sequence, int) or isinstance(self.sequence, bool):
            raise ValueError("a Cursor's sequence is an integer")
        if self.sequence < 0:
            raise ValueError("a Cursor's sequence is 0 or more")
        if self.sequence == 0 and self.head_hash is not None:
            raise ValueError("nothing precedes sequence 1: a Cursor at 0 has no head hash")
        if self.sequence > 0 and not is_sha256_ref(self.head_hash):
            raise ValueError("a Cursor past 0 carries the sha256: signing hash of its entry")

    @classmethod
    def start(cls, group_id: str) -> Cursor:
        """Before the first Event of the Group."""
        return cls(group_id, 0, None)

    @property
    def next_sequence(self) -> int:
        return self.sequence + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CURSOR_FORMAT,
            "groupId": self.group_id,
            "sequence": self.sequence,
            "headSigningHash": self.head_hash,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Cursor:
        if value.get("format") != CURSOR_FORMAT:
            raise ValueError(f"not a {CURSOR_FORMAT} record")
        try:
            return cls(value["groupId"], value["sequence"], value["headSigningHash"])
        except KeyError as missing:
            raise ValueError(f"a {CURSOR_FORMAT} record without {missing}") from None

    def __str__(self) -> str:
        return f"{self.group_id}@{self.sequence}"
