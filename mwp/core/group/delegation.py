"""Delegated work authority (spec 9.1, MWP-MSN-019..022).

``membership.grant_delegation`` lets the current Coordinator give one ``work_delegate`` member
a scoped, expiring Delegation Grant over one WorkItem (the scope root) and its subtree. The
grantee cites the Grant ID in ``payload.delegationGrantId`` of ``work.authorize`` (a new
descendant, linked by ``payload.parentWorkItemId``) or ``work.offer`` (the root or an existing
descendant). The role alone conveys nothing: without a valid Grant a delegate is forbidden.

Every use re-checks the Grant against current state: the actor is the grantee with an active
``work_delegate`` Membership at the Grant's Membership Epoch; the Grant is unexpired; its
Mission, Group, Coordinator Epoch and issuer are still current; the scope root still exists and
is not failed, cancelled or verified. Then the kind's rule checks the subtree, depth,
capabilities and the cumulative budget of every WorkItem created or offered under the Grant.
A failed condition is ``AUTH_FORBIDDEN`` with ``details.reason`` naming it; a budget ceiling is
``BUDGET_EXCEEDED``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.allocation import DIMENSIONS
from mwp.core.group.api import AuthorityContext
from mwp.core.group.clock import reached
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import members
from mwp.core.group.policy import MAX_DELEGATION_DEPTH
from mwp.core.group.rejection import bad_transition, forbidden, invalid, reject
from mwp.core.group.roles import coordinator_only, coordinator_or_owner
from mwp.core.group.rules import CommandRule, by_agent
from mwp.core.group.state import DelegationGrant, GroupState, WorkItem
from mwp.core.group.work_contract import capability_refs, delegation_budget, version_tuple
from mwp.core.group.work_item_state import active_mission
from mwp.core.kinds import SETTLED_WORK_STATES

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-MSN-019", "MWP-MSN-021", "MWP-MSN-022")

# A scope root in one of these states invalidates every further use of its Grants.
GRANT_MEMBER = "delegationGrantId"
PARENT_MEMBER = "parentWorkItemId"


def grant_id_for(group_id: str, sequence: int) -> str:
    return derive_id(group_id, "delegation-grant", sequence)


# --- membership.grant_delegation -----------------------------------------------------------------


def _grantee_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    grantee = cmd.payload.raw("granteeAgentId") if cmd.payload.has("granteeAgentId") else None
    m = state.memberships.get(grantee) if isinstance(grantee, str) else None
    return ("Membership", m.revision) if m is not None else None


def _decide_grant(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission = active_mission(state, cmd)
    lease = state.coordinator
    assert lease is not None
    p = cmd.payload
    grantee_id = p.id("granteeAgentId")
    membership = state.memberships.get(grantee_id)
    if (
        membership is None
        or membership.member["type"] != "agent"
        or membership.state != "active"
        or membership.role != "work_delegate"
    ):
        invalid(
            "the grantee must hold an active work_delegate Membership", granteeAgentId=grantee_id
        )
    target_id = p.id("targetWorkItemId")
    target = state.item_record(target_id)
    if target is None:
        invalid("no such WorkItem in this Group", targetWorkItemId=target_id)
    if target.state in SETTLED_WORK_STATES:
        bad_transition("WorkItem", target.state, cmd.kind, targetWorkItemId=target_id)
    capabilities = capability_refs(p.raw("allowedCapabilities"), "payload.allowedCapabilities")
    if len({c["id"] for c in capabilities}) != len(capabilities):
        invalid("payload.allowedCapabilities names a capability twice")
    budget = delegation_budget(p.raw("budget"))
    if "financialLimit" in mission.budget and budget["currency"] != mission.budget.get("currency"):
        invalid("the Grant budget's currency differs from the Mission's")
    max_depth = p.integer("maxDescendantDepth", maximum=MAX_DELEGATION_DEPTH)
    expires_at = p.timestamp("expiresAt")
    if reached(ctx.now, expires_at):
        invalid("the Grant would already be expired")
    grant: Json = {
        "grantId": grant_id_for(state.group_id, drafts.next_sequence),
        "granteeAgentId": grantee_id,
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "targetWorkItemId": target_id,
        "allowedCapabilities": capabilities,
        "budget": budget,
        "maxDescendantDepth": max_depth,
        "granteeMembershipEpoch": membership.epoch,
        "coordinatorEpoch": lease.epoch,
        "grantedBy": cmd.actor,
        "grantedAt": ctx.now,
        "expiresAt": expires_at,
    }
    drafts.add("membership.delegation.granted", ("membership", grantee_id), {"grant": grant})


def _evolve_granted(state: GroupState, event: Json) -> None:
    doc = event["payload"]["grant"]
    state.delegation_grants[doc["grantId"]] = DelegationGrant(doc)
    state.memberships[doc["granteeAgentId"]].revision = event["aggregateRevision"]


# --- use: Authority step 7 -----------------------------------------------------------------------


def _unusable(reason: str, grant_id: str) -> NoReturn:
    forbidden(
        "the cited Delegation Grant does not authorize this actor now",
        reason=reason,
        delegationGrantId=grant_id,
    )


def cited_grant(state: GroupState, cmd: Incoming) -> DelegationGrant | None:
    """The Grant a Command cites, or None when it cites none (checked at step 7 already)."""
    if not cmd.payload.has(GRANT_MEMBER):
        return None
    return state.delegation_grants[cmd.payload.id(GRANT_MEMBER)]


def check_grant_use(state: GroupState, cmd: Incoming) -> DelegationGrant:
    """MWP-MSN-022: the Grant is valid for this actor against current authoritative state.
    Step 7 has no clock: expiry is checked with ``ctx.now`` first thing in :func:`check_scope`."""
    grant_id = cmd.payload.id(GRANT_MEMBER)
    grant = state.delegation_grants.get(grant_id)
    if grant is None:
        forbidden("no persisted Delegation Grant has this ID", delegationGrantId=grant_id)
    doc = grant.document
    if not cmd.is_agent or cmd.actor_id != grant.grantee_id:
        _unusable("not_grantee", grant_id)
    membership = state.memberships.get(cmd.actor_id)
    if membership is None or membership.state != "active" or membership.role != "work_delegate":
        _unusable("not_work_delegate", grant_id)
    if membership.epoch != doc["granteeMembershipEpoch"]:
        _unusable("membership_changed", grant_id)
    if doc["missionId"] != state.mission_id or doc["groupId"] != state.group_id:
        _unusable("scope_mismatch", grant_id)
    lease = state.coordinator
    if (
        lease is None
        or lease.epoch != doc["coordinatorEpoch"]
        or lease.agent_id != doc["grantedBy"]["id"]
    ):
        _unusable("coordinator_replaced", grant_id)
    target_state = state.item_state(grant.target_work_item_id)
    if target_state is None or target_state in SETTLED_WORK_STATES:
        _unusable("target_not_live", grant_id)
    return grant


def authorize_work(state: GroupState, cmd: Incoming) -> None:
    """Step 7 of work.authorize / work.offer: the Coordinator, the MissionOwner (override) or
    the grantee of a cited, currently valid Delegation Grant."""
    if cmd.payload.has(GRANT_MEMBER):
        check_grant_use(state, cmd)
        return
    coordinator_or_owner(state, cmd)


# --- use: the kind's rule ------------------------------------------------------------------------


def depth_below(state: GroupState, root_id: str, work_item_id: str) -> int | None:
    """How many parent links lead from ``work_item_id`` up to ``root_id``; None if outside."""
    depth = 0
    current: str | None = work_item_id
    while current is not None:
        if current == root_id:
            return depth
        item = state.item_record(current)
        current = item.parent_work_item_id if item is not None else None
        depth += 1
    return None


def check_scope(
    state: GroupState,
    ctx: AuthorityContext,
    grant: DelegationGrant,
    *,
    offered: WorkItem | None = None,
    parent_id: str | None = None,
) -> None:
    """Expiry, then MWP-MSN-021 placement: offer the root or an existing descendant; authorize a new
    descendant only under an explicit parent link inside the subtree, within max depth."""
    doc = grant.document
    if reached(ctx.now, doc["expiresAt"]):
        _unusable("grant_expired", grant.grant_id)
    root = grant.target_work_item_id
    if offered is not None:
        if depth_below(state, root, offered.work_item_id) is None:
            _unusable("outside_subtree", grant.grant_id)
        return
    if parent_id is None:
        _unusable("parent_link_required", grant.grant_id)
    parent_depth = depth_below(state, root, parent_id)
    if parent_depth is None:
        _unusable("outside_subtree", grant.grant_id)
    if parent_depth + 1 > min(doc["maxDescendantDepth"], MAX_DELEGATION_DEPTH):
        _unusable("max_depth", grant.grant_id)


def check_capabilities(grant: DelegationGrant, contract: Json) -> None:
    """Each required capability is one the Grant allows, at or above the Grant's minimum."""
    minimum = {c["id"]: version_tuple(c["version"]) for c in grant.document["allowedCapabilities"]}
    refused = [
        c["id"]
        for c in contract["requiredCapabilities"]
        if c["id"] not in minimum or version_tuple(c["version"]) < minimum[c["id"]]
    ]
    if refused:
        forbidden(
            "the Grant does not allow every required capability at its minimum version",
            reason="capability_not_allowed",
            delegationGrantId=grant.grant_id,
            capabilities=refused,
        )


