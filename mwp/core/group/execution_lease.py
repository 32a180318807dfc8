"""Fenced execution: ownership grants, Execution Leases and blocked leases (spec 11.3-11.5).

Every owner Command names the Ownership Epoch it acts under (``payload.ownershipEpoch``);
while the item is ``active`` it also names the current Execution Lease (``payload.leaseId``).

* an older or fenced Ownership Epoch -> ``WORK_STALE_OWNERSHIP``;
* a Lease ID that is not the current one, even under the same Ownership Epoch, or a lease past
  its expiry, or one revoked by a newer Session of its holder -> ``WORK_LEASE_EXPIRED``.

A checkpoint or block may still release a lease revoked only by the holder's own Session
replacement, so a restarted runtime can return its item to ``queued`` (spec 11.3) and start
it again under a new lease. When a grant runs out, the timer records
``ext.missionweaveprotocol.core.ownership_expired``: the owner is fenced, the item keeps its
state (10.2 has no row for expiry) and may be re-offered under a higher Ownership Epoch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext, TimerKind
from mwp.core.group.approval import execution_approved, execution_gate
from mwp.core.group.clock import plus_seconds, reached
from mwp.core.group.dependencies import unsatisfied
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.offline_execution import (
    OfflineBinding,
    charge_offline_usage,
    check_binding,
    held_lease,
    offline_binding,
)
from mwp.core.group.ownership import require_lease, require_owner
from mwp.core.group.payload import members
from mwp.core.group.policy import (
    BLOCKED_LEASE_SECONDS,
    EXECUTION_LEASE_SECONDS,
    MAX_BLOCKED_LEASE_SECONDS,
    MAX_EXECUTION_LEASE_SECONDS,
)
from mwp.core.group.rejection import bad_transition, forbidden, invalid, reject
from mwp.core.group.roles import (
    coordinator_or_working_agent,
    is_current_coordinator,
    working_agent,
    working_agent_or_service,
)
from mwp.core.group.rules import CommandRule, work_item_target
from mwp.core.group.state import BlockedLease, ExecutionLease, GroupState, Ownership, WorkItem
from mwp.core.group.views import (
    blocked_lease_document,
    execution_lease_document,
    execution_lease_from_document,
)
from mwp.core.group.work_contract import criterion_ids, progress
from mwp.core.group.work_item_state import (
    active_mission,
    expiry_of,
    fence_owner,
    get_item,
    has_live_owner,
    release_ownership,
    running_child,
    settle_link,
    touch,
)
from mwp.core.wire.values import is_identifier, is_sha256_ref

Json = dict[str, Any]

LEASE_RENEW_KIND: Final = "ext.missionweaveprotocol.core.execution_lease_renew"
OWNERSHIP_EXPIRED_KIND: Final = "ext.missionweaveprotocol.core.ownership_expired"
LEASE_REVOKED_KIND: Final = "ext.missionweaveprotocol.core.execution_lease_revoked"
_EVIDENCE_RESULTS = frozenset({"passed", "failed", "inconclusive"})

CLAUSES: tuple[str, ...] = (
    "MWP-EVT-006",
    "MWP-FND-017",
    "MWP-WRK-013",
    "MWP-WRK-014",
    "MWP-WRK-019",
)


def _owned_item(
    state: GroupState, cmd: Incoming, required_state: str
) -> tuple[WorkItem, Ownership]:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state != required_state:
        bad_transition("WorkItem", item.state, cmd.kind)
    return item, require_owner(item, cmd)


def _progress(cmd: Incoming, *, required: bool) -> Json | None:
    if cmd.payload.has("progress"):
        return progress(cmd.payload.raw("progress"))
    if required:
        invalid("payload.progress is required")
    return None


def _item(state: GroupState, event: Json) -> WorkItem:
    item = state.work_items[event["workItemId"]]
    touch(item, event)
    return item


# --- work.start ----------------------------------------------------------------------------------


def _decide_start(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    item, owner = _owned_item(state, cmd, "queued")
    if reached(ctx.now, owner.start_by):
        reject(ErrorCode.WORK_LEASE_EXPIRED, "the start-by deadline has passed")
    pending = unsatisfied(state, item)
    if pending:
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            "the WorkItem is not eligible: dependencies are not verified",
            pendingDependencies=pending,
        )
    if execution_gate(state, item) != "not_required" and not execution_approved(item):
        reject(ErrorCode.APPROVAL_REQUIRED, "execution of this WorkItem awaits approval")
    seconds = cmd.payload.integer(
        "leaseSeconds",
        minimum=1,
        maximum=MAX_EXECUTION_LEASE_SECONDS,
        default=EXECUTION_LEASE_SECONDS,
    )
    assert cmd.session_epoch is not None
    lease = ExecutionLease(
        lease_id=derive_id(
            state.group_id, "execution-lease", item.work_item_id, drafts.next_sequence
        ),
        agent_id=owner.agent_id,
        session_epoch=cmd.session_epoch,
        ownership_epoch=owner.epoch,
        started_at=ctx.now,
        expires_at=plus_seconds(ctx.now, seconds),
    )
    drafts.add(
        "work.started",
        ("work_item", item.work_item_id),
        {
            "ownershipEpoch": owner.epoch,
            "executionLease": execution_lease_document(state, item, lease),
        },
        work_item_id=item.work_item_id,
    )


def _evolve_started(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    item.execution_lease = execution_lease_from_document(event["payload"]["executionLease"])
    item.revoked_lease = None  # a new lease: no offline progress under an older one
    item.state = "active"


# --- ext.missionweaveprotocol.core.execution_lease_renew -----------------------------------------


def _decide_renew(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    item, _ = _owned_item(state, cmd, "active")
    lease = require_lease(item, cmd, ctx)
    seconds = cmd.payload.integer(
        "leaseSeconds",
        minimum=1,
        maximum=MAX_EXECUTION_LEASE_SECONDS,
        default=EXECUTION_LEASE_SECONDS,
    )
    renewed = ExecutionLease(
        lease_id=lease.lease_id,
        agent_id=lease.agent_id,
        session_epoch=lease.session_epoch,
        ownership_epoch=lease.ownership_epoch,
        started_at=lease.started_at,
        expires_at=plus_seconds(ctx.now, seconds),
        renewal_count=lease.renewal_count + 1,
        last_renewed_at=ctx.now,
    )
    payload: Json = {"executionLease": execution_lease_document(state, item, renewed)}
    reported = _progress(cmd, required=False)
    if reported is not None:
        payload["progress"] = reported
    if cmd.payload.has("checkpointRef"):
        # A safe point reached without releasing the lease: a successor resumes from it.
        payload["checkpointRef"] = _reference(cmd, "checkpointRef")
    drafts.add(
        "work.progressed", ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
    )


def _evolve_progressed(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    payload = event["payload"]
    item.execution_lease = execution_lease_from_document(payload["executionLease"])
    if "progress" in payload:
        item.progress = payload["progress"]
    if "checkpointRef" in payload:
        item.checkpoint = {
            "checkpointRef": payload["checkpointRef"],
            "leaseId": payload["executionLease"]["leaseId"],
            "checkpointedAt": event["occurredAt"],
            **_recorded_by(event),
        }


# --- work.checkpoint / work.block ----------------------------------------------------------------


def _decide_checkpoint(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    binding = offline_binding(cmd, ctx)
    if binding is not None:
        _decide_offline_checkpoint(state, cmd, ctx, drafts, binding)
        return
    item, owner = _owned_item(state, cmd, "active")
    lease = require_lease(item, cmd, ctx, releasing=True)
    _draft_checkpointed(cmd, ctx, drafts, item, owner, lease.lease_id)


def _draft_checkpointed(
    cmd: Incoming,
    ctx: AuthorityContext,
    drafts: Drafts,
    item: WorkItem,
    owner: Ownership,
    lease_id: str,
) -> None:
    payload: Json = {
        "ownershipEpoch": owner.epoch,
        "leaseId": lease_id,
        "progress": _progress(cmd, required=True),
        # Releasing execution keeps a bounded ownership lease: a fresh start-by deadline.
        "startBy": plus_seconds(ctx.now, owner.start_within_seconds),
    }
    if cmd.payload.has("checkpointRef"):
        payload["checkpointRef"] = _reference(cmd, "checkpointRef")
    drafts.add(
        "work.checkpointed",
        ("work_item", item.work_item_id),
        payload,
        work_item_id=item.work_item_id,
    )


def _decide_offline_checkpoint(
    state: GroupState,
    cmd: Incoming,
    ctx: AuthorityContext,
    drafts: Drafts,
    binding: OfflineBinding,
) -> None:
    """A checkpoint buffered offline, reconciled (offline_execution.py): the offline usage is
    charged first, then the checkpoint recorded under the lease the run held."""
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state not in ("active", "queued"):
        bad_transition("WorkItem", item.state, cmd.kind)
    owner = require_owner(item, cmd)
    lease = held_lease(item, cmd.payload.id("leaseId"))
    check_binding(binding, cmd, item, lease, ctx)
    charge_offline_usage(state, cmd, binding, item, lease, drafts)
    _draft_checkpointed(cmd, ctx, drafts, item, owner, lease.lease.lease_id)


def _reference(cmd: Incoming, name: str) -> str:
    value = cmd.payload.raw(name)
    if not isinstance(value, str) or not (is_sha256_ref(value) or is_identifier(value)):
        invalid(f"payload.{name} must be an identifier or a sha256 content hash")
    return value


def _evolve_checkpointed(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    payload = event["payload"]
    owner = item.owner
    assert owner is not None
    owner.start_by = payload["startBy"]
    item.execution_lease = None
    item.progress = payload["progress"]
    item.checkpoint = {
        "checkpointRef": payload.get("checkpointRef"),
        "leaseId": payload["leaseId"],
        "checkpointedAt": event["occurredAt"],
        **_recorded_by(event),
    }
    item.state = "queued"


def _recorded_by(event: Json) -> Json:
    """Where the checkpoint was recorded: a Context Package handing the item to a new owner
    cites that Event, so the newcomer may resume from it (MWP-MSN-012)."""
    return {"sequence": event["sequence"], "eventId": event["eventId"]}


def _decide_block(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    item, owner = _owned_item(state, cmd, "active")
    lease = require_lease(item, cmd, ctx, releasing=True)
    p = cmd.payload
    resolution = p.text("requiredResolution")
    seconds = p.integer(
        "blockedLeaseSeconds",
        minimum=1,
        maximum=MAX_BLOCKED_LEASE_SECONDS,
        default=BLOCKED_LEASE_SECONDS,
    )
    blocked = BlockedLease(
        lease_id=derive_id(
            state.group_id, "blocked-lease", item.work_item_id, drafts.next_sequence
        ),
        issued_at=ctx.now,
        expires_at=plus_seconds(ctx.now, seconds),
        required_resolution=resolution,
    )
    payload: Json = {
        "ownershipEpoch": owner.epoch,
        "leaseId": lease.lease_id,
        "requiredResolution": resolution,
        "blockedLease": blocked_lease_document(state, item, blocked, owner),
    }
    reported = _progress(cmd, required=False)
    if reported is not None:
        payload["progress"] = reported
    drafts.add(
        "work.blocked", ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
    )


def _evolve_blocked(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    payload = event["payload"]
    if "childState" in payload:  # its child Mission failed: the item stays blocked, unowned
        settle_link(item, event)
        return
    doc = payload["blockedLease"]
    item.execution_lease = None
    item.blocked_lease = BlockedLease(
        doc["leaseId"], doc["issuedAt"], doc["expiresAt"], payload["requiredResolution"]
    )
    if "progress" in payload:
        item.progress = payload["progress"]
    item.state = "blocked"


# --- work.unblock --------------------------------------------------------------------------------


def _acts_as_owner(cmd: Incoming) -> bool:
    return cmd.payload.has("ownershipEpoch")


def _owner_or_coordinating(state: GroupState, cmd: Incoming) -> bool:
    return cmd.is_agent and not _acts_as_owner(cmd)


def _decide_unblock(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state != "blocked":
        bad_transition("WorkItem", item.state, cmd.kind)
    if running_child(item) is not None:
        bad_transition(
            "WorkItem", item.state, cmd.kind, reason="it waits for its linked child Mission"
        )
    if _acts_as_owner(cmd):
        require_owner(item, cmd)
        if item.blocked_lease is None or reached(ctx.now, item.blocked_lease.expires_at):
            reject(ErrorCode.WORK_LEASE_EXPIRED, "the blocked lease has expired")
    elif not is_current_coordinator(state, cmd):
        forbidden("only the owner or the Coordinator may unblock a WorkItem")
    payload: Json = {}
    resolution = cmd.payload.opt_text("resolution")
    if resolution is not None:
        payload["resolution"] = resolution
    owner = item.owner
    if owner is not None and has_live_owner(item, ctx.now):
        # Back into the owner's queue under the same epoch, with a fresh start-by deadline.
        payload.update(
            nextState="queued", startBy=plus_seconds(ctx.now, owner.start_within_seconds)
        )
    else:
        payload["nextState"] = "open"  # ownership expired: re-offer
        if owner is not None:
            payload["fencedOwnership"] = {"agentId": owner.agent_id, "ownershipEpoch": owner.epoch}
    drafts.add(
        "work.unblocked", ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
    )


def _evolve_unblocked(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    payload = event["payload"]
    item.blocked_lease = None
    if payload["nextState"] == "queued":
        assert item.owner is not None
        item.owner.start_by = payload["startBy"]
    else:
        release_ownership(item)
    item.state = payload["nextState"]


# --- work.submit ---------------------------------------------------------------------------------


def _decide_submit(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    item, owner = _owned_item(state, cmd, "active")
    lease = require_lease(item, cmd, ctx)
    p = cmd.payload
    artifacts = p.sha256_list("artifactHashes", min_items=1)
    # A submitted Artifact is one whose signed manifest the Group holds (artifact.publish).
    unpublished = [h for h in artifacts if h not in state.artifacts]
    if unpublished:
        invalid(
            "every submitted Artifact must be published in this Group first",
            member="payload.artifactHashes",
            unpublishedArtifacts=unpublished,
        )
    known = set(criterion_ids(item.contract))
    covered: set[str] = set()
    evidence = []
    for entry in p.objects("evidence", min_items=1, max_items=1000):
        evidence_id = entry.id("evidenceId")
        criteria = entry.raw("criterionIds")
        if not isinstance(criteria, list) or not criteria:
            invalid(
                "each Evidence must map to acceptance criteria of the contract",
                member="payload.evidence[].criterionIds",
                evidenceId=evidence_id,
            )
        unknown = [c for c in criteria if not (isinstance(c, str) and c in known)]
        if unknown:
            invalid(
                "Evidence names criteria the contract does not define",
                member="payload.evidence[].criterionIds",
                evidenceId=evidence_id,
                unknownCriteria=[str(c)[:200] for c in unknown[:20]],
            )
        record: Json = {"evidenceId": evidence_id, "criterionIds": list(criteria)}
        if entry.has("result"):
            record["result"] = entry.choice("result", _EVIDENCE_RESULTS)
        covered.update(criteria)
        evidence.append(record)
    ids = [e["evidenceId"] for e in evidence]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        invalid("Evidence IDs must be unique", duplicateEvidenceIds=duplicates)
    uncovered = sorted(known - covered)
    if uncovered:
        invalid("every acceptance criterion needs Evidence", uncoveredCriteria=uncovered)
    submission = {
        "artifactHashes": artifacts,
        "evidenceIds": ids,
        "evidence": evidence,
        "submittedAt": ctx.now,
        "ownershipEpoch": owner.epoch,
        "leaseId": lease.lease_id,
    }
    drafts.add(
        "work.submitted",
        ("work_item", item.work_item_id),
        {"submission": submission},
        work_item_id=item.work_item_id,
    )


def _evolve_submitted(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    item.execution_lease = None
    item.submission = event["payload"]["submission"]
    item.state = "submitted"


# --- ext.missionweaveprotocol.core.ownership_expired ---------------------------------------------


def timer_token(item: WorkItem) -> tuple[TimerKind, str, str] | None:
    """(timer kind, due time, token) of the live owner's running grant, if any."""
    due = expiry_of(item)
    if due is None:
        return None
    owner = item.owner
    assert owner is not None
    if due[1] == "start_by_missed":
        return "start_by", due[0], owner.lease_id
    if due[1] == "execution_lease_expired":
        assert item.execution_lease is not None
        return "execution_lease", due[0], item.execution_lease.lease_id
    assert item.blocked_lease is not None
    return "blocked_lease", due[0], item.blocked_lease.lease_id


