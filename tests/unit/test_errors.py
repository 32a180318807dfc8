"""MwpError serializes to a valid error.schema.json object (spec 19)."""

from __future__ import annotations

import pytest

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.models import DocumentInvalid, validate_document


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_serializes_to_a_schema_valid_error(code: ErrorCode) -> None:
    error = MwpError(code, action_id="urn:uuid:00000000-0000-4000-8000-000000000001")
    wire = error.to_wire("2026-07-15T00:00:00Z")
    validate_document("error.schema.json", wire)
    assert wire["code"] == code.value
    assert isinstance(wire["retryable"], bool)
    assert wire["relatedActionId"] == "urn:uuid:00000000-0000-4000-8000-000000000001"


def test_codes_are_exactly_the_schema_enum() -> None:
    for bogus in ("NOT_A_CODE", "auth_forbidden"):
        with pytest.raises(DocumentInvalid):
            validate_document(
                "error.schema.json",
                {
                    "code": bogus,
                    "message": "x",
                    "retryable": False,
                    "occurredAt": "2026-07-15T00:00:00Z",
                },
            )
    with pytest.raises(ValueError):
        MwpError("NOT_A_CODE")  # type: ignore[arg-type]


def test_retry_guidance_follows_section_19() -> None:
    assert MwpError(ErrorCode.BACKPRESSURE).retryable
    assert MwpError(ErrorCode.INTERNAL_ERROR).retryable
    for code in (
        ErrorCode.AUTH_INVALID_SIGNATURE,
        ErrorCode.ACTION_ID_COLLISION,
        ErrorCode.AUTH_STALE_SESSION,
        ErrorCode.REVISION_CONFLICT,
    ):
        assert not MwpError(code).retryable


def test_protected_diagnostic_never_reaches_the_wire() -> None:
    error = MwpError(
        ErrorCode.AUTH_INVALID_SIGNATURE, diagnostic=Diagnostic("key-resolution", "unknown-key")
    )
    wire = error.to_wire("2026-07-15T00:00:00Z")
    assert "unknown-key" not in repr(wire) and "key-resolution" not in repr(wire)
    assert error.diagnostic == Diagnostic("key-resolution", "unknown-key")


def test_optional_members_are_schema_valid() -> None:
    error = MwpError(
        ErrorCode.REVISION_CONFLICT,
        group_id="urn:example:group:1",
        expected_revision=3,
        current_revision=4,
        details={"aggregate": "workItem"},
    )
    wire = error.to_wire("2026-07-15T00:00:00Z")
    validate_document("error.schema.json", wire)
    assert (wire["expectedRevision"], wire["currentRevision"]) == (3, 4)
