"""Organization-scoped Registry evidence and signing-key resolution (spec 6.4, stage 4).

Evidence is validated as a whole before any key is selected: one bad unrelated binding, a
reused key ID, or a public-key alias makes every resolution against it fail closed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mwp.core.wire.ed25519 import is_valid_public_key
from mwp.core.wire.values import (
    MAX_SAFE_INTEGER,
    Timestamp,
    ValueRuleError,
    b64url_decode,
    is_absolute_uri,
    parse_timestamp,
)

CLAUSES: tuple[str, ...] = (
    "MWP-SDV-004",
    "MWP-SDV-005",
    "MWP-SDV-007",
    "MWP-SDV-008",
    "MWP-SDV-009",
    "MWP-SDV-011",
    "MWP-SDV-012",
    "MWP-SDV-014",
)

PRINCIPAL_TYPES = frozenset({"agent", "human", "service"})


class RegistryEvidenceError(ValueError):
    """The evidence cannot establish the binding, uniqueness or history invariants."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Principal:
    type: str  # "agent" | "human" | "service"
    id: str

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id}

    @classmethod
    def from_json(cls, value: Any) -> Principal:
        if not isinstance(value, Mapping) or set(value) != {"type", "id"}:
            raise RegistryEvidenceError("principal-shape")
        kind, ident = value["type"], value["id"]
        if kind not in PRINCIPAL_TYPES or not isinstance(ident, str):
            raise RegistryEvidenceError("principal-shape")
        return cls(kind, ident)


@dataclass(frozen=True)
class KeyValidity:
    """Effective validity of a key: half-open, earliest retained boundaries."""

    valid_from: Timestamp
    valid_until: Timestamp | None
    revoked_at: Timestamp | None

    def contains(self, moment: Timestamp) -> bool:
        instant = moment.instant
        if instant < self.valid_from.instant:
            return False
        if self.valid_until is not None and not instant < self.valid_until.instant:
            return False
        return self.revoked_at is None or instant < self.revoked_at.instant


@dataclass(frozen=True)
class ValidityStatus:
    """One append-only validity-status record of a binding's history."""

    sequence: int
    recorded_at: Timestamp
    valid_until: Timestamp | None
    revoked_at: Timestamp | None


@dataclass(frozen=True)
class KeyBinding:
    """An immutable binding of one key ID to one Principal, algorithm and public key."""

    key_id: str
    principal: Principal
    algorithm: str
    public_key: bytes
    valid_from: Timestamp
    history: tuple[ValidityStatus, ...]

    @property
    def identity(self) -> tuple[str, Principal, str, bytes, str]:
        return (self.key_id, self.principal, self.algorithm, self.public_key, self.valid_from.text)

    def validity(self) -> KeyValidity:
        """Earliest non-absent boundary in the retained history wins."""
        until = _earliest(s.valid_until for s in self.history)
        revoked = _earliest(s.revoked_at for s in self.history)
        return KeyValidity(self.valid_from, until, revoked)


def _earliest(values: Any) -> Timestamp | None:
    present = [v for v in values if v is not None]
    return min(present, key=lambda t: t.instant) if present else None


@dataclass(frozen=True)
class RegistryEvidence:
    """Complete Registry evidence for one Organization at one authoritative revision.

    Build it with :meth:`from_json`; construction performs the Organization-wide checks, so
    an instance is proof that they passed, and can be reused for many verifications.
    """

    organization_id: str
    bindings: Mapping[str, KeyBinding]

    @classmethod
    def from_json(cls, value: Any) -> RegistryEvidence:
        if not isinstance(value, Mapping) or set(value) != {"organizationId", "bindings"}:
            raise RegistryEvidenceError("evidence-shape")
        organization_id = value["organizationId"]
        if not isinstance(organization_id, str) or not is_absolute_uri(organization_id):
            raise RegistryEvidenceError("organization-id")
        raw_bindings = value["bindings"]
        if not isinstance(raw_bindings, Sequence) or isinstance(raw_bindings, str):
            raise RegistryEvidenceError("evidence-shape")
        return cls.from_bindings(organization_id, [_binding(b) for b in raw_bindings])

    @classmethod
    def from_bindings(
        cls, organization_id: str, bindings: Sequence[KeyBinding]
    ) -> RegistryEvidence:
        if not is_absolute_uri(organization_id):
            raise RegistryEvidenceError("organization-id")
        by_key: dict[str, KeyBinding] = {}
        by_public_key: dict[bytes, KeyBinding] = {}
        for binding in bindings:
            existing = by_key.get(binding.key_id)
            if existing is not None:
                if existing.identity != binding.identity:
                    raise RegistryEvidenceError("key-id-reuse")
                # The same logical binding declared again: its histories are one history.
                binding = _merge(existing, binding)
            holder = by_public_key.get(binding.public_key)
            if holder is not None and holder.key_id != binding.key_id:
                # Another Principal (reuse) or the same Principal under another key ID (alias).
                raise RegistryEvidenceError("public-key-alias")
            by_key[binding.key_id] = binding
            by_public_key[binding.public_key] = binding
        return cls(organization_id, by_key)

    def to_json(self) -> dict[str, Any]:
        from mwp.core.wire.values import b64url_encode

        return {
            "organizationId": self.organization_id,
            "bindings": [
                {
                    "keyId": b.key_id,
                    "principal": b.principal.to_json(),
                    "algorithm": b.algorithm,
                    "publicKey": b64url_encode(b.public_key),
                    "validFrom": b.valid_from.text,
                    "validityHistory": [_status_json(s) for s in b.history],
                }
                for b in self.bindings.values()
            ],
        }

    def resolve(self, key_id: str) -> KeyBinding:
        binding = self.bindings.get(key_id)
        if binding is None:
            raise RegistryEvidenceError("unknown-key")
        return binding