_TIMER_REASONS = {
    "start_by": "start_by_missed",
    "execution_lease": "execution_lease_expired",
    "blocked_lease": "blocked_lease_expired",
}


def expiry_draft(item: WorkItem, timer_kind: str, token: str, now: str, drafts: Drafts) -> bool:
    """Draft the fencing of an owner whose grant named by ``token`` ran out; False if the
    timer is stale (another grant is current, it was renewed, or it is not due yet)."""
    owner = item.owner
    due = expiry_of(item)
    if owner is None or due is None or _TIMER_REASONS.get(timer_kind) != due[1]:
        return False
    current = {
        "start_by_missed": owner.lease_id,
        "execution_lease_expired": item.execution_lease.lease_id if item.execution_lease else "",
        "blocked_lease_expired": item.blocked_lease.lease_id if item.blocked_lease else "",
    }[due[1]]
    if token != current or not reached(now, due[0]):
        return False
    drafts.add(
        OWNERSHIP_EXPIRED_KIND,
        ("work_item", item.work_item_id),
        {
            "reason": due[1],
            "agentId": owner.agent_id,
            "ownershipEpoch": owner.epoch,
            "leaseId": token,
            "expiredAt": due[0],
        },
        work_item_id=item.work_item_id,
    )
    return True


def _evolve_expired(state: GroupState, event: Json) -> None:
    fence_owner(_item(state, event), event["payload"]["reason"])


