"""``(actor, actionId)`` idempotency receipts, compact and bounded for continue-as-new.

Each accepted Command leaves one entry: a 64-bit digest of ``actor ID, Action ID`` as the key,
a 64-bit digest of its signing hash (for byte-equality), its sequence range, the aggregate
revision and the acceptance time. Everything else in a :class:`Receipt` is re-derived: the
Action ID, actor and signing hash come from the retry itself (equal by definition), the Event
IDs from the sequence range. In a snapshot one entry is about 75 bytes of JSON, most of the
carried state of a busy Group. 64 bits are plenty: two of 10,000 keys collide with odds
below 1e-11, and only the actor itself can make its own Commands' digests collide.

The cache is bounded: it keeps the most recent ``capacity`` receipts (10,000 by default, about
0.75 MB, under Temporal's 2 MiB payload limit with room for the rest of the Group). A retry of a
Command older than that is no longer recognized, and must never be applied a second time: the
Authority's freshness check refuses a newly presented Command issued more than five minutes
ago, and ``horizon_time`` (the acceptance time of the newest evicted receipt) tightens that
window when the Group accepts more than ``capacity`` Commands within it: a Command issued
before then (allowing for clock skew) might be the retry of an evicted one, so it is refused as
not fresh, and its sender signs a new one (spec 19). ``horizon`` says from which sequence on
receipts are complete.

Entries rebuilt by :func:`replay` know only the Event's ``commandHash``. Under rules older than
``RULES_ARCHIVE`` that is the whole Command's hash: a retry counts as a duplicate only when it
is the identical Command (same signature too). From ``RULES_ARCHIVE`` on it is the signing hash,
so such an entry recognizes a retry exactly as a live one does. Anything else with that Action
ID is refused as a collision, never applied twice.
"""

from __future__ import annotations

import hashlib
from base64 import urlsafe_b64decode, urlsafe_b64encode
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mwp.core.group.policy import RECEIPT_WINDOW

CLAUSES: tuple[str, ...] = ("MWP-EVT-003",)

_KEY_BYTES = 8
_DIGEST_HEX = 16


def receipt_key(actor_id: str, action_id: str) -> str:
    digest = hashlib.sha256(f"{actor_id}\x00{action_id}".encode()).digest()[:_KEY_BYTES]
    return _key_text(digest)


def _key_text(digest: bytes) -> str:
    return urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def signing_digest(signing_hash: str) -> str:
    return signing_hash.removeprefix("sha256:")[:_DIGEST_HEX]


def command_digest(command_hash: str) -> str:
    return "c:" + command_hash.removeprefix("sha256:")[:_DIGEST_HEX]


def _current(key: str, digest: str) -> tuple[str, str]:
    """An entry of an older snapshot (96-bit key and digest) as this module derives it now:
    the same SHA-256 prefixes, shortened."""
    if len(key) > 11:
        key = _key_text(urlsafe_b64decode(key + "=" * (-len(key) % 4))[:_KEY_BYTES])
    if digest.startswith("c:"):
        return key, digest[: 2 + _DIGEST_HEX]
    return key, digest[:_DIGEST_HEX]


@dataclass(slots=True)
class ReceiptEntry:
    digest: str  # signing_digest(...) or, when rebuilt from Events, command_digest(...)
    first_sequence: int
    last_sequence: int
    aggregate_revision: int
    accepted_at: str

    def same_content(self, signing_hash: str, command_hash: str) -> bool:
        if self.digest.startswith("c:"):
            # An Event's commandHash is the whole Command's hash or, from rules
            # RULES_ARCHIVE on, its signing hash: either one equal is the same Command.
            return self.digest in (command_digest(command_hash), command_digest(signing_hash))
        return self.digest == signing_digest(signing_hash)

    def to_json(self, key: str) -> list[Any]:
        return [
            key,
            self.digest,
            self.first_sequence,
            self.last_sequence,
            self.aggregate_revision,
            self.accepted_at,
        ]


class ReceiptCache:
    __slots__ = ("_entries", "capacity", "horizon", "horizon_time")

    def __init__(self, capacity: int = RECEIPT_WINDOW) -> None:
        if capacity < 1:
            raise ValueError("receipt capacity must be positive")
        self.capacity = capacity
        self._entries: OrderedDict[str, ReceiptEntry] = OrderedDict()
        self.horizon = 1  # receipts of every Command from this sequence on are retained
        self.horizon_time = ""  # when the newest evicted receipt's Command was accepted

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, actor_id: str, action_id: str) -> ReceiptEntry | None:
        return self._entries.get(receipt_key(actor_id, action_id))

    def record(self, actor_id: str, action_id: str, entry: ReceiptEntry) -> None:
        self._entries[receipt_key(actor_id, action_id)] = entry
        while len(self._entries) > self.capacity:
            _, evicted = self._entries.popitem(last=False)
            self.horizon = evicted.last_sequence + 1
            self.horizon_time = evicted.accepted_at

    def to_json(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "horizon": self.horizon,
            "horizonTime": self.horizon_time or None,
            "entries": [entry.to_json(key) for key, entry in self._entries.items()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReceiptCache:
        cache = cls(data["capacity"])
        cache.horizon = data["horizon"]
        cache.horizon_time = data.get("horizonTime") or ""
        for key, digest, first, last, revision, accepted_at in data["entries"]:
            key, digest = _current(key, digest)
            cache._entries[key] = ReceiptEntry(digest, first, last, revision, accepted_at)
        return cache
