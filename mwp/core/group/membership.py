"""Memberships: epochs, roles, just-in-time Worker Membership and fencing (spec 8).

Epoch rules: a new Membership starts at epoch 1; every role or scope change and every
re-admission after an end increments it; activating a provisional Membership keeps it (the
Worker's acceptance carries that epoch). An ended Membership stays on record, fenced.
"""

from __future__ import annotations

from typing import Any

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import membership_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import members
from mwp.core.group.policy import DEFAULT_SCOPES
from mwp.core.group.rejection import bad_transition, forbidden, invalid, reject
from mwp.core.group.roles import is_current_coordinator, is_mission_owner
from mwp.core.group.rules import CommandRule, by_agent
from mwp.core.group.state import GroupState, Membership
from mwp.core.group.work_item_state import fence_owner

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-MSN-010", "MWP-MSN-011")

# Roles a membership.change may give; MissionOwner and Coordinator have their own Commands.
ASSIGNABLE_ROLES = frozenset({"worker", "reviewer", "observer", "work_delegate"})
_SCOPE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._:-")


def membership_document(state: GroupState, m: Membership) -> Json:
    """The membership.schema.json object."""
    doc: Json = {
        "membershipId": membership_id(state.group_id, m.member["id"]),
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "member": m.member,
        "role": m.role,
        "state": m.state,
        "membershipEpoch": m.epoch,
        "scopes": m.scopes,
        "visibilityStartSequence": m.visibility_start_sequence,
        "grantedAt": m.granted_at,
    }
    optional = {
        "contextPackageId": m.context_package_id,
        "provisionalExpiresAt": m.provisional_expires_at,
        "activatedAt": m.activated_at,
        "endedAt": m.ended_at,
    }
    doc.update({k: v for k, v in optional.items() if v is not None})
    grants = [
        g.document for g in state.delegation_grants.values() if g.grantee_id == m.member["id"]
    ]
    if grants and m.member["type"] == "agent":
        doc["delegationGrants"] = grants
    return doc


def _from_document(doc: Json, revision: int) -> Membership:
    return Membership(
        member=doc["member"],
        role=doc["role"],
        state=doc["state"],
        epoch=doc["membershipEpoch"],
        scopes=list(doc["scopes"]),
        visibility_start_sequence=doc["visibilityStartSequence"],
        granted_at=doc["grantedAt"],
        revision=revision,
        activated_at=doc.get("activatedAt"),
        ended_at=doc.get("endedAt"),
        provisional_expires_at=doc.get("provisionalExpiresAt"),
        context_package_id=doc.get("contextPackageId"),
    )


def grant(
    state: GroupState,
    member: Json,
    role: str,
    *,
    now: str,
    sequence: int,
    scopes: list[str] | None = None,
    provisional_until: str | None = None,
    context_package_id: str | None = None,
) -> Json | None:
    """The Membership document after granting ``role`` to ``member``; None if unchanged.

    ``provisional_until`` asks for a provisional (just-in-time) Membership; an active one is
    never demoted to provisional.
    """
    current = state.memberships.get(member["id"])
    live = current is not None and current.state != "ended"
    if current is not None and live and current.role == role:
        if provisional_until:
            return None  # already admitted in this role: an offer grants nothing more
        if current.state == "provisional":
            # Acceptance activates the just-in-time Membership under the same epoch.
            m = _copy(current, state="active", activated_at=now, provisional_expires_at=None)
            return membership_document(state, m)
        if scopes is None or scopes == current.scopes:
            return None
    scopes = scopes or list(DEFAULT_SCOPES[role])
    epoch = current.epoch + 1 if current is not None else 1
    # MissionOwner and Coordinator see all history; others from their admission on.
    visibility = 0 if role in ("mission_owner", "coordinator") else sequence
    m = Membership(
        member=member,
        role=role,
        state="provisional" if provisional_until else "active",
        epoch=epoch,
        scopes=scopes,
        visibility_start_sequence=visibility,
        granted_at=now,
        revision=0,
        activated_at=None if provisional_until else now,
        provisional_expires_at=provisional_until,
        context_package_id=context_package_id if provisional_until else None,
    )
    return membership_document(state, m)


def _copy(m: Membership, **changes: Any) -> Membership:
    values = {name: getattr(m, name) for name in Membership.__slots__}
    values.update(changes)
    return Membership(**values)


def add_grant(drafts: Drafts, doc: Json, reason: str) -> None:
    drafts.add(
        "membership.changed",
        ("membership", doc["member"]["id"]),
        {"membership": doc, "reason": reason},
    )


# --- Authority step 4 --------------------------------------------------------------------------


def check_membership(state: GroupState, cmd: Incoming, provisional_ok: bool) -> None:
    """An agent or human acts through its current Membership Epoch; services are policy."""
    if cmd.is_service:
        return
    m = state.memberships.get(cmd.actor_id)
    if m is None or m.member["type"] != cmd.actor_type:
        reject(ErrorCode.MEMBERSHIP_REQUIRED, "the actor holds no Membership in this Group")
    if m.state == "ended":
        reject(ErrorCode.MEMBERSHIP_STALE, "the actor's Membership has ended")
    if cmd.membership_epoch is None:
        reject(ErrorCode.MEMBERSHIP_REQUIRED, "the Command carries no Membership Epoch")
    if cmd.membership_epoch != m.epoch:
        reject(
            ErrorCode.MEMBERSHIP_STALE,
            "the Membership Epoch is not current",
            membershipEpoch=cmd.membership_epoch,
            currentMembershipEpoch=m.epoch,
        )
    if m.state == "provisional" and not provisional_ok:
        reject(ErrorCode.MEMBERSHIP_REQUIRED, f"a provisional Membership cannot issue {cmd.kind}")


