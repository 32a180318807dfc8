"""One exception type for every protocol rejection, serializable as an MWP error object."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

CLAUSES: tuple[str, ...] = ("MWP-EXT-004",)


class ErrorCode(StrEnum):
    """The core codes of the MWP error table (spec section 19)."""

    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    AUTH_REQUIRED = "AUTH_REQUIRED"
    AUTH_INVALID_SIGNATURE = "AUTH_INVALID_SIGNATURE"
    AUTH_STALE_SESSION = "AUTH_STALE_SESSION"
    AUTH_STALE_COORDINATOR = "AUTH_STALE_COORDINATOR"
    AUTH_FORBIDDEN = "AUTH_FORBIDDEN"
    GROUP_NOT_FOUND = "GROUP_NOT_FOUND"
    MEMBERSHIP_REQUIRED = "MEMBERSHIP_REQUIRED"
    MEMBERSHIP_STALE = "MEMBERSHIP_STALE"
    SCHEMA_VALIDATION_FAILED = "SCHEMA_VALIDATION_FAILED"
    INVALID_COMMAND = "INVALID_COMMAND"
    INVALID_STATE_TRANSITION = "INVALID_STATE_TRANSITION"
    REVISION_CONFLICT = "REVISION_CONFLICT"
    ACTION_ID_COLLISION = "ACTION_ID_COLLISION"
    UNKNOWN_CRITICAL_EXTENSION = "UNKNOWN_CRITICAL_EXTENSION"
    WORK_CONTRACT_INCOMPLETE = "WORK_CONTRACT_INCOMPLETE"
    WORK_OFFER_EXPIRED = "WORK_OFFER_EXPIRED"
    WORK_ALREADY_OWNED = "WORK_ALREADY_OWNED"
    WORK_LEASE_EXPIRED = "WORK_LEASE_EXPIRED"
    WORK_STALE_OWNERSHIP = "WORK_STALE_OWNERSHIP"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    RATE_LIMITED = "RATE_LIMITED"
    BACKPRESSURE = "BACKPRESSURE"
    CURSOR_TOO_OLD = "CURSOR_TOO_OLD"
    PROTOCOL_VIOLATION = "PROTOCOL_VIOLATION"
    INTERNAL_ERROR = "INTERNAL_ERROR"


# Whether resending the same bytes can succeed without the sender changing anything.
# Fencing, collision and signature failures need a new Command (spec section 19).
_RETRYABLE: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.BACKPRESSURE,
        ErrorCode.RATE_LIMITED,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.APPROVAL_REQUIRED,
    }
)

# Every message the wire sees for a code; never the failing check (spec 6.4).
_WIRE_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.PROTOCOL_VIOLATION: "The document is not valid I-JSON or violates framing.",
    ErrorCode.SCHEMA_VALIDATION_FAILED: "The document does not conform to its schema.",
    ErrorCode.AUTH_INVALID_SIGNATURE: "The signed document could not be verified.",
}


class MwpError(Exception):
    """A typed protocol rejection.

    ``message`` is safe for the wire. ``diagnostic`` is protected audit data (the failing
    stage and reason) and is never serialized by :meth:`to_wire`.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        *,
        retryable: bool | None = None,
        action_id: str | None = None,
        group_id: str | None = None,
        expected_revision: int | None = None,
        current_revision: int | None = None,
        retry_after_ms: int | None = None,
        snapshot_artifact_hash: str | None = None,
        details: dict[str, Any] | None = None,
        diagnostic: Diagnostic | None = None,
    ) -> None:
        self.code = ErrorCode(code)
        self.message = message or _WIRE_MESSAGES.get(self.code, self.code.value)
        self.retryable = self.code in _RETRYABLE if retryable is None else retryable
        self.action_id = action_id
        self.group_id = group_id
        self.expected_revision = expected_revision
        self.current_revision = current_revision
        self.retry_after_ms = retry_after_ms
        self.snapshot_artifact_hash = snapshot_artifact_hash
        self.details = details
        self.diagnostic = diagnostic
        super().__init__(f"{self.code.value}: {self.message}")

    def to_wire(self, occurred_at: str) -> dict[str, Any]:
        """The ``error.schema.json`` object; ``occurred_at`` comes from the caller's clock."""
        wire: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message[:2000],
            "retryable": self.retryable,
            "occurredAt": occurred_at,
        }
        optional: dict[str, Any] = {
            "relatedActionId": self.action_id,
            "groupId": self.group_id,
            "expectedRevision": self.expected_revision,
            "currentRevision": self.current_revision,
            "retryAfterMs": self.retry_after_ms,
            "snapshotArtifactHash": self.snapshot_artifact_hash,
            "details": self.details,
        }
        wire.update({k: v for k, v in optional.items() if v is not None})
        return wire


class Diagnostic:
    """Protected audit record of why verification stopped: stage and stable reason."""

    __slots__ = ("reason", "stage")

    def __init__(self, stage: str, reason: str) -> None:
        self.stage = stage
        self.reason = reason

    def __repr__(self) -> str:
        return f"Diagnostic(stage={self.stage!r}, reason={self.reason!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Diagnostic) and (self.stage, self.reason) == (
            other.stage,
            other.reason,
        )

    def __hash__(self) -> int:
        return hash((self.stage, self.reason))
