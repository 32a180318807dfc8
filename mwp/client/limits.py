"""The size limits on the client's side of the door (mwp/contracts/command_size.py says why).

A Command over the Group's limit is refused here, before anything is sent. What only the
Temporal server can refuse comes back as a gRPC ``RESOURCE_EXHAUSTED`` error, turned into a
typed MWP error:

* a request over gRPC's maximum message (4 MiB): ``PROTOCOL_VIOLATION``, as the Group's own
  limit would answer; resending the same bytes cannot succeed;
* the workflow's limit on Updates in flight (their number, or their bytes in total):
  ``BACKPRESSURE``, retryable; the Group is busy with other Commands.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from temporalio.api.enums.v1 import ResourceExhaustedCause
from temporalio.api.errordetails.v1 import (
    MultiOperationExecutionFailure,
    ResourceExhaustedFailure,
)
from temporalio.service import RPCError, RPCStatusCode

from mwp.client.identity import wire_text
from mwp.contracts.command_size import check_command_size
from mwp.core.errors import ErrorCode, MwpError

# How long a sender waits before resending after the server's in-flight limit (the server
# has already retried the admission for a while itself).
IN_FLIGHT_RETRY_AFTER_MS = 200


def command_wire(command: Mapping[str, Any]) -> str:
    """The exact text sent for ``command``; ``PROTOCOL_VIOLATION`` if it is too large."""
    text = wire_text(command)
    check_command_size(text)
    return text


@contextmanager
def server_limits_as_mwp_errors() -> Iterator[None]:
    """Around a call that sends a Command: the server's size and in-flight refusals, typed."""
    try:
        yield
    except RPCError as exc:
        error = _limit_error(exc)
        if error is None:
            raise
        raise error from exc


def _limit_error(exc: BaseException) -> MwpError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RPCError) and current.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            if "larger than max" in current.message:
                return MwpError(
                    ErrorCode.PROTOCOL_VIOLATION,
                    "The Command is larger than the transport accepts: publish large content "
                    "as an Artifact and reference it by hash.",
                )
            if "workflow is closing" in current.message:
                # The Group is continuing as new: its next run takes the Command shortly.
                return MwpError(
                    ErrorCode.BACKPRESSURE, "The Group is rolling over.", retry_after_ms=50
                )
            if _concurrent_limit(current):
                return MwpError(
                    ErrorCode.BACKPRESSURE,
                    "The Group has too many Commands in flight.",
                    retry_after_ms=IN_FLIGHT_RETRY_AFTER_MS,
                )
        current = current.__cause__
    return None


def _concurrent_limit(error: RPCError) -> bool:
    """Whether the server refused an Update for the workflow's limits on Updates in flight
    (for an update-with-start, the refusal is inside the multi-operation failure)."""
    details = list(error.grpc_status.details)
    for detail in details:
        if detail.Is(MultiOperationExecutionFailure.DESCRIPTOR):
            multi = MultiOperationExecutionFailure()
            detail.Unpack(multi)
            details += [nested for status in multi.statuses for nested in status.details]
        elif detail.Is(ResourceExhaustedFailure.DESCRIPTOR):
            failure = ResourceExhaustedFailure()
            detail.Unpack(failure)
            if failure.cause == ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT:
                return True
    return False