# --- membership.change ---------------------------------------------------------------------------


def _membership_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    member = cmd.payload.raw("memberId") if cmd.payload.has("memberId") else None
    m = state.memberships.get(member) if isinstance(member, str) else None
    return ("Membership", m.revision if m else 0)


def _authorize_change(state: GroupState, cmd: Incoming) -> None:
    if not (cmd.is_service or is_mission_owner(state, cmd) or is_current_coordinator(state, cmd)):
        forbidden(
            "only the MissionOwner, the Coordinator or Organization policy change Memberships"
        )


def _decide_change(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission = state.mission
    assert mission is not None
    if mission.terminal:
        bad_transition("Mission", mission.state, cmd.kind)
    p = cmd.payload
    member_id = p.id("memberId")
    member_type = p.choice("memberType", frozenset({"agent", "human"}), default="agent")
    role = p.choice("role", ASSIGNABLE_ROLES)
    scopes = _scopes(p.raw("scopes")) if p.has("scopes") else None
    p.opt_text("reason")
    _refuse_leadership_target(state, member_id)
    current = state.memberships.get(member_id)
    if current is not None and current.member["type"] != member_type:
        invalid("memberType does not match the existing Membership")
    doc = grant(
        state,
        {"type": member_type, "id": member_id},
        role,
        now=ctx.now,
        sequence=drafts.next_sequence,
        scopes=scopes,
    )
    if doc is None:
        invalid("the Membership already has this role and scope")
    add_grant(drafts, doc, p.opt_text("reason") or "membership.change")


def _scopes(value: Any) -> list[str]:
    if (
        not isinstance(value, list)
        or not value
        or len(set(value)) != len(value)
        or not all(_is_scope(v) for v in value)
    ):
        invalid("payload.scopes must be a non-empty array of unique scope names")
    return list(value)


def _is_scope(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= 160
        and value[0].isascii()
        and value[0].islower()
        and set(value) <= _SCOPE_CHARS
    )


def _refuse_leadership_target(state: GroupState, member_id: str) -> None:
    mission = state.mission
    if mission is not None and mission.owner["id"] == member_id:
        invalid("the MissionOwner's Membership cannot be changed or ended")
    if state.coordinator is not None and state.coordinator.agent_id == member_id:
        invalid("the current Coordinator changes only through mission.assign_coordinator")


def _evolve_changed(state: GroupState, event: Json) -> None:
    doc = event["payload"]["membership"]
    state.memberships[doc["member"]["id"]] = _from_document(doc, event["aggregateRevision"])


# --- membership.end ------------------------------------------------------------------------------


def _authorize_end(state: GroupState, cmd: Incoming) -> None:
    if cmd.is_service or is_mission_owner(state, cmd) or is_current_coordinator(state, cmd):
        return
    if cmd.payload.has("memberId") and cmd.payload.raw("memberId") == cmd.actor_id:
        return  # a member may leave
    forbidden("only the member itself, the MissionOwner, the Coordinator or policy end Memberships")


def _decide_end(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    p = cmd.payload
    member_id = p.id("memberId")
    reason = p.opt_text("reason") or "membership.end"
    _refuse_leadership_target(state, member_id)
    current = state.memberships.get(member_id)
    if current is None:
        invalid("no such Membership", memberId=member_id)
    if current.state == "ended":
        bad_transition("Membership", current.state, cmd.kind)
    fenced = [
        item.work_item_id
        for item in state.work_items.values()
        if item.owner is not None
        and item.owner.live
        and item.owner.agent_id == member_id
        and item.state in ("queued", "active", "blocked")
    ]
    ended = _copy(current, state="ended", ended_at=ctx.now, provisional_expires_at=None)
    drafts.add(
        "membership.ended",
        ("membership", member_id),
        {
            "membership": membership_document(state, ended),
            "reason": reason,
            "fencedWorkItemIds": fenced,
        },
    )


def _evolve_ended(state: GroupState, event: Json) -> None:
    payload = event["payload"]
    doc = payload["membership"]
    member_id = doc["member"]["id"]
    state.memberships[member_id] = _from_document(doc, event["aggregateRevision"])
    for work_item_id in payload["fencedWorkItemIds"]:
        fence_owner(state.work_items[work_item_id], "membership_ended")
    # Offers still pending for the departed member can no longer be accepted.
    for item in state.work_items.values():
        for offer in item.offers:
            if offer.agent_id == member_id and offer.status == "pending":
                offer.status = "withdrawn"


RULES = (
    CommandRule(
        "membership.change",
        _decide_change,
        _authorize_change,
        target=_membership_target,
        coordinator=by_agent,
        payload=members("memberId", "memberType", "role", "scopes", "reason"),
        clauses=("MWP-EVT-002", "MWP-MSN-010"),
    ),
    CommandRule(
        "membership.end",
        _decide_end,
        _authorize_end,
        target=_membership_target,
        # Ending someone else's Membership is coordination; leaving is not.
        coordinator=lambda state, cmd: (
            cmd.is_agent and cmd.payload.raw("memberId") != cmd.actor_id
            if cmd.payload.has("memberId")
            else cmd.is_agent
        ),
        payload=members("memberId", "reason"),
        clauses=("MWP-EVT-002", "MWP-MSN-010"),
    ),
)

EVOLVERS = {
    "membership.changed": _evolve_changed,
    "membership.ended": _evolve_ended,
}
