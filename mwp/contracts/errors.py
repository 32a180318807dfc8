"""Carry typed MWP errors across Temporal, both ways.

A rejection inside a workflow (an Update validator or handler, an activity) leaves as a
Temporal ``ApplicationError`` whose ``type`` is the MWP error code and whose first detail is
the wire error object (``error.schema.json``). On the client side the same failure, however
deeply Temporal wraps it (``WorkflowUpdateFailedError``, ``WorkflowFailureError``,
``ActivityError``, ``ChildWorkflowError``), comes back as a :class:`RemoteMwpError`, which is
an :class:`MwpError` with the wire object attached.

The protected :class:`~mwp.core.errors.Diagnostic` never crosses: only ``to_wire`` output does.
MWP errors are never retried by Temporal (``non_retryable``): whether resending can succeed is
the sender's decision, stated by the wire ``retryable`` member.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.wire.values import format_utc

_CODES = frozenset(code.value for code in ErrorCode)


class RemoteMwpError(MwpError):
    """An MWP error decided by a remote Authority; ``wire`` is the error object it sent."""

    def __init__(self, wire: Mapping[str, Any]) -> None:
        super().__init__(
            ErrorCode(wire["code"]),
            wire.get("message"),
            retryable=bool(wire.get("retryable", False)),
            action_id=wire.get("relatedActionId"),
            group_id=wire.get("groupId"),
            expected_revision=wire.get("expectedRevision"),
            current_revision=wire.get("currentRevision"),
            retry_after_ms=wire.get("retryAfterMs"),
            snapshot_artifact_hash=wire.get("snapshotArtifactHash"),
            details=wire.get("details"),
        )
        self.wire: dict[str, Any] = dict(wire)

    @property
    def occurred_at(self) -> str | None:
        value = self.wire.get("occurredAt")
        return value if isinstance(value, str) else None


def _now() -> str:
    # Inside a workflow only the deterministic workflow clock may be read.
    moment = workflow.now() if workflow.in_workflow() else datetime.now(UTC)
    return format_utc(moment)


def to_application_error(error: MwpError, occurred_at: str | None = None) -> ApplicationError:
    """The Temporal failure that carries ``error`` (``occurred_at`` defaults to the clock)."""
    wire = error.to_wire(occurred_at or _now())
    return ApplicationError(
        f"{error.code.value}: {error.message}", wire, type=error.code.value, non_retryable=True
    )


@contextmanager
def as_temporal_failure(occurred_at: str | None = None) -> Iterator[None]:
    """Inside workflows and activities: let an :class:`MwpError` leave as an ApplicationError."""
    try:
        yield
    except MwpError as exc:
        raise to_application_error(exc, occurred_at) from None


def from_temporal_failure(exc: BaseException) -> RemoteMwpError | None:
    """The MWP error a Temporal failure carries, searching its cause chain, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RemoteMwpError):
            return current
        if isinstance(current, ApplicationError) and current.type in _CODES:
            wire = current.details[0] if current.details else None
            if isinstance(wire, Mapping) and wire.get("code") == current.type:
                return RemoteMwpError(wire)
            # A failure typed with an MWP code but without its wire object: keep the code.
            return RemoteMwpError({"code": current.type, "message": current.message})
        current = current.__cause__
    return None


@contextmanager
def raising_mwp_errors() -> Iterator[None]:
    """On the client side: turn Temporal failures that carry an MWP error into that error."""
    try:
        yield
    except MwpError:
        raise
    except Exception as exc:
        mwp_error = from_temporal_failure(exc)
        if mwp_error is None:
            raise
        raise mwp_error from exc
