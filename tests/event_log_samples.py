"""Keys, Registry evidence and accepted Events of one test Group, for the Event log tests."""

from __future__ import annotations

from typing import Any

from mwp.core.log.event_log import LogEntry, seal
from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import parse_timestamp

ORG = "urn:mwp:organization:test"
GROUP = "urn:mwp:group:alpha"
AUTHORITY = Principal("service", "urn:mwp:service:group-authority")
KEY_ID = "urn:mwp:key:service:group-authority:1"
AUTHORITY_KEY = SigningKey(bytes(range(32)))
OTHER_SERVICE = Principal("service", "urn:mwp:service:impostor")
OTHER_KEY_ID = "urn:mwp:key:service:impostor:1"
OTHER_KEY = SigningKey(bytes(range(1, 33)))


def binding(key_id: str, principal: Principal, key: SigningKey) -> KeyBinding:
    return KeyBinding(
        key_id, principal, "Ed25519", key.public_key, parse_timestamp("2020-01-01T00:00:00Z"), ()
    )


def authority_evidence(authority: Principal, key_id: str, key: SigningKey) -> RegistryEvidence:
    """Registry evidence binding ``authority``'s key, next to a registered impostor service."""
    return RegistryEvidence.from_bindings(
        ORG, [binding(key_id, authority, key), binding(OTHER_KEY_ID, OTHER_SERVICE, OTHER_KEY)]
    )


EVIDENCE = authority_evidence(AUTHORITY, KEY_ID, AUTHORITY_KEY)


def event(sequence: int, group_id: str = GROUP, **changes: Any) -> dict[str, Any]:
    """An accepted, unsigned Group Event as the Group Authority produces it."""
    value: dict[str, Any] = {
        "protocolVersion": "0.1",
        "eventId": f"{group_id}:event:{sequence}",
        "groupId": group_id,
        "sequence": sequence,
        "aggregateRevision": sequence,
        "kind": "message.posted",
        "actor": {"type": "agent", "id": "urn:mwp:agent:planner"},
        "cause": {"type": "command", "id": f"urn:uuid:00000000-0000-0000-0000-{sequence:012d}"},
        "correlationId": "urn:uuid:11111111-1111-1111-1111-111111111111",
        "occurredAt": "2026-11-29T10:00:00Z",
        "payload": {"content": [{"type": "text", "text": f"message {sequence}"}]},
        "acceptedBy": AUTHORITY.to_json(),
    }
    value.update(changes)
    return value


def chain(count: int, group_id: str = GROUP) -> list[LogEntry]:
    entries: list[LogEntry] = []
    previous: str | None = None
    for sequence in range(1, count + 1):
        entry = seal(event(sequence, group_id), previous, KEY_ID, AUTHORITY_KEY)
        entries.append(entry)
        previous = entry.signing_hash
    return entries
