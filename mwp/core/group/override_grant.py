"""Cooperation Override Grants (spec 20, MWP-EXT-008, MWP-EXT-009): one-shot escalation past
a binding cooperation limit.

``policy.grant_cooperation_override``, from rules ``RULES_OVERSIGHT`` on, is issued by the
MissionOwner or an Organization policy service while the Mission is active. Its payload names
the Mission (this Group's), the exceeded policy (``policyName``, a limit of
``cooperation_limits.py``), the beneficiary Principal, the target Command kind and Action ID,
a reason and an expiry; the approver is the Command's actor and the grant time the
Authority's clock. ``policy.cooperation_override.granted`` records all of it with the grant's
ID, derived from its sequence; the Policy Log of an archive lists it.

The target Command cites the grant in ``cooperationOverrideGrantId``. Before its rule decides,
the Authority refuses (``AUTH_FORBIDDEN``, ``details.reason``) a grant that does not exist
(``unknown_override_grant``), was consumed (``override_grant_consumed``), has expired
(``override_grant_expired``), or binds another Mission, Group, actor, kind or Action ID
(``override_grant_mismatch``, ``details.member``); after it, a grant for a policy the Command
does not exceed (``policyName`` mismatched). Accepted, the Command's Events begin with
``ext.missionweaveprotocol.core.cooperation_override_consumed``, naming the grant and the
Command's own Event it admitted: issuance and consumption are one transition each, so the
grant is consumed exactly when the target is accepted. A byte-equal retry returns the
receipt (step 2, before any of this); every other use is refused.

Before ``RULES_OVERSIGHT`` the kind is unknown and a citation is refused as naming no grant
(``door.py``), as those rules decided.
"""

from __future__ import annotations

from typing import Any, Final

from mwp.core.group.api import RULES_OVERSIGHT, AuthorityContext
from mwp.core.group.clock import instant, plus_seconds, reached
from mwp.core.group.cooperation_limits import POLICY_NAMES
from mwp.core.group.drafts import Drafts, EventDraft
from mwp.core.group.ids import derive_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import Payload, members
from mwp.core.group.rejection import bad_transition, forbidden, invalid
from mwp.core.group.roles import owner_or_service
from mwp.core.group.rules import CommandRule, no_target
from mwp.core.group.state import GroupState
from mwp.core.group.work_item_state import active_mission
from mwp.core.kinds import COMMAND_KINDS, GROUP_CREATING_KINDS

CLAUSES: tuple[str, ...] = ("MWP-EXT-008", "MWP-EXT-009")

Json = dict[str, Any]

GRANT_KIND: Final = "policy.grant_cooperation_override"
GRANTED_KIND: Final = "policy.cooperation_override.granted"
CONSUMED_KIND: Final = "ext.missionweaveprotocol.core.cooperation_override_consumed"
# A grant is for one imminent Command, not a standing exemption.
MAX_OVERRIDE_GRANT_SECONDS: Final = 7 * 24 * 3600
_TARGET_KINDS: Final = frozenset(COMMAND_KINDS) - GROUP_CREATING_KINDS - {GRANT_KIND}
_ACTOR_TYPES: Final = frozenset({"agent", "human", "service"})


def override_grant_id(group_id: str, sequence: int) -> str:
    return derive_id(group_id, "cooperation-override", sequence)


# --- policy.grant_cooperation_override ------------------------------------------------------------


