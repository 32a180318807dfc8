"""The wire error object (a protocol object, not a Python exception)."""

from __future__ import annotations

from typing import Annotated

from pydantic import PlainSerializer, PlainValidator

from mwp.core.errors import ErrorCode
from mwp.core.models._base import WireModel
from mwp.core.models.common import Identifier, JsonObject, SafeInteger, Sha256, Timestamp, text

_WIRE_CODES = frozenset(code.value for code in ErrorCode)


def _error_code(value: object) -> ErrorCode:
    if isinstance(value, str) and value in _WIRE_CODES:
        return ErrorCode(value)
    raise ValueError("not a protocol error code")


def _wire_code(code: ErrorCode) -> str:
    return code.value


WireErrorCode = Annotated[
    ErrorCode, PlainValidator(_error_code), PlainSerializer(_wire_code, return_type=str)
]


class WireError(WireModel):
    code: WireErrorCode
    message: Annotated[str, text(1, 2000)]
    retryable: bool
    fatal: bool | None = None
    related_frame_id: Identifier | None = None
    related_action_id: Identifier | None = None
    group_id: Identifier | None = None
    expected_revision: SafeInteger | None = None
    current_revision: SafeInteger | None = None
    retry_after_ms: SafeInteger | None = None
    snapshot_artifact_hash: Sha256 | None = None
    details: JsonObject | None = None
    occurred_at: Timestamp
