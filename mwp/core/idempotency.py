"""Idempotency keys for external tool operations (MWP-WRK-031, MWP-WRK-018).

A tool key is derived from exactly four things: the Mission ID, the WorkItem ID, the Ownership
Epoch and a logical operation ID chosen by the capability (``"search:q1"``, ``"invoice"``).
It is never derived from a Temporal activity ID, attempt number or run ID: those change after
a worker restart or continue-as-new, and a key that changes would let a retry repeat an effect.

Why the Ownership Epoch is part of it:

* the *same* owner keeps its epoch across retries, crashes of its worker and cooperative
  preemption (a checkpoint releases the Execution Lease but keeps ownership), so a retried or
  resumed capability gets the *same* keys and finds its recorded results;
* a *new* owner (after the old one was fenced: lease expired, reassigned, re-offered) holds a
  higher epoch and gets *fresh* keys. It does not inherit results it cannot vouch for from a
  fenced owner, and an external system that dedupes by key treats its calls as new requests,
  while calls from the fenced owner (a late, delayed retry) still carry the old epoch's keys
  and cannot be mistaken for the new owner's.

The key is ``sha256:`` over the JCS form of a small tagged object, so it is stable across
processes, Python versions and machines, and reveals none of the IDs it was made from.
"""

from __future__ import annotations

from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import is_identifier, is_safe_integer, is_sha256_ref

CLAUSES: tuple[str, ...] = ("MWP-WRK-018", "MWP-WRK-031")

TOOL_KEY_PURPOSE = "urn:mwp:tool-idempotency-key:v1"
ATTEMPT_KEY_PURPOSE = "urn:mwp:derived-attempt-key:v1"
MAX_OP_ID_LENGTH = 500


def _check_op_id(op_id: str) -> None:
    if not isinstance(op_id, str) or not op_id.strip() or len(op_id) > MAX_OP_ID_LENGTH:
        raise ValueError(f"op_id must be a non-blank string of at most {MAX_OP_ID_LENGTH} chars")


def tool_key(mission_id: str, work_item_id: str, ownership_epoch: int, op_id: str) -> str:
    """The stable ``sha256:`` idempotency key of one logical tool operation."""
    for name, value in (("mission_id", mission_id), ("work_item_id", work_item_id)):
        if not isinstance(value, str) or not is_identifier(value):
            raise ValueError(f"{name} must be an MWP identifier (an absolute URI)")
    if (
        type(ownership_epoch) is not int
        or ownership_epoch < 1
        or not is_safe_integer(ownership_epoch)
    ):
        raise ValueError("ownership_epoch must be a positive safe integer")
    _check_op_id(op_id)
    return sha256_ref(
        canonicalize(
            {
                "purpose": TOOL_KEY_PURPOSE,
                "missionId": mission_id,
                "workItemId": work_item_id,
                "ownershipEpoch": ownership_epoch,
                "opId": op_id,
            }
        )
    )


def attempt_key(key: str, attempt: int) -> str:
    """A deterministic key for attempt ``attempt`` (1, 2, ...) of the operation ``key``.

    For external systems that need a distinct request per attempt (MWP-WRK-018) while staying
    reproducible: the same key and attempt number always give the same attempt key.
    """
    if not is_sha256_ref(key):
        raise ValueError("key must be a sha256: reference")
    if type(attempt) is not int or attempt < 1 or not is_safe_integer(attempt):
        raise ValueError("attempt must be a positive safe integer")
    body = {"purpose": ATTEMPT_KEY_PURPOSE, "key": key, "attempt": attempt}
    return sha256_ref(canonicalize(body))