# --- ext.missionweaveprotocol.core.execution_lease_revoked ---------------------------------------


def revocation_drafts(
    state: GroupState, session_epochs: Mapping[str, int], now: str, drafts: Drafts
) -> list[str]:
    """Draft the revocation of every active Execution Lease whose holder has since opened a
    newer Session (spec 11.3): the item returns to ``queued`` under the same Ownership Epoch,
    with a fresh start-by deadline, so the agent's new runtime can start it under a new lease.
    The WorkItems revoked, in ID order (none: nothing to record)."""
    revoked = []
    for item_id in sorted(state.work_items):
        item = state.work_items[item_id]
        lease, owner = item.execution_lease, item.owner
        if item.state != "active" or lease is None or owner is None or not owner.live:
            continue
        current = session_epochs.get(lease.agent_id)
        if current is None or current <= lease.session_epoch:
            continue
        drafts.add(
            LEASE_REVOKED_KIND,
            ("work_item", item_id),
            {
                "reason": "session_replaced",
                "agentId": lease.agent_id,
                "ownershipEpoch": owner.epoch,
                "leaseId": lease.lease_id,
                "sessionEpoch": lease.session_epoch,
                "currentSessionEpoch": current,
                "startBy": plus_seconds(now, owner.start_within_seconds),
            },
            work_item_id=item_id,
        )
        revoked.append(item_id)
    return revoked


