"""Who may act on a WorkItem's execution: its current owner, under its current Ownership Epoch
and (for what runs under it) its current Execution Lease (spec 10.3, 11.3). Read by every rule a
working agent's Command meets: start, renewal, checkpoint, publication, usage, disclosure."""

from __future__ import annotations

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext
from mwp.core.group.clock import reached
from mwp.core.group.incoming import Incoming
from mwp.core.group.rejection import forbidden, reject
from mwp.core.group.state import ExecutionLease, Ownership, WorkItem


def require_owner(item: WorkItem, cmd: Incoming) -> Ownership:
    """The current, unfenced ownership grant the Command acts under."""
    epoch = cmd.payload.integer("ownershipEpoch", minimum=1)
    owner = item.owner
    if owner is None or not owner.live or epoch != item.ownership_epoch:
        reject(
            ErrorCode.WORK_STALE_OWNERSHIP,
            "the Ownership Epoch is fenced",
            ownershipEpoch=epoch,
            currentOwnershipEpoch=item.ownership_epoch,
        )
    if not cmd.is_service and owner.agent_id != cmd.actor_id:
        forbidden("only the WorkItem's owner may issue this Command")
    return owner


def require_lease(
    item: WorkItem, cmd: Incoming, ctx: AuthorityContext, *, releasing: bool = False
) -> ExecutionLease:
    lease_id = cmd.payload.id("leaseId")
    lease = item.execution_lease
    if lease is None or lease.lease_id != lease_id:
        reject(ErrorCode.WORK_LEASE_EXPIRED, "not the current Execution Lease", leaseId=lease_id)
    if reached(ctx.now, lease.expires_at):
        reject(ErrorCode.WORK_LEASE_EXPIRED, "the Execution Lease has expired", leaseId=lease_id)
    if cmd.is_agent and cmd.session_epoch != lease.session_epoch and not releasing:
        reject(
            ErrorCode.WORK_LEASE_EXPIRED,
            "the Execution Lease was revoked by a newer Session",
            leaseId=lease_id,
        )
    return lease
