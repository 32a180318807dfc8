"""Cooperation Override Grants (spec 20, MWP-EXT-008/009): issued by the MissionOwner or
Organization policy, bound exactly, consumed once with the accepted target, refused on every
other use, and a retry of the accepted target returns its receipt."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.api import RULES_LEDGER
from mwp.core.group.cooperation_limits import CooperationLimits, Limit
from mwp.core.group.override_grant import CONSUMED_KIND, GRANT_KIND, GRANTED_KIND
from mwp.core.group.runaway import THRESHOLD_KIND
from mwp.core.log.group_snapshot import ArchiveProjection
from tests.unit.group.harness import (
    COORD,
    GROUP,
    MISSION,
    OWNER,
    SERVICE,
    W1,
    W2,
    Harness,
    mission_harness,
    override_payload,
)

TEXT = {"content": [{"type": "text", "text": "Status."}]}


def over_the_rate() -> Harness:
    """W1 has posted as many Messages as this rate window allows."""
    h = mission_harness()
    h.cooperation_limits = replace(CooperationLimits(), message_rate=Limit(1, 1))
    h.submit(W1, "message.post", TEXT)
    return h


def grant(h: Harness, target: dict[str, Any], actor: Any = OWNER, **overrides: Any) -> str:
    """Issue a grant for ``target`` (a Command dict) lifting ``messageRate``; its ID."""
    payload = override_payload(W1, target["kind"], target["actionId"], "messageRate", **overrides)
    event = h.submit(actor, GRANT_KIND, payload).events[-1]
    assert event["kind"] == GRANTED_KIND
    return str(event["payload"]["grantId"])


def citing(h: Harness, grant_id: str, actor: Any = W1, **envelope: Any) -> dict[str, Any]:
    return h.command(actor, "message.post", TEXT, cooperationOverrideGrantId=grant_id, **envelope)


def overridden() -> Harness:
    """A Group whose log holds a grant issued and consumed, and the notice of the limit."""
    h = over_the_rate()
    target = h.command(W1, "message.post", TEXT)
    target["cooperationOverrideGrantId"] = grant(h, target)
    h.send(target)
    return h


# --- issuance -------------------------------------------------------------------------------------


def test_the_owner_issues_a_grant_binding_every_member() -> None:
    h = over_the_rate()
    target = h.command(W1, "message.post", TEXT)
    outcome = h.submit(
        OWNER, GRANT_KIND, override_payload(W1, "message.post", target["actionId"], "messageRate")
    )
    (event,) = outcome.events
    assert event["kind"] == GRANTED_KIND
    assert event["payload"] == {
        "grantId": event["payload"]["grantId"],
        "missionId": MISSION,
        "groupId": GROUP,
        "policyName": "messageRate",
        "beneficiary": W1.to_json(),
        "targetKind": "message.post",
        "targetActionId": target["actionId"],
        "reason": "The release needs one more status update.",
        "approver": OWNER.to_json(),
        "grantedAt": h.now,
        "expiresAt": "2026-07-15T01:00:00Z",
    }
    view = h.authority.snapshot()["state"]["overrideGrants"]
    assert view == [event["payload"]]


def test_organization_policy_may_issue_a_grant_no_member_may() -> None:
    h = over_the_rate()
    target = h.command(W1, "message.post", TEXT)
    payload = override_payload(W1, "message.post", target["actionId"], "messageRate")
    for actor in (COORD, W1):
        h.reject(ErrorCode.AUTH_FORBIDDEN, actor, GRANT_KIND, payload)
    assert grant(h, target, actor=SERVICE)


@pytest.mark.parametrize(
    ("overrides", "member"),
    [
        ({"missionId": "urn:example:mission:other"}, "payload.missionId"),
        ({"policyName": "anythingGoes"}, "payload.policyName"),
        ({"policyName": "budget"}, "payload.policyName"),  # the ledger binds, no grant lifts it
        ({"targetKind": "mission.create"}, "payload.targetKind"),
        ({"targetKind": GRANT_KIND}, "payload.targetKind"),
        ({"expiresAt": "2026-07-14T23:59:59Z"}, "payload.expiresAt"),
        ({"expiresAt": "2026-07-22T00:00:01Z"}, "payload.expiresAt"),
        ({"reason": None}, "payload.reason"),
        ({"targetActionId": "not an id"}, "payload.targetActionId"),
    ],
)
def test_a_malformed_grant_is_refused(overrides: dict[str, Any], member: str) -> None:
    h = over_the_rate()
    payload = override_payload(
        W1, "message.post", "urn:example:action:next", "messageRate", **overrides
    )
    error = h.reject(ErrorCode.INVALID_COMMAND, OWNER, GRANT_KIND, payload)
    assert member in json.dumps(error.details) or member in str(error)


def test_a_grant_needs_an_actor_as_its_beneficiary() -> None:
    h = over_the_rate()
    payload = override_payload(W1, "message.post", "urn:example:action:next", "messageRate")
    for beneficiary in ({"type": "robot", "id": W1.id}, {"type": "agent"}, "W1"):
        h.reject(
            ErrorCode.INVALID_COMMAND, OWNER, GRANT_KIND, {**payload, "beneficiary": beneficiary}
        )


def test_a_grant_for_an_accepted_command_or_a_second_grant_for_one_is_refused() -> None:
    h = over_the_rate()
    accepted = h.events[-1]["cause"]["id"]
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        OWNER,
        GRANT_KIND,
        override_payload(W1, "message.post", accepted, "messageRate"),
    )
    target = h.command(W1, "message.post", TEXT)
    first = grant(h, target)
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        GRANT_KIND,
        override_payload(W1, "message.post", target["actionId"], "messageRate"),
    )
    assert error.details == {"reason": "override_grant_exists", "cooperationOverrideGrantId": first}


# --- use ------------------------------------------------------------------------------------------


def test_the_grant_admits_its_target_once_and_a_retry_returns_the_prior_events() -> None:
    h = over_the_rate()
    target = h.command(W1, "message.post", TEXT)
    h.refuse(target, ErrorCode.RATE_LIMITED)
    grant_id = grant(h, target)
    target = {**target, "cooperationOverrideGrantId": grant_id}
    accepted = h.send(target)
    assert [e["kind"] for e in accepted.events] == [THRESHOLD_KIND, CONSUMED_KIND, "message.posted"]
    posted = accepted.events[-1]
    assert accepted.events[0]["payload"]["cooperationOverrideGrantId"] == grant_id
    assert accepted.events[1]["payload"] == {
        "cooperationOverrideGrantId": grant_id,
        "policyName": "messageRate",
        "beneficiary": W1.to_json(),
        "targetKind": "message.post",
        "targetActionId": target["actionId"],
        "acceptedEventId": posted["eventId"],
    }
    (stored,) = h.authority.snapshot()["state"]["overrideGrants"]
    assert stored["consumedByEventId"] == posted["eventId"]

    again = h.send(target)
    assert again.duplicate and again.receipt == accepted.receipt
    error = h.refuse(citing(h, grant_id), ErrorCode.AUTH_FORBIDDEN)
    assert error.details == {
        "reason": "override_grant_consumed",
        "cooperationOverrideGrantId": grant_id,
        "consumedByEventId": posted["eventId"],
    }


def test_a_grant_is_refused_for_any_other_actor_kind_action_or_policy() -> None:
    h = over_the_rate()
    target = h.command(W1, "message.post", TEXT)
    grant_id = grant(h, target)
    same_action = {"actionId": target["actionId"]}
    cases: list[tuple[dict[str, Any], str]] = [
        (citing(h, grant_id, actor=W2, **same_action), "beneficiary"),
        (citing(h, grant_id), "targetActionId"),
        (
            h.command(
                W1,
                "work.propose",
                {"title": "More"},
                cooperationOverrideGrantId=grant_id,
                **same_action,
            ),
            "targetKind",
        ),
    ]
    for command, member in cases:
        error = h.refuse(command, ErrorCode.AUTH_FORBIDDEN)
        assert error.details is not None
        assert (error.details["reason"], error.details["member"]) == (
            "override_grant_mismatch",
            member,
        )
    # A grant lifting another policy than the one the Command exceeds does not admit it.
    other = h.command(W1, "message.post", TEXT)
    other_grant = grant(h, other, policyName="proposalRate")
    other["cooperationOverrideGrantId"] = other_grant
    error = h.refuse(other, ErrorCode.AUTH_FORBIDDEN)
    assert error.details is not None
    assert (error.details["member"], error.details["exceeded"]) == ("policyName", ["messageRate"])
    # Nor does one for a Command that exceeds no limit (the next rate window).
    h.advance(60)
    error = h.refuse(citing(h, grant_id, **same_action), ErrorCode.AUTH_FORBIDDEN)
    assert error.details is not None
    assert (error.details["member"], error.details["exceeded"]) == ("policyName", [])


def test_a_grant_lifts_only_its_own_policy() -> None:
    h = mission_harness()
    h.cooperation_limits = replace(
        CooperationLimits(), proposal_rate=Limit(1, 1), open_proposals=Limit(1, 1)
    )
    h.submit(W1, "work.propose", {"title": "One"})
    target = h.command(W1, "work.propose", {"title": "Two"})
    grant_id = grant(h, target, policyName="proposalRate", targetKind="work.propose")
    target["cooperationOverrideGrantId"] = grant_id
    error = h.refuse(target, ErrorCode.RATE_LIMITED)
    assert error.details == {"policy": "openProposals", "limit": 1, "observed": 2}


def test_an_expired_or_unknown_grant_is_refused() -> None:
    h = over_the_rate()
    target = h.command(W1, "message.post", TEXT)
    grant_id = grant(h, target, expiresAt="2026-07-15T00:01:00Z")
    h.advance(60)
    cited = {**target, "cooperationOverrideGrantId": grant_id}
    error = h.refuse(cited, ErrorCode.AUTH_FORBIDDEN)
    assert error.details is not None and error.details["reason"] == "override_grant_expired"
    unknown = citing(h, "urn:example:grant:none")
    error = h.refuse(unknown, ErrorCode.AUTH_FORBIDDEN)
    assert error.details is not None and error.details["reason"] == "unknown_override_grant"


def test_grants_survive_snapshot_and_replay_and_stay_consumed() -> None:
    h = overridden()
    grant_id = h.authority.snapshot()["state"]["overrideGrants"][0]["grantId"]
    for authority in (
        GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot()))),
        replay(h.events),
    ):
        h.authority = authority
        error = h.refuse(citing(h, grant_id), ErrorCode.AUTH_FORBIDDEN)
        assert error.details is not None
        assert error.details["reason"] == "override_grant_consumed"


def test_issuance_and_consumption_are_in_the_policy_log() -> None:
    h = overridden()
    projection = ArchiveProjection()
    for event in h.events:
        projection.add(event)
    entries = {e["decision"]: e["details"] for e in projection.policy_entries}
    granted = next(e for e in h.events if e["kind"] == GRANTED_KIND)
    consumed = next(e for e in h.events if e["kind"] == CONSUMED_KIND)
    posted = h.events[-1]
    assert entries[GRANTED_KIND] == {
        "eventId": granted["eventId"],
        "sequence": granted["sequence"],
        "grantId": granted["payload"]["grantId"],
        "policyName": "messageRate",
    }
    assert entries[CONSUMED_KIND] == {
        "eventId": consumed["eventId"],
        "sequence": consumed["sequence"],
        "grantId": granted["payload"]["grantId"],
        "policyName": "messageRate",
        "acceptedEventId": posted["eventId"],
    }
    assert THRESHOLD_KIND in entries


def test_older_rules_know_no_grant() -> None:
    h = over_the_rate()
    h.rules = RULES_LEDGER
    payload = override_payload(W1, "message.post", "urn:example:action:next", "messageRate")
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, GRANT_KIND, payload)
    error = h.refuse(citing(h, "urn:example:grant:any"), ErrorCode.AUTH_FORBIDDEN)
    assert error.details is not None and error.details["reason"] == "unknown_override_grant"
