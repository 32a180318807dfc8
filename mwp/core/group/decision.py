"""The Authority step: the ordered checks every Command passes before its kind decides.

1. Group scope (``GROUP_NOT_FOUND``); creation kinds create the Group.
2. ``(actor, actionId)`` idempotency: the original receipt, or ``ACTION_ID_COLLISION``.
   Then a newly presented Command must be fresh and, from rules ``RULES_DOOR`` on, pass First
   Admission (``admission.py``: its key valid at the Authority's clock too).
3. Session fencing for agents (``AUTH_STALE_SESSION``).
4. Membership and its epoch (``MEMBERSHIP_REQUIRED`` / ``MEMBERSHIP_STALE``).
5. Coordinator Epoch when the Command exercises the Coordinator lease (``AUTH_STALE_COORDINATOR``).
6. ``expectedRevision`` against the target aggregate (``REVISION_CONFLICT``).
7. Role and policy (``AUTH_FORBIDDEN``), a cited Cooperation Override Grant included.
8. The kind's own rule, producing Event drafts without touching state; first, its payload
   carries only the members the kind defines (``INVALID_COMMAND``).

From rules revision ``RULES_DOOR`` on, a newly presented Command passes the door
(``door.py``) too: no unknown critical extension (right after freshness), no cited override
grant (step 7), no undefined payload member (step 8). From ``RULES_OVERSIGHT`` on, a cited
grant must instead exist and bind the Command (``override_grant.py``), and once the kind's
rule accepted it, no cooperation limit may bind but the one its grant lifts (``runaway.py``).

Nothing here mutates state; a failure at any step is a typed :class:`MwpError` carrying the
Command's Action ID.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.group.api import RULES_DOOR, RULES_OVERSIGHT, AuthorityContext, Envelope
from mwp.core.group.coordinator_lease import check_coordinator
from mwp.core.group.door import check_extensions, check_members, check_override_grant
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import event_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.kinds import RULES
from mwp.core.group.membership import check_membership
from mwp.core.group.override_grant import check_policy, cited_grant, consumed_draft
from mwp.core.group.policy import GROWING_COMMAND_KINDS
from mwp.core.group.receipts import ReceiptEntry
from mwp.core.group.rejection import reject, revision_conflict
from mwp.core.group.runaway import NOTHING, assess, enforce, notice_drafts
from mwp.core.group.state import GroupState
from mwp.core.trust.signed_document import check_issued_at

CLAUSES: tuple[str, ...] = (
    "MWP-ADM-013",
    "MWP-EVT-003",
    "MWP-EVT-004",
    "MWP-EVT-007",
    "MWP-FND-016",
)


@dataclass(frozen=True, slots=True)
class Accepted:
    cmd: Incoming
    drafts: Drafts


@dataclass(frozen=True, slots=True)
class Duplicate:
    cmd: Incoming
    entry: ReceiptEntry


def decide(
    state: GroupState,
    envelope: Envelope,
    ctx: AuthorityContext,
    admit: Callable[[], None] | None = None,
) -> Accepted | Duplicate:
    try:
        cmd = Incoming.parse(envelope)
    except MwpError as error:
        action_id = envelope.command.get("actionId") if isinstance(envelope.command, dict) else None
        error.action_id = action_id if isinstance(action_id, str) else None
        raise
    try:
        return _decide(state, cmd, ctx, admit)
    except MwpError as error:
        error.action_id = cmd.action_id
        error.group_id = error.group_id or cmd.group_id
        raise
    except Exception as exc:  # a defect, not a verdict: typed, retryable, nothing applied
        raise MwpError(
            ErrorCode.INTERNAL_ERROR,
            "the Authority failed without accepting the Command",
            action_id=cmd.action_id,
            group_id=cmd.group_id,
            diagnostic=Diagnostic("decide", type(exc).__name__),
        ) from exc


def _decide(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, admit: Callable[[], None] | None
) -> Accepted | Duplicate:
    rule = RULES.get(cmd.kind)
    if rule is not None and ctx.rules < rule.since_rules:
        rule = None  # unknown to the rules this Group decides under
    # 1. Group scope.
    if state.mission is None:
        if rule is None or not rule.creates_group:
            reject(ErrorCode.GROUP_NOT_FOUND, "no such Group")
    elif cmd.group_id != state.group_id:
        reject(ErrorCode.GROUP_NOT_FOUND, "no such Group")
    # 2. Idempotency.
    entry = state.receipts.find(cmd.actor_id, cmd.action_id)
    if entry is not None:
        if entry.same_content(cmd.signing_hash, cmd.command_hash):
            return Duplicate(cmd, entry)
        reject(ErrorCode.ACTION_ID_COLLISION, "the Action ID was already used for other content")
    # 2a. An archived Group decides nothing more (archive.py); only retries got receipts.
    if state.mission is not None and state.mission.archived:
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"{cmd.kind} is not permitted: the Group is archived",
            state="archived",
            snapshotId=state.mission.archive["snapshotId"] if state.mission.archive else None,
        )
    # 2b. Freshness: a newly presented Command only (a retry of an accepted one got its
    # receipt above, however old). One issued before the newest evicted receipt's Command was
    # accepted might be a retry of an evicted one: refused too, never applied twice.
    check_issued_at(cmd.issued_at, ctx.now, ctx.freshness, not_before=state.receipts.horizon_time)
    # 2c. First Admission, before anything that authorizes (spec 6.4); only a Command this
    # Group decides is anchored in its Admission Log.
    if admit is not None:
        admit()
    if rule is None:
        reject(ErrorCode.INVALID_COMMAND, f"{cmd.kind} is not a Command this Authority accepts")
    door = ctx.rules >= RULES_DOOR
    if door:
        check_extensions(cmd, ctx.rules)
    if not rule.creates_group:
        # 3. Session fencing: only the current Session Epoch of an agent may act.
        if cmd.is_agent and (
            cmd.session_epoch is None or cmd.session_epoch != ctx.session_epochs.get(cmd.actor_id)
        ):
            reject(ErrorCode.AUTH_STALE_SESSION, "the Session Epoch is fenced")
        # 4. Membership.
        check_membership(state, cmd, rule.provisional_ok)
        # 5. Coordinator Epoch.
        check_coordinator(state, cmd, ctx, rule.coordinator(state, cmd))
        # 6. Expected revision.
        if cmd.expected_revision is not None:
            target = rule.target(state, cmd)
            if target is not None and target[1] != cmd.expected_revision:
                revision_conflict(cmd.expected_revision, target[1], target[0])
        # 7. Role and policy.
        rule.authorize(state, cmd)
        if ctx.at_capacity and cmd.kind in GROWING_COMMAND_KINDS:
            reject(
                ErrorCode.INVALID_COMMAND,
                "this Group carries as many WorkItems as it can; continue in a follow-up Mission",
                reason="group_capacity",
                workItems=len(state.work_items) + len(state.settled),
            )
    oversight = ctx.rules >= RULES_OVERSIGHT
    grant = cited_grant(state, cmd, ctx) if oversight else None
    if door and not oversight:
        check_override_grant(cmd)
    if door:
        check_members(cmd, rule.payload)
    # 8a. The runaway controls (runaway.py): what the Command brings each cooperation limit.
    limits = NOTHING
    if oversight and not rule.creates_group:
        limits = assess(state, cmd, ctx.cooperation_limits, ctx.now)
    notices = len(limits.notices) + (grant is not None)
    # 8. The kind's own rule, its Events after the notices and the grant's consumption.
    drafts = Drafts(state.sequence + 1 + notices)
    rule.decide(state, cmd, ctx, drafts)
    if not oversight:
        return Accepted(cmd, drafts)
    enforce(limits, check_policy(grant, limits.exceeded))
    if not notices:
        return Accepted(cmd, drafts)
    prefixed = Drafts(state.sequence + 1)
    prefixed.items.extend(notice_drafts(state, cmd, limits))
    if grant is not None:
        accepted = event_id(state.group_id, drafts.next_sequence - 1)
        prefixed.items.append(consumed_draft(grant, cmd, accepted))
    prefixed.items.extend(drafts.items)
    return Accepted(cmd, prefixed)
