"""Typed rejections. Every refusal is an :class:`MwpError`; the Authority adds the Action ID."""

from __future__ import annotations

from typing import Any, NoReturn

from mwp.core.errors import ErrorCode, MwpError


def reject(code: ErrorCode, message: str, **details: Any) -> NoReturn:
    raise MwpError(
        code, message, details={k: v for k, v in details.items() if v is not None} or None
    )


def invalid(message: str, **details: Any) -> NoReturn:
    reject(ErrorCode.INVALID_COMMAND, message, **details)


def forbidden(message: str, **details: Any) -> NoReturn:
    reject(ErrorCode.AUTH_FORBIDDEN, message, **details)


def bad_transition(aggregate: str, state: str, kind: str, **details: Any) -> NoReturn:
    reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        f"{kind} is not permitted while the {aggregate} is {state}",
        state=state,
        **details,
    )


def revision_conflict(expected: int, current: int, aggregate: str) -> NoReturn:
    raise MwpError(
        ErrorCode.REVISION_CONFLICT,
        f"expected {aggregate} revision {expected}, current is {current}",
        expected_revision=expected,
        current_revision=current,
        details={"aggregate": aggregate},
    )
