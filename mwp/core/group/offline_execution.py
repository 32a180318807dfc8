"""Bounded offline execution: progress a Worker buffered while the Group was unreachable
(spec 11.5; MWP-WRK-020 to 022).

A disconnected Worker may go on with the reversible computation of a run it had started and
buffer its checkpoints, each a ``work.checkpoint`` carrying the critical extension
``urn:missionweaveprotocol:extension:bounded-offline-execution``. Its ``data`` is the binding:
the Agent, Group and WorkItem, the Session Epoch, Ownership Epoch, Execution Lease ID and lease
expiry the run held, when the connection was lost (``disconnectedAt``), when the checkpoint was
buffered (``bufferedAt``), the grace deadline the Worker kept to, and the six-dimensional usage
the run spent offline (``resourceUsageDelta``, a usage record's ``delta``; may be empty). On
reconnect the Worker re-signs the Command under its new Session and Membership Epochs with a
fresh ``issuedAt`` and keeps the binding as it was.

From rules ``RULES_OVERSIGHT`` on the Authority interprets that extension on ``work.checkpoint``
(``interprets``; the door refuses it on any other kind and under older rules) and accepts the
checkpoint only if the binding is the truth about the lease it names: the current owner, under
its current Ownership Epoch, for a lease of this ownership that is either still current or was
revoked by the owner's newer Session and not followed by another (``WorkItem.revoked_lease``);
buffered after the disconnection and the lease's start, before the grace deadline, the lease's
expiry and its revocation; a grace no longer than :data:`MAX_GRACE_SECONDS` (Organization
policy).

The binding's lease expiry is the one the run knew of. A Worker learns a renewed expiry only
from the renewal's receipt, which a lost connection can keep from it after the Group decided
the renewal; so from rules ``RULES_OFFLINE_RENEWALS`` on an earlier expiry of the same lease
is taken too, as long as it is one the lease could have had (``_an_earlier_expiry``) and the
grace deadline does not pass it: stating it only narrows the run's own window. Under older
rules it must be the lease's current expiry.

An offline delta naming an external side effect is ``AUTH_FORBIDDEN``: those need a current
lease and token. Any other nonzero offline delta is charged in the same decision, before the
checkpoint, as a ``resource_usage_recorded`` Event naming both Sessions; one dimension over
any budget refuses both (``BUDGET_EXCEEDED``), nothing recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_OFFLINE_RENEWALS, RULES_OVERSIGHT, AuthorityContext
from mwp.core.group.clock import instant, plus_seconds
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.rejection import forbidden, invalid, reject
from mwp.core.group.resource_usage import draft_usage
from mwp.core.group.state import ExecutionLease, GroupState, WorkItem
from mwp.core.wire.values import Instant, is_identifier, is_profile_timestamp

Json = dict[str, Any]

OFFLINE_EXTENSION: Final = "urn:missionweaveprotocol:extension:bounded-offline-execution"
OFFLINE_VERSION: Final = "0.1.0"
# Organization policy: the longest a Worker may go on alone after losing the Group.
MAX_GRACE_SECONDS: Final = 300
CHECKPOINT_KIND: Final = "work.checkpoint"
SIDE_EFFECTS: Final = "externalSideEffectLimit"

CLAUSES: tuple[str, ...] = ("MWP-WRK-021", "MWP-WRK-022")

_TIMES = ("disconnectedAt", "bufferedAt", "graceDeadline", "executionLeaseExpiresAt")
_IDS = ("agentId", "groupId", "workItemId", "executionLeaseId")
_EPOCHS = ("sessionEpoch", "ownershipEpoch")
_MEMBERS = frozenset((*_TIMES, *_IDS, *_EPOCHS, "resourceUsageDelta"))


def interprets(extension: str, kind: str, rules: int) -> bool:
    """Whether this Authority understands ``extension`` as critical on a ``kind`` Command."""
    return extension == OFFLINE_EXTENSION and kind == CHECKPOINT_KIND and rules >= RULES_OVERSIGHT


@dataclass(frozen=True, slots=True)
class OfflineBinding:
    agent_id: str
    group_id: str
    work_item_id: str
    session_epoch: int
    ownership_epoch: int
    lease_id: str
    disconnected_at: str
    buffered_at: str
    grace_deadline: str
    lease_expires_at: str
    delta: Json  # a usage record's delta; empty when the run spent nothing offline


@dataclass(frozen=True, slots=True)
class HeldLease:
    """The lease a binding names, as the Group knows it, and when a newer Session revoked it
    (None: still current)."""

    lease: ExecutionLease
    revoked_at: str | None


def offline_binding(cmd: Incoming, ctx: AuthorityContext) -> OfflineBinding | None:
    """The binding a Command carries, read strictly; None when it carries none."""
    if ctx.rules < RULES_OVERSIGHT or OFFLINE_EXTENSION not in cmd.critical_extensions:
        return None
    entry = cmd.extensions[OFFLINE_EXTENSION]
    if entry.get("version") != OFFLINE_VERSION or set(entry) != {"version", "critical", "data"}:
        _malformed("the extension entry is {version: 0.1.0, critical: true, data}")
    data = entry["data"]
    if not isinstance(data, dict) or set(data) != _MEMBERS:
        _malformed(f"data has exactly the members {sorted(_MEMBERS)}")
    if not all(isinstance(data[n], str) and is_identifier(data[n]) for n in _IDS):
        _malformed(f"{', '.join(_IDS)} are identifiers")
    if not all(isinstance(data[n], str) and is_profile_timestamp(data[n]) for n in _TIMES):
        _malformed(f"{', '.join(_TIMES)} are UTC timestamps")
    if not all(type(data[n]) is int and data[n] >= 1 for n in _EPOCHS):
        _malformed(f"{', '.join(_EPOCHS)} are positive integers")
    if not isinstance(data["resourceUsageDelta"], dict):
        _malformed("resourceUsageDelta is an object")
    return OfflineBinding(
        data["agentId"],
        data["groupId"],
        data["workItemId"],
        data["sessionEpoch"],
        data["ownershipEpoch"],
        data["executionLeaseId"],
        data["disconnectedAt"],
        data["bufferedAt"],
        data["graceDeadline"],
        data["executionLeaseExpiresAt"],
        dict(data["resourceUsageDelta"]),
    )


def held_lease(item: WorkItem, lease_id: str) -> HeldLease:
    """The lease of this ownership the binding names: current, or revoked by a newer Session
    with no lease after it. Anything else (closed by the owner, expired, another ownership's,
    unknown) takes no offline progress."""
    lease, revoked = item.execution_lease, item.revoked_lease
    if lease is not None and lease.lease_id == lease_id:
        return HeldLease(lease, None)
    if lease is None and revoked is not None and revoked["leaseId"] == lease_id:
        return HeldLease(ExecutionLease.from_json(revoked), revoked["revokedAt"])
    reject(
        ErrorCode.WORK_LEASE_EXPIRED,
        "offline progress is taken only under the lease the run held, while no other followed",
        leaseId=lease_id,
        reason="offline_lease",
    )


def check_binding(
    binding: OfflineBinding, cmd: Incoming, item: WorkItem, lease: HeldLease, ctx: AuthorityContext
) -> None:
    """The binding states the Command's own Group, WorkItem, owner and lease, and the checkpoint
    was buffered inside the window that lease and the grace allowed."""
    _agree(
        "the Command's",
        "offline_binding",
        agentId=(binding.agent_id, cmd.actor_id),
        groupId=(binding.group_id, cmd.group_id),
        workItemId=(binding.work_item_id, item.work_item_id),
        ownershipEpoch=(binding.ownership_epoch, cmd.payload.raw("ownershipEpoch")),
        executionLeaseId=(binding.lease_id, cmd.payload.raw("leaseId")),
    )
    held = lease.lease
    _agree(
        "the lease's",
        "offline_lease_facts",
        agentId=(binding.agent_id, held.agent_id),
        sessionEpoch=(binding.session_epoch, held.session_epoch),
        ownershipEpoch=(binding.ownership_epoch, held.ownership_epoch),
    )
    _check_stated_expiry(binding, held, ctx)
    _check_window(binding, lease, ctx)
    _check_stated_grace(binding)


def _agree(whose: str, reason: str, **pairs: tuple[Any, Any]) -> None:
    """Each member the binding states is ``whose``: the first that is not is refused."""
    for member, (bound, actual) in pairs.items():
        if bound != actual:
            _misstated(member, whose, reason)


def _misstated(member: str, whose: str, reason: str) -> NoReturn:
    invalid(f"the offline binding's {member} is not {whose}", reason=reason, member=member)


def _check_stated_expiry(
    binding: OfflineBinding, held: ExecutionLease, ctx: AuthorityContext
) -> None:
    """The lease expiry the binding states is the lease's current one or, from rules
    ``RULES_OFFLINE_RENEWALS`` on, an earlier one a lost renewal receipt left the run with."""
    stated = instant(binding.lease_expires_at)
    if stated == instant(held.expires_at):
        return
    if ctx.rules >= RULES_OFFLINE_RENEWALS and _an_earlier_expiry(held, stated):
        return
    _misstated("executionLeaseExpiresAt", "the lease's", "offline_lease_facts")


def _an_earlier_expiry(lease: ExecutionLease, stated: Instant) -> bool:
    """Whether ``lease`` could have expired at ``stated`` before its current expiry. A lease
    never renewed had no other expiry. Each expiry is after the lease's start; and since a
    lease past its expiry takes no renewal, the expiry a lease's only renewal replaced is after
    that renewal."""
    if lease.renewal_count == 0 or stated >= instant(lease.expires_at):
        return False
    after = lease.last_renewed_at if lease.renewal_count == 1 else None
    return stated > instant(after or lease.started_at)


def _check_window(binding: OfflineBinding, held: HeldLease, ctx: AuthorityContext) -> None:
    disconnected, buffered = instant(binding.disconnected_at), instant(binding.buffered_at)
    grace = instant(binding.grace_deadline)
    if not disconnected <= buffered < grace:
        _outside("buffered before the disconnection, or not before its grace deadline")
    lease = held.lease
    if buffered < instant(lease.started_at):
        _outside("buffered before the lease started")
    if grace > instant(lease.expires_at):
        _outside("the grace deadline passes the lease's expiry")
    if grace > instant(plus_seconds(binding.disconnected_at, MAX_GRACE_SECONDS)):
        _outside(f"a grace longer than the {MAX_GRACE_SECONDS} s policy allows")
    if buffered > instant(ctx.now):
        _outside("buffered after the Group's own time")
    if held.revoked_at is not None and buffered >= instant(held.revoked_at):
        _outside("buffered after the lease was revoked")


def _check_stated_grace(binding: OfflineBinding) -> None:
    """The run kept to the lease expiry it knew of. (Under rules older than
    ``RULES_OFFLINE_RENEWALS`` that is the lease's current expiry, which the window holds the
    grace to already: this never refuses there.)"""
    if instant(binding.grace_deadline) > instant(binding.lease_expires_at):
        _outside("the grace deadline passes the lease expiry the binding states")


def charge_offline_usage(
    state: GroupState,
    cmd: Incoming,
    binding: OfflineBinding,
    item: WorkItem,
    lease: HeldLease,
    drafts: Drafts,
) -> None:
    """Charge a nonzero offline delta before the checkpoint, naming both Sessions."""
    if not binding.delta:
        return
    if binding.delta.get(SIDE_EFFECTS):
        forbidden(
            "no external side effect may be performed offline, without a current lease",
            reason="offline_side_effect",
        )
    draft_usage(
        state,
        item,
        binding.delta,
        drafts,
        ownership_epoch=binding.ownership_epoch,
        lease_id=lease.lease.lease_id,
        session_epoch=lease.lease.session_epoch,
        reconciliation={
            "sessionEpoch": cmd.session_epoch,
            "disconnectedAt": binding.disconnected_at,
            "bufferedAt": binding.buffered_at,
            "graceDeadline": binding.grace_deadline,
        },
    )


def _outside(why: str) -> NoReturn:
    reject(
        ErrorCode.WORK_LEASE_EXPIRED,
        f"offline progress outside its lease and grace window: {why}",
        reason="offline_window",
    )


def _malformed(why: str) -> NoReturn:
    invalid(f"malformed bounded-offline-execution binding: {why}", reason="offline_binding")
