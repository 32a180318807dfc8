"""Bounded offline execution, the Worker's side (spec 11.5; MWP-WRK-020, 021).

A run that loses the Group keeps what it held in an :class:`OfflineRun`: the lease, its expiry
and when the connection was lost. Until the grace deadline (the policy's grace after the
disconnection, never past the lease) it may buffer checkpoints of reversible progress:
:meth:`OfflineRun.checkpoint` signs a ``work.checkpoint`` under the run's own Session, bound by
the critical bounded-offline-execution extension to that lease and window, with what the run
spent offline. Nothing else may be buffered: a new WorkItem, a submission or a side effect
waits for a current lease. On reconnect, before anything else, :func:`reconciled` re-signs
each buffered Command under the new Session and Membership Epochs with a fresh ``issuedAt``,
keeping its Action ID, payload and binding; the Group charges the offline usage and records
the checkpoint in one decision (``mwp.core.group.offline_execution``).

In gateway mode the runtime does this by itself: a channel that cannot reach the Group raises
:class:`Disconnected`; the run then buffers into the process's
:class:`~mwp.agent.offline_buffer.OfflineBuffer`, and the reconnecting runtime drains that
buffer (which also seals it against every older Session) before it serves the new Session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from mwp.agent.offline_buffer import Buffered
from mwp.client.identity import Identity
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.clock import instant, plus_seconds
from mwp.core.group.offline_execution import (
    CHECKPOINT_KIND,
    MAX_GRACE_SECONDS,
    OFFLINE_EXTENSION,
    OFFLINE_VERSION,
    SIDE_EFFECTS,
)
from mwp.core.group.resource_usage import ResourceUsage
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import format_utc

CLAUSES: tuple[str, ...] = ("MWP-WRK-020", "MWP-WRK-021", "MWP-WRK-022")

# How long a run may go on alone after losing the Group unless the runtime is told otherwise
# (never more than the policy's MAX_GRACE_SECONDS, never past the lease).
DEFAULT_GRACE_SECONDS = 60


class Disconnected(MwpError):  # noqa: N818 (a state, as LeaseLost)
    """The Group's gateway cannot be reached: whether a Command sent meanwhile was decided is
    unknown (a retry is byte-equal, so it is decided at most once)."""

    def __init__(self, why: str) -> None:
        message = f"the Group is unreachable: {why}"
        super().__init__(ErrorCode.INTERNAL_ERROR, message, retryable=True)


@dataclass(frozen=True, slots=True)
class OfflineRun:
    """An active run that lost the Group, and the lease it held."""

    agent_id: str
    group_id: str
    work_item_id: str
    session_epoch: int
    ownership_epoch: int
    lease_id: str
    lease_expires_at: str
    disconnected_at: str
    grace_seconds: int = MAX_GRACE_SECONDS

    @property
    def grace_deadline(self) -> str:
        grace = plus_seconds(self.disconnected_at, min(self.grace_seconds, MAX_GRACE_SECONDS))
        return grace if instant(grace) <= instant(self.lease_expires_at) else self.lease_expires_at

    def checkpoint(
        self,
        identity: Identity,
        progress: Mapping[str, Any],
        *,
        membership_epoch: int | None,
        checkpoint_ref: str | None = None,
        usage: ResourceUsage | Mapping[str, Any] | None = None,
        now: str | None = None,
    ) -> dict[str, Any]:
        """A checkpoint buffered at ``now``, signed under the run's Session. ``usage`` is what
        the run spent offline (or its record's ``delta``). Refused (``WORK_LEASE_EXPIRED``) at
        or past the grace deadline, and (``AUTH_FORBIDDEN``) when it counts an external side
        effect."""
        buffered_at = now or format_utc(datetime.now(UTC))  # the exact time, not whole seconds
        if instant(buffered_at) >= instant(self.grace_deadline):
            raise MwpError(
                ErrorCode.WORK_LEASE_EXPIRED,
                f"the offline grace ended at {self.grace_deadline}: reconnect first",
            )
        delta = dict(usage.delta() if isinstance(usage, ResourceUsage) else usage or {})
        if delta.get(SIDE_EFFECTS):
            raise MwpError(ErrorCode.AUTH_FORBIDDEN, "no external side effect while offline")
        payload: dict[str, Any] = {
            "ownershipEpoch": self.ownership_epoch,
            "leaseId": self.lease_id,
            "progress": dict(progress),
        }
        if checkpoint_ref is not None:
            payload["checkpointRef"] = checkpoint_ref
        return identity.command(
            CHECKPOINT_KIND,
            payload,
            group_id=self.group_id,
            work_item_id=self.work_item_id,
            session_epoch=self.session_epoch,
            membership_epoch=membership_epoch,
            issued_at=buffered_at,
            extensions={OFFLINE_EXTENSION: self._binding(buffered_at, delta)},
        )

    def _binding(self, buffered_at: str, delta: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "version": OFFLINE_VERSION,
            "critical": True,
            "data": {
                "agentId": self.agent_id,
                "groupId": self.group_id,
                "workItemId": self.work_item_id,
                "sessionEpoch": self.session_epoch,
                "ownershipEpoch": self.ownership_epoch,
                "executionLeaseId": self.lease_id,
                "disconnectedAt": self.disconnected_at,
                "bufferedAt": buffered_at,
                "graceDeadline": self.grace_deadline,
                "executionLeaseExpiresAt": self.lease_expires_at,
                "resourceUsageDelta": dict(delta),
            },
        }


def reconciled(
    buffered: Mapping[str, Any],
    identity: Identity,
    *,
    session_epoch: int,
    membership_epoch: int | None,
    issued_at: str | None = None,
) -> dict[str, Any]:
    """A buffered Command rebased on the current Session and Membership and signed again:
    its Action ID, correlation, payload and binding unchanged."""
    if OFFLINE_EXTENSION not in buffered.get("extensions", {}):
        raise MwpError(ErrorCode.INVALID_COMMAND, "not a Command buffered offline")
    return identity.command(
        buffered["kind"],
        buffered["payload"],
        group_id=buffered["groupId"],
        work_item_id=buffered.get("workItemId"),
        session_epoch=session_epoch,
        membership_epoch=membership_epoch,
        action_id=buffered["actionId"],
        correlation_id=buffered["correlationId"],
        issued_at=issued_at,
        extensions=buffered["extensions"],
    )


class OfflineSupport(Protocol):
    """Where a run that lost the Group buffers (gateway mode: the process's connection)."""

    @property
    def grace_seconds(self) -> int: ...

    def disconnected_at(self) -> str: ...

    def membership_epoch(self, group_id: str) -> int | None: ...

    def keep(self, session_epoch: int, entry: Buffered) -> None: ...

    def ended(self, session_epoch: int) -> bool:
        """Whether the runtime reconnected under a Session after ``session_epoch``."""
        ...

    def reachable(self) -> bool:
        """Whether the runtime holds a live connection to the Group now."""
        ...


def buffer_checkpoint(
    run: OfflineRun,
    support: OfflineSupport,
    identity: Identity,
    progress: Mapping[str, Any],
    *,
    state: Any,
    latest_ref: str | None,
    delta: Mapping[str, Any],
) -> str | None:
    """Buffer one checkpoint of ``run`` in ``support``: the state's own reference when there
    is a ``state`` (its bytes kept for upload), else ``latest_ref``, the run's latest. The
    reference the checkpoint names; refused as :meth:`OfflineRun.checkpoint` refuses."""
    data = None if state is None else canonicalize(state)
    ref = latest_ref if data is None else "sha256:" + hashlib.sha256(data).hexdigest()
    command = run.checkpoint(
        identity,
        progress,
        membership_epoch=support.membership_epoch(run.group_id),
        checkpoint_ref=ref,
        usage=delta,
    )
    support.keep(run.session_epoch, Buffered(command, data))
    return ref