def _evolve_revoked(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    owner = item.owner
    assert owner is not None
    owner.start_by = event["payload"]["startBy"]
    lease = item.execution_lease
    if lease is not None:  # offline progress under it is checked against it (offline_execution)
        item.revoked_lease = {**lease.to_json(), "revokedAt": event["occurredAt"]}
    item.execution_lease = None
    item.state = "queued"


RULES = (
    CommandRule(
        "work.start",
        _decide_start,
        working_agent,
        target=work_item_target,
        payload=members("ownershipEpoch", "leaseSeconds"),
        clauses=("MWP-AUT-003", "MWP-FND-017", "MWP-WRK-007", "MWP-WRK-013"),
    ),
    CommandRule(
        LEASE_RENEW_KIND,
        _decide_renew,
        working_agent_or_service,
        target=work_item_target,
        payload=members("ownershipEpoch", "leaseId", "leaseSeconds", "progress", "checkpointRef"),
        clauses=("MWP-FND-017", "MWP-WRK-013", "MWP-WRK-016"),
    ),
    CommandRule(
        "work.checkpoint",
        _decide_checkpoint,
        working_agent,
        target=work_item_target,
        payload=members("ownershipEpoch", "leaseId", "progress", "checkpointRef"),
        clauses=("MWP-FND-017", "MWP-WRK-013", "MWP-WRK-016"),
    ),
    CommandRule(
        "work.block",
        _decide_block,
        working_agent,
        target=work_item_target,
        payload=members(
            "ownershipEpoch", "leaseId", "requiredResolution", "blockedLeaseSeconds", "progress"
        ),
        clauses=("MWP-FND-017", "MWP-WRK-013", "MWP-WRK-017"),
    ),
    CommandRule(
        "work.unblock",
        _decide_unblock,
        coordinator_or_working_agent,
        target=work_item_target,
        coordinator=_owner_or_coordinating,
        payload=members("ownershipEpoch", "resolution"),
        clauses=("MWP-EVT-002", "MWP-FND-017", "MWP-WRK-003", "MWP-WRK-017", "MWP-WRK-019"),
    ),
    CommandRule(
        "work.submit",
        _decide_submit,
        working_agent,
        target=work_item_target,
        payload=members(
            "ownershipEpoch",
            "leaseId",
            "artifactHashes",
            evidence=members("evidenceId", "criterionIds", "result"),
        ),
        clauses=("MWP-FND-017", "MWP-WRK-013", "MWP-WRK-023", "MWP-WRK-025"),
    ),
)

EVOLVERS = {
    "work.started": _evolve_started,
    "work.progressed": _evolve_progressed,
    "work.checkpointed": _evolve_checkpointed,
    "work.blocked": _evolve_blocked,
    "work.unblocked": _evolve_unblocked,
    "work.submitted": _evolve_submitted,
    OWNERSHIP_EXPIRED_KIND: _evolve_expired,
    LEASE_REVOKED_KIND: _evolve_revoked,
}