def _decide_grant(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission = active_mission(state, cmd)
    p = cmd.payload
    if p.id("missionId") != mission.mission_id:
        invalid("the grant must bind this Group's Mission", member="payload.missionId")
    policy = p.choice("policyName", POLICY_NAMES)
    beneficiary = p.obj("beneficiary")
    if beneficiary.get("type") not in _ACTOR_TYPES or not isinstance(beneficiary.get("id"), str):
        invalid("payload.beneficiary must be an actor", member="payload.beneficiary")
    beneficiary = {
        "type": beneficiary["type"],
        "id": Payload(beneficiary, "payload.beneficiary").id("id"),
    }
    target_kind = p.choice("targetKind", _TARGET_KINDS)
    target_action = p.id("targetActionId")
    reason = p.text("reason")
    expires_at = p.timestamp("expiresAt")
    if reached(ctx.now, expires_at):
        invalid("the grant's expiry has already passed", member="payload.expiresAt")
    if instant(expires_at) > instant(plus_seconds(ctx.now, MAX_OVERRIDE_GRANT_SECONDS)):
        invalid(
            f"a grant lasts at most {MAX_OVERRIDE_GRANT_SECONDS} seconds",
            member="payload.expiresAt",
        )
    if state.receipts.find(beneficiary["id"], target_action) is not None:
        bad_transition("target Command", "accepted", cmd.kind, targetActionId=target_action)
    for grant in state.override_grants.values():
        if (
            "consumedByEventId" not in grant
            and grant["beneficiary"] == beneficiary
            and grant["targetActionId"] == target_action
            and not reached(ctx.now, grant["expiresAt"])
        ):
            invalid(
                "an unconsumed grant already names this Command",
                reason="override_grant_exists",
                cooperationOverrideGrantId=grant["grantId"],
            )
    grant_id = override_grant_id(state.group_id, drafts.next_sequence)
    drafts.add(
        GRANTED_KIND,
        ("cooperation_override", grant_id),
        {
            "grantId": grant_id,
            "missionId": mission.mission_id,
            "groupId": state.group_id,
            "policyName": policy,
            "beneficiary": beneficiary,
            "targetKind": target_kind,
            "targetActionId": target_action,
            "reason": reason,
            "approver": cmd.actor,
            "grantedAt": ctx.now,
            "expiresAt": expires_at,
        },
    )


def _evolve_granted(state: GroupState, event: Json) -> None:
    grant = dict(event["payload"])
    state.override_grants[grant["grantId"]] = grant


def _evolve_consumed(state: GroupState, event: Json) -> None:
    payload = event["payload"]
    state.override_grants[payload["cooperationOverrideGrantId"]]["consumedByEventId"] = payload[
        "acceptedEventId"
    ]


# --- a citing Command -----------------------------------------------------------------------------


def _refuse(reason: str, grant_id: str, **details: Any) -> None:
    forbidden(
        "the cited Cooperation Override Grant does not admit this Command",
        reason=reason,
        cooperationOverrideGrantId=grant_id,
        **details,
    )


def cited_grant(state: GroupState, cmd: Incoming, ctx: AuthorityContext) -> Json | None:
    """The grant the Command cites, checked for everything but the exceeded policy."""
    grant_id = cmd.override_grant_id
    if grant_id is None:
        return None
    grant = state.override_grants.get(grant_id)
    if grant is None:
        forbidden(
            "no Cooperation Override Grant has this ID",
            reason="unknown_override_grant",
            cooperationOverrideGrantId=grant_id,
        )
    if "consumedByEventId" in grant:
        _refuse("override_grant_consumed", grant_id, consumedByEventId=grant["consumedByEventId"])
    if reached(ctx.now, grant["expiresAt"]):
        _refuse("override_grant_expired", grant_id, expiresAt=grant["expiresAt"])
    bound = (
        ("missionId", grant["missionId"], state.mission_id),
        ("groupId", grant["groupId"], cmd.group_id),
        ("beneficiary", grant["beneficiary"], cmd.actor),
        ("targetKind", grant["targetKind"], cmd.kind),
        ("targetActionId", grant["targetActionId"], cmd.action_id),
    )
    for member, granted, presented in bound:
        if granted != presented:
            _refuse("override_grant_mismatch", grant_id, member=member)
    return grant


def check_policy(grant: Json | None, exceeded: frozenset[str]) -> str | None:
    """The policy the grant lifts, which the Command must exceed."""
    if grant is None:
        return None
    if grant["policyName"] not in exceeded:
        _refuse(
            "override_grant_mismatch",
            grant["grantId"],
            member="policyName",
            exceeded=sorted(exceeded),
        )
    return str(grant["policyName"])


def consumed_draft(grant: Json, cmd: Incoming, accepted_event_id: str) -> EventDraft:
    return EventDraft(
        CONSUMED_KIND,
        ("cooperation_override", grant["grantId"]),
        {
            "cooperationOverrideGrantId": grant["grantId"],
            "policyName": grant["policyName"],
            "beneficiary": cmd.actor,
            "targetKind": cmd.kind,
            "targetActionId": cmd.action_id,
            "acceptedEventId": accepted_event_id,
        },
    )


RULES = (
    CommandRule(
        GRANT_KIND,
        _decide_grant,
        owner_or_service,
        target=no_target,
        payload=members(
            "missionId",
            "policyName",
            "targetKind",
            "targetActionId",
            "reason",
            "expiresAt",
            beneficiary=members("type", "id"),
        ),
        clauses=("MWP-EXT-008",),
        since_rules=RULES_OVERSIGHT,
    ),
)

EVOLVERS = {GRANTED_KIND: _evolve_granted, CONSUMED_KIND: _evolve_consumed}
