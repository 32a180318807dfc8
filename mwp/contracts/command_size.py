"""How large a Command may be, measured as Temporal carries it, and why.

A worker answers an Update with the whole request echoed inside its acceptance or rejection
message. When that message is over the server's blob limit (2 MiB by default), the worker
does not send it: it fails the workflow task (cause ``PAYLOADS_TOO_LARGE``), the server hands
the same Update to every retried task, and the workflow answers no query, Update or signal
again. A worker with the check disabled fares worse: the server refuses the rejection
(``BadUpdateWorkflowExecutionMessage``) and terminates the workflow. So no code in a workflow
can refuse an Update whose echo does not fit; only the server can, at admission:
``history.maxInFlightUpdatePayloads`` (:data:`MAX_IN_FLIGHT_UPDATE_BYTES`) refuses any
Update that would bring the requests in flight at one workflow to that many bytes.

Below that, the Group's own limit (:data:`MAX_COMMAND_BYTES`) is checked by the client before
sending and by the ``command`` Update's validator, whose rejection never enters history.
``docs/commands.md`` ("Size limit") states both limits and what a cluster must set.
"""

from __future__ import annotations

import json
from typing import Final

from mwp.core.errors import ErrorCode, MwpError

# The largest Command, in bytes of the Update's payload (see command_payload_bytes). An
# accepted Command's bytes travel about three times in the completion of its workflow task
# (the acceptance, the Events in the Update result, the mirror activity's input), and the
# completions of several Commands can share a task: that total must stay under gRPC's 4 MiB,
# or the server terminates the workflow. 512 KiB is also where Temporal starts warning about
# a payload (``limit.blobSize.warn``). Large content belongs in Artifacts (spec 17.4).
MAX_COMMAND_BYTES: Final = 512 * 1024

# ``history.maxInFlightUpdatePayloads`` for every cluster serving Groups: the requests of the
# Updates admitted and not yet completed at one workflow, in total. Larger than one Command at
# MAX_COMMAND_BYTES (with its request envelope), so one always fits; small enough that every
# echo fits under the 2 MiB blob limit and one task's acceptances and results under 4 MiB.
MAX_IN_FLIGHT_UPDATE_BYTES: Final = 1024 * 1024


def command_payload_bytes(wire: str) -> int:
    """The bytes of ``wire`` as the Update's payload.

    Temporal's JSON converter sends a ``str`` as a JSON string with every non-ASCII character
    escaped (``\\u00e9``), so text in other scripts counts two to three times its UTF-8 size.
    """
    return len(json.dumps(wire))


def check_command_size(wire: str) -> None:
    """Refuse a Command text over :data:`MAX_COMMAND_BYTES` with ``PROTOCOL_VIOLATION``.

    The limit is one of this runtime's framing, checked before a byte is parsed: a Command
    of any schema can exceed it, so it is not ``SCHEMA_VALIDATION_FAILED``; resending the
    same bytes cannot succeed, so it is not ``BACKPRESSURE``.
    """
    size = command_payload_bytes(wire)
    if size > MAX_COMMAND_BYTES:
        raise MwpError(
            ErrorCode.PROTOCOL_VIOLATION,
            f"The Command is {size} bytes, over the limit of {MAX_COMMAND_BYTES}: publish "
            "large content as an Artifact and reference it by hash.",
            details={"commandBytes": size, "maxCommandBytes": MAX_COMMAND_BYTES},
        )