_UNBOUNDED = Decimal("Infinity")


def _amounts(budget: Json) -> dict[str, Decimal]:
    """An item budget silent on a dimension is unbounded in it."""
    return {d: Decimal(str(budget[d])) if d in budget else _UNBOUNDED for d in DIMENSIONS}


def check_grant_budget(
    state: GroupState, grant: DelegationGrant, work_item_id: str, budget: Json
) -> None:
    """Every WorkItem created or offered under the Grant, this one with ``budget``, summed per
    dimension, stays within each Grant ceiling (cumulative: cancelled items still count)."""
    ceilings = grant.document["budget"]
    if "financialLimit" in budget and budget.get("currency") != ceilings["currency"]:
        invalid("the WorkItem budget's currency differs from the Grant's")
    used = dict.fromkeys(DIMENSIONS, Decimal(0))
    for other_id in grant.work_item_ids:
        if other_id != work_item_id:
            for dimension, amount in _amounts(state.item_budget(other_id)).items():
                used[dimension] += amount
    for dimension, requested in _amounts(budget).items():
        limit = Decimal(str(ceilings[dimension]))
        if used[dimension] + requested > limit:
            reject(
                ErrorCode.BUDGET_EXCEEDED,
                f"{dimension} would exceed the Delegation Grant ceiling",
                dimension=dimension,
                limit=str(limit),
                used=str(used[dimension]),
                requested=str(requested),
                delegationGrantId=grant.grant_id,
            )


def record_use(state: GroupState, grant_id: str, work_item_id: str) -> None:
    grant = state.delegation_grants[grant_id]
    if work_item_id not in grant.work_item_ids:
        grant.work_item_ids.append(work_item_id)


RULES = (
    CommandRule(
        "membership.grant_delegation",
        _decide_grant,
        coordinator_only,
        target=_grantee_target,
        coordinator=by_agent,
        payload=members(
            "granteeAgentId",
            "targetWorkItemId",
            "allowedCapabilities",
            "budget",
            "maxDescendantDepth",
            "expiresAt",
        ),
        clauses=("MWP-EVT-002", "MWP-MSN-020"),
    ),
)

EVOLVERS = {"membership.delegation.granted": _evolve_granted}
