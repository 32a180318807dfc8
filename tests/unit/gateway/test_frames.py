"""One message in, a typed frame or a typed ERROR frame out (spec 17.1, 17.4, 19)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.models import validate_document
from mwp.core.models.websocket_frame import ErrorFrame, PingFrame
from mwp.gateway.frames import (
    MAX_FRAME_BYTES,
    FrameError,
    encode,
    error_frame,
    new_frame_id,
    now_text,
    read_frame,
)

FRAME_ID = "urn:uuid:6d1f6a3e-4a53-4c59-9d55-6f3c2b9c1a11"


def ping(**members: Any) -> dict[str, Any]:
    frame = {
        "protocolVersion": "0.1",
        "frameId": FRAME_ID,
        "frameType": "PING",
        "nonce": "bm9uY2Utbm9uY2Utbm9uY2U",
        "sentAt": "2026-12-01T12:00:00Z",
    }
    return {**frame, **members}


def refused(message: str | bytes) -> FrameError:
    with pytest.raises(FrameError) as caught:
        read_frame(message)
    return caught.value


def test_a_valid_frame_comes_out_typed_with_its_json_value() -> None:
    incoming = read_frame(json.dumps(ping()))
    assert isinstance(incoming.frame, PingFrame)
    assert incoming.frame.frame_id == FRAME_ID
    assert incoming.value == ping()


def test_a_binary_message_is_refused_even_when_it_holds_a_valid_frame() -> None:
    error = refused(json.dumps(ping()).encode())
    assert error.code == ErrorCode.PROTOCOL_VIOLATION
    assert error.diagnostic == Diagnostic("framing", "binary-message")
    assert error.related_frame_id is None  # binary content is never read


def test_a_frame_over_the_bound_is_refused_unread_and_one_at_the_bound_is_read() -> None:
    # Insignificant whitespace counts too: it is bytes the gateway must read.
    base = json.dumps(ping())
    at_bound = base + " " * (MAX_FRAME_BYTES - len(base))
    assert len(at_bound.encode()) == MAX_FRAME_BYTES
    assert isinstance(read_frame(at_bound).frame, PingFrame)
    error = refused(at_bound + " ")
    assert error.code == ErrorCode.PROTOCOL_VIOLATION
    assert error.diagnostic == Diagnostic("framing", "frame-too-large")


def test_the_bound_counts_utf8_bytes_not_characters() -> None:
    # Two bytes per character: under the bound in characters, over it in bytes.
    text = json.dumps({"x": "é" * (MAX_FRAME_BYTES // 2)}, ensure_ascii=False)
    assert len(text) < MAX_FRAME_BYTES < len(text.encode())
    assert refused(text).diagnostic == Diagnostic("framing", "frame-too-large")


def test_duplicate_members_are_refused_before_schema_validation() -> None:
    valid = json.dumps(ping())
    duplicated = valid[:-1] + ', "frameType": "PING"}'
    error = refused(duplicated)
    assert error.code == ErrorCode.PROTOCOL_VIOLATION
    assert error.diagnostic is not None and error.diagnostic.stage == "parse"
    # A duplicate inside a frame the schema would refuse anyway is still a parse failure.
    invalid = json.dumps(ping(frameType="NOPE"))
    assert refused(invalid[:-1] + ', "nonce": "x"}').code == ErrorCode.PROTOCOL_VIOLATION


def test_a_schema_invalid_frame_names_its_frame_id() -> None:
    error = refused(json.dumps(ping(sentAt="yesterday")))
    assert error.code == ErrorCode.SCHEMA_VALIDATION_FAILED
    assert error.related_frame_id == FRAME_ID
    unknown_member = refused(json.dumps(ping(extra=1)))
    assert unknown_member.code == ErrorCode.SCHEMA_VALIDATION_FAILED
    # A frame ID that is not an identifier is not echoed.
    assert refused(json.dumps(ping(frameId="not an id"))).related_frame_id is None


@pytest.mark.parametrize(
    "message", ["", "[]", "{", "NaN", '{"a": 1} {"b": 2}', "\ufeff{}", "\ud800"]
)
def test_anything_but_one_strict_json_value_is_a_protocol_violation(message: str) -> None:
    with pytest.raises(MwpError) as caught:
        read_frame(message)
    assert caught.value.code in {ErrorCode.PROTOCOL_VIOLATION, ErrorCode.SCHEMA_VALIDATION_FAILED}
    if message not in {"[]"}:
        assert caught.value.code == ErrorCode.PROTOCOL_VIOLATION


def test_error_frames_conform_to_both_schemas_and_leak_no_diagnostic() -> None:
    error = FrameError(ErrorCode.SCHEMA_VALIDATION_FAILED, "schema", "secret reason", FRAME_ID)
    frame = error_frame(error, occurred_at=now_text())
    validate_document("websocket-frame.schema.json", frame)
    validate_document("error.schema.json", frame["error"])
    assert frame["error"]["relatedFrameId"] == FRAME_ID
    assert frame["error"]["retryable"] is False
    assert "secret" not in encode(frame)
    parsed = read_frame(encode(frame))
    assert isinstance(parsed.frame, ErrorFrame)
    fatal = error_frame(MwpError(ErrorCode.AUTH_STALE_SESSION), fatal=True)
    assert fatal["error"]["fatal"] is True and "relatedFrameId" not in fatal["error"]
    validate_document("websocket-frame.schema.json", fatal)


def test_frame_ids_are_identifiers_and_fresh() -> None:
    first, second = new_frame_id(), new_frame_id()
    assert first != second
    validate_document("websocket-frame.schema.json", ping(frameId=first))
