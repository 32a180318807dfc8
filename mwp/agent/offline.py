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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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
from mwp.core.wire.values import format_utc

CLAUSES: tuple[str, ...] = ("MWP-WRK-021", "MWP-WRK-022")


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
        usage: ResourceUsage | None = None,
        now: str | None = None,
    ) -> dict[str, Any]:
        """A checkpoint buffered at ``now``, signed under the run's Session. Refused
        (``WORK_LEASE_EXPIRED``) at or past the grace deadline, and (``AUTH_FORBIDDEN``) when
        ``usage`` counts an external side effect."""
        buffered_at = now or format_utc(datetime.now(UTC))  # the exact time, not whole seconds
        if instant(buffered_at) >= instant(self.grace_deadline):
            raise MwpError(
                ErrorCode.WORK_LEASE_EXPIRED,
                f"the offline grace ended at {self.grace_deadline}: reconnect first",
            )
        delta = usage.delta() if usage is not None else {}
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