def _status_json(status: ValidityStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"sequence": status.sequence, "recordedAt": status.recorded_at.text}
    if status.valid_until is not None:
        out["validUntil"] = status.valid_until.text
    if status.revoked_at is not None:
        out["revokedAt"] = status.revoked_at.text
    return out


def _merge(first: KeyBinding, second: KeyBinding) -> KeyBinding:
    seen = {s.sequence: s for s in first.history}
    for status in second.history:
        if status.sequence in seen and seen[status.sequence] != status:
            raise RegistryEvidenceError("validity-history-conflict")
        seen[status.sequence] = status
    history = tuple(seen[k] for k in sorted(seen))
    _check_history(history)
    return KeyBinding(
        first.key_id, first.principal, first.algorithm, first.public_key, first.valid_from, history
    )


def _timestamp(value: Any, reason: str) -> Timestamp:
    if not isinstance(value, str):
        raise RegistryEvidenceError(reason)
    try:
        return parse_timestamp(value)
    except ValueRuleError as exc:
        raise RegistryEvidenceError(reason) from exc


def _optional_timestamp(value: Mapping[str, Any], member: str, reason: str) -> Timestamp | None:
    return _timestamp(value[member], reason) if member in value else None


_BINDING_MEMBERS = {"keyId", "principal", "algorithm", "publicKey", "validFrom", "validityHistory"}
_STATUS_MEMBERS = {"sequence", "recordedAt", "validUntil", "revokedAt"}


def _binding(value: Any) -> KeyBinding:
    if not isinstance(value, Mapping) or set(value) != _BINDING_MEMBERS:
        raise RegistryEvidenceError("binding-shape")
    key_id = value["keyId"]
    if not isinstance(key_id, str) or not is_absolute_uri(key_id):
        raise RegistryEvidenceError("key-id")
    principal = Principal.from_json(value["principal"])
    if not is_absolute_uri(principal.id):
        raise RegistryEvidenceError("principal-id")
    if value["algorithm"] != "Ed25519":
        raise RegistryEvidenceError("algorithm")
    encoded = value["publicKey"]
    if not isinstance(encoded, str):
        raise RegistryEvidenceError("public-key-encoding")
    try:
        public_key = b64url_decode(encoded)
    except ValueRuleError as exc:
        raise RegistryEvidenceError("public-key-encoding") from exc
    if len(public_key) != 32:
        raise RegistryEvidenceError("public-key-length")
    if not is_valid_public_key(public_key):
        raise RegistryEvidenceError("public-key-point")
    valid_from = _timestamp(value["validFrom"], "validity-timestamp")
    raw_history = value["validityHistory"]
    if not isinstance(raw_history, Sequence) or isinstance(raw_history, str):
        raise RegistryEvidenceError("validity-history-shape")
    history = tuple(_status(s) for s in raw_history)
    _check_history(history)
    return KeyBinding(key_id, principal, "Ed25519", public_key, valid_from, history)


def _status(value: Any) -> ValidityStatus:
    if (
        not isinstance(value, Mapping)
        or not {"sequence", "recordedAt"} <= set(value)
        or not (set(value) <= _STATUS_MEMBERS)
    ):
        raise RegistryEvidenceError("validity-status-shape")
    sequence = value["sequence"]
    if type(sequence) is not int or not 1 <= sequence <= MAX_SAFE_INTEGER:
        raise RegistryEvidenceError("validity-status-sequence")
    return ValidityStatus(
        sequence,
        _timestamp(value["recordedAt"], "validity-timestamp"),
        _optional_timestamp(value, "validUntil", "validity-timestamp"),
        _optional_timestamp(value, "revokedAt", "validity-timestamp"),
    )


def _check_history(history: tuple[ValidityStatus, ...]) -> None:
    """Append-only: sequences ascend, and a boundary may only be added or moved earlier."""
    previous = 0
    until: Timestamp | None = None
    revoked: Timestamp | None = None
    for status in history:
        if status.sequence <= previous:
            raise RegistryEvidenceError("validity-history-order")
        previous = status.sequence
        until = _narrow(until, status.valid_until)
        revoked = _narrow(revoked, status.revoked_at)


def _narrow(current: Timestamp | None, new: Timestamp | None) -> Timestamp | None:
    if new is None:
        return current
    if current is not None and current.instant < new.instant:
        raise RegistryEvidenceError("validity-boundary-moved-later")
    return new
