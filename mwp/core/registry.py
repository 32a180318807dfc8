"""Organization-scoped Registry evidence for stage 4 (spec 6.4). INTERFACE DRAFT."""

from __future__ import annotations

from dataclasses import dataclass

from mwp.core.values import Timestamp


@dataclass(frozen=True)
class Principal:
    type: str  # "agent" | "human" | "service"
    id: str

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id}


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
class RegistryEvidence:
    """Complete Registry evidence (raw JSON as received); validated at stage 4."""

    raw: dict[str, object]
