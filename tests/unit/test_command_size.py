"""The Group's Command size limit, measured as Temporal carries the Update's argument."""

from __future__ import annotations

import pytest
from temporalio.converter import DataConverter

from mwp.contracts.command_size import (
    MAX_COMMAND_BYTES,
    MAX_IN_FLIGHT_UPDATE_BYTES,
    check_command_size,
    command_payload_bytes,
)
from mwp.core.errors import ErrorCode, MwpError

SAMPLES = ["", "plain", '{"a":"\\"quoted\\""}', "é" * 10, "中文", "😀", "\ud800", "\x00\x1f"]


@pytest.mark.parametrize("wire", SAMPLES)
def test_the_measure_is_the_payload_temporal_sends(wire: str) -> None:
    payload = DataConverter.default.payload_converter.to_payloads([wire])[0]
    assert command_payload_bytes(wire) == len(payload.data)


def test_a_command_at_the_limit_passes_and_one_byte_more_is_refused() -> None:
    at_limit = "a" * (MAX_COMMAND_BYTES - 2)  # the JSON string's two quotes count
    check_command_size(at_limit)
    with pytest.raises(MwpError) as refused:
        check_command_size(at_limit + "a")
    assert refused.value.code == ErrorCode.PROTOCOL_VIOLATION
    assert not refused.value.retryable
    assert refused.value.details == {
        "commandBytes": MAX_COMMAND_BYTES + 1,
        "maxCommandBytes": MAX_COMMAND_BYTES,
    }


def test_non_ascii_text_counts_as_escaped() -> None:
    # Each "é" travels as \u00e9: a third of the limit in UTF-8 is already over it.
    text = "é" * (MAX_COMMAND_BYTES // 6 + 1)
    assert len(text.encode()) < MAX_COMMAND_BYTES
    with pytest.raises(MwpError):
        check_command_size(text)


def test_one_command_always_fits_in_the_servers_in_flight_limit() -> None:
    # The in-flight limit counts the whole Update request (ID, name, header), not just the text.
    assert MAX_COMMAND_BYTES + 16 * 1024 < MAX_IN_FLIGHT_UPDATE_BYTES < 2 * 1024 * 1024


def test_a_group_rolling_over_is_backpressure_and_other_server_errors_stay_as_they_are() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from mwp.client.limits import server_limits_as_mwp_errors
    from mwp.core.errors import ErrorCode, MwpError

    closing = RPCError(
        "workflow operation can not be applied because workflow is closing",
        RPCStatusCode.RESOURCE_EXHAUSTED,
        b"",
    )
    with pytest.raises(MwpError) as refused, server_limits_as_mwp_errors():
        raise closing
    assert refused.value.code is ErrorCode.BACKPRESSURE and refused.value.retry_after_ms
    other = RPCError("boom", RPCStatusCode.INTERNAL, b"")
    with pytest.raises(RPCError) as passed, server_limits_as_mwp_errors():
        raise other
    assert passed.value is other
