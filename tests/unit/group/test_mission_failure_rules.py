"""The Mission rules of issue 15 decided from the ledger rules on (spec 7.1, 7.2, 10.2, 14):
a declared child-failure propagation fails the parent Mission; WorkItems failed by a terminated
Mission carry failure Evidence; a replacement Coordinator needs a Context Package; a blocked
item whose owner ran out of lease is offered again, its owner fenced first."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.api import RULES_CONTEXT, ChildSettled
from mwp.core.group.clock import plus_seconds
from mwp.core.group.mission import termination_evidence
from mwp.core.models import validate_document
from mwp.core.trust.registry import KeyBinding, RegistryEvidence
from mwp.core.trust.signed_document import PROFILES, sign, verify_value
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import parse_timestamp
from tests.unit.group.harness import (
    ARTIFACT_A,
    AUTHORITY,
    CONTEXT_PACKAGE,
    COORD,
    COORD2,
    OWNER,
    SERVICE,
    W1,
    W2,
    Harness,
    assert_valid_event,
    fingerprint,
    item_id,
    mission_harness,
    selection_basis,
)
from tests.unit.group.test_child_missions import CHILD_MISSION, Family, child_payload, promote

END = "urn:example:event:child-end"


def _failed(state: str = "failed", reason: str | None = "the data source vanished") -> ChildSettled:
    return ChildSettled(CHILD_MISSION, state, END, COORD2.to_json(), reason=reason)  # type: ignore[arg-type]


def _kinds(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(e["kind"], e.get("workItemId")) for e in events]


# --- (a) declared child-failure propagation -----------------------------------------------------


def test_given_an_indispensable_child_when_it_fails_then_the_parent_mission_fails() -> None:
    f = Family("fail_mission")
    f.parent.drive("b", "active")
    f.parent.drive("c", "open")
    f.parent.drive("d", "verified")

    events = f.settle(_failed())

    assert _kinds(events) == [
        ("work.failed", item_id("a")),
        ("work.failed", item_id("b")),
        ("work.failed", item_id("c")),
        ("mission.terminated", None),
    ]
    assert all(e["cause"] == {"type": "event", "id": END} for e in events)
    own, *others, closing = events
    assert own["payload"]["childState"] == "failed"
    assert own["payload"]["failureEvidenceIds"] == [END]
    for event in others:
        assert event["payload"]["propagatedFrom"] == f.parent.authority.mission_id
        assert event["payload"]["failureEvidenceIds"] == [END]
    assert closing["payload"]["childMissionId"] == CHILD_MISSION
    assert closing["payload"]["failurePolicy"] == "fail_mission"
    assert closing["payload"]["workItemIds"] == [item_id(n) for n in "abc"]
    assert "the data source vanished" in closing["payload"]["reason"]
    mission = f.parent.authority.mission_view()
    assert mission["state"] == "failed"
    assert [f.parent.view(n)["state"] for n in "abcd"] == ["failed", "failed", "failed", "verified"]
    # The parent Mission is terminal: its Coordinator can no longer act, and a repeated
    # report records nothing.
    f.parent.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, "mission.terminate", {})
    assert f.settle(_failed()) == []


def test_the_parent_mission_failure_abandons_its_other_running_children() -> None:
    f = Family("fail_mission")
    f.parent.drive("b", "open")
    promote(
        f.parent,
        "b",
        childMissionId="urn:example:mission:second",
        childGroupId="urn:example:group:second",
    )
    outcome = f.parent.authority.settle_child(_failed(), f.parent.ctx())
    assert outcome is not None

    abandoned = f.parent.authority.abandoned_children(outcome.events)

    assert [child for child, _ in abandoned] == ["urn:example:mission:second"]


def test_a_cancelled_indispensable_child_fails_only_its_item() -> None:
    f = Family("fail_mission")
    f.parent.drive("b", "active")

    events = f.settle(_failed("cancelled"))

    assert _kinds(events) == [("work.failed", item_id("a"))]
    assert f.parent.authority.mission_view()["state"] == "active"
    assert f.parent.view("b")["state"] == "active"


@pytest.mark.parametrize(("policy", "item_state"), [("block", "blocked"), ("fail", "failed")])
def test_other_policies_keep_the_parent_mission_active(policy: str, item_state: str) -> None:
    f = Family(policy)
    f.parent.drive("b", "active")

    events = f.settle(_failed())

    assert len(events) == 1 and events[0]["workItemId"] == item_id("a")
    assert f.parent.view("a")["state"] == item_state
    assert f.parent.authority.mission_view()["state"] == "active"
    assert f.parent.view("b")["state"] == "active"


def test_fail_mission_is_not_a_policy_of_older_rules() -> None:
    h = mission_harness()
    h.rules = RULES_CONTEXT
    h.drive("a", "open")
    before = fingerprint(h.authority)
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "mission.create_child",
        child_payload(failurePolicy="fail_mission"),
        workItemId=item_id("a"),
    )
    assert fingerprint(h.authority) == before
    promote(h, failurePolicy="fail")  # the policies they knew stay


def test_a_failed_parent_mission_replays_and_restores_identically() -> None:
    f = Family("fail_mission")
    f.parent.drive("b", "queued")
    f.settle(_failed())
    rebuilt = replay(f.parent.events)
    assert rebuilt.mission_view() == f.parent.authority.mission_view()
    restored = GroupAuthority.restore(f.parent.authority.snapshot())
    assert fingerprint(restored) == fingerprint(f.parent.authority)


# --- (b) failure Evidence of a terminated Mission's WorkItems -----------------------------------

UNFINISHED = ("open", "offered", "queued", "active", "blocked", "submitted")


AUTHORITY_KEY_ID = "urn:example:key:group-authority"
AUTHORITY_KEY = SigningKey(hashlib.sha256(AUTHORITY.id.encode()).digest())
REGISTRY = RegistryEvidence.from_bindings(
    "urn:example:organization:failure",
    [
        KeyBinding(
            AUTHORITY_KEY_ID,
            AUTHORITY,
            "Ed25519",
            AUTHORITY_KEY.public_key,
            parse_timestamp("2020-01-01T00:00:00Z"),
            (),
        )
    ],
)


def _signed(records: dict[str, Any]) -> dict[str, Any]:
    """Each record signed by the Group Authority, as the shell's activity signs them."""
    return {
        item: sign(record, "evidence", AUTHORITY_KEY_ID, AUTHORITY_KEY)
        for item, record in records.items()
    }


def _terminate(h: Harness, actor: Any, payload: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """As the MissionWorkflow does it: the decision's failure Evidence, signed with the Group
    Authority's key, handed back to the decision through its context."""
    envelope = h.envelope(h.command(actor, "mission.terminate", payload))
    records = termination_evidence(h.authority._state, envelope, h.ctx())
    signed = _signed(records)
    outcome = h.authority.submit(envelope, replace(h.ctx(), signed_evidence=signed))
    for event in outcome.events:
        assert_valid_event(event)
    h.events.extend(outcome.events)
    return outcome, signed


def _unfinished_items() -> Harness:
    h = mission_harness()
    for state in UNFINISHED:
        h.drive(state, state)
    h.drive("verified", "verified")
    return h


@pytest.mark.parametrize("actor", [COORD, SERVICE])
def test_given_unfinished_items_when_the_mission_is_terminated_then_each_has_failure_evidence(
    actor: Any,
) -> None:
    h = _unfinished_items()

    outcome, signed = _terminate(h, actor, {"reason": "The budget was withdrawn."})

    *failed, closing = outcome.events
    assert closing["kind"] == "mission.terminated"
    assert [e["workItemId"] for e in failed] == [item_id(s) for s in UNFINISHED]
    seen = set()
    for event, state in zip(failed, UNFINISHED, strict=True):
        payload = event["payload"]
        [record] = payload["failureEvidence"]
        assert record == signed[event["workItemId"]]  # carried unchanged, signature and all
        validate_document("evidence.schema.json", record)
        verified = verify_value(record, PROFILES["evidence"], REGISTRY)
        assert verified.principal == AUTHORITY
        assert record["signature"]["createdAt"] == record["createdAt"]
        assert payload["failureEvidenceIds"] == [record["evidenceId"]]
        assert record["workItemId"] == event["workItemId"]
        assert record["subject"] == {"type": "work_item", "id": event["workItemId"]}
        assert record["missionId"] == h.authority.mission_id
        assert record["groupId"] == h.group_id
        assert (record["type"], record["result"]) == ("failure_report", "failed")
        assert record["criterionIds"] == ["tests-pass", "reviewed"]
        assert record["generatedBy"] == AUTHORITY.to_json()
        assert record["createdAt"] == event["occurredAt"]
        assert record["details"]["reason"] == "The budget was withdrawn."
        assert record["details"]["previousState"] == state
        assert record["artifactHashes"] == ([ARTIFACT_A] if state == "submitted" else [])
        seen.add(record["evidenceId"])
        assert h.view(state)["failure"]["failureEvidence"] == [record]
    assert len(seen) == len(UNFINISHED)
    assert h.view("verified")["state"] == "verified"


def test_without_a_signed_record_of_its_own_body_the_evidence_is_unsigned() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.drive("b", "queued")
    envelope = h.envelope(h.command(COORD, "mission.terminate", {"reason": "stop"}))
    records = termination_evidence(h.authority._state, envelope, h.ctx())
    assert set(records) == {item_id("a"), item_id("b")}
    signed = _signed(records)
    # One signed an hour early (another decision's time), one whose body was altered.
    early = {**records[item_id("a")], "createdAt": plus_seconds(h.now, -3600)}
    altered = {**records[item_id("b")], "result": "passed"}
    stale = _signed({item_id("a"): early, item_id("b"): altered})
    assert stale != signed

    outcome = h.authority.submit(envelope, replace(h.ctx(), signed_evidence=stale))

    for event in outcome.events[:-1]:
        [record] = event["payload"]["failureEvidence"]
        assert "signature" not in record
        assert record == records[event["workItemId"]]


def test_only_a_terminate_under_the_ledger_rules_asks_for_evidence() -> None:
    h = mission_harness()
    h.drive("a", "active")
    cancel = h.envelope(h.command(OWNER, "mission.cancel", {}))
    assert termination_evidence(h.authority._state, cancel, h.ctx()) == {}
    h.rules = RULES_CONTEXT
    terminate = h.envelope(h.command(COORD, "mission.terminate", {}))
    assert termination_evidence(h.authority._state, terminate, h.ctx()) == {}


def test_under_older_rules_a_termination_names_no_failure_evidence() -> None:
    h = mission_harness()
    h.rules = RULES_CONTEXT
    h.drive("a", "active")
    outcome = h.submit(COORD, "mission.terminate", {})
    payload = outcome.events[0]["payload"]
    assert payload["failureEvidenceIds"] == [] and "failureEvidence" not in payload


def test_a_cancelled_mission_fails_nothing_and_names_no_failure_evidence() -> None:
    h = _unfinished_items()
    outcome = h.submit(OWNER, "mission.cancel", {})
    for event in outcome.events[:-1]:
        assert event["kind"] == "work.cancelled"
        assert "failureEvidence" not in event["payload"]
        assert "failureEvidenceIds" not in event["payload"]


def test_a_terminated_mission_s_evidence_replays_identically() -> None:
    h = _unfinished_items()
    h.submit(COORD, "mission.terminate", {"reason": "stop"})
    assert replay(h.events).work_item_view(item_id("active")) == h.view("active")
    restored = GroupAuthority.restore(h.authority.snapshot())
    assert fingerprint(restored) == fingerprint(h.authority)


# --- (c) a replacement Coordinator is handed a Context Package (MWP-MSN-005) ---------------------


def _assign(h: Harness, actor: Any = OWNER, **payload: Any) -> Any:
    return h.submit(actor, "mission.assign_coordinator", {"agentId": COORD2.id, **payload})


@pytest.mark.parametrize("expired", [False, True])
def test_given_no_package_when_a_replacement_is_appointed_then_refused(expired: bool) -> None:
    h = mission_harness()
    if expired:
        h.advance(3601)  # the Coordinator stopped renewing its lease
    before = fingerprint(h.authority)
    for actor in (OWNER, SERVICE):
        error = h.reject(
            ErrorCode.INVALID_COMMAND, actor, "mission.assign_coordinator", {"agentId": COORD2.id}
        )
        assert error.details is not None
        assert error.details["agentId"] == COORD2.id
        assert error.details["reason"] == "context_package_required"
        assert error.details["member"] == "payload.contextPackageId"
    assert fingerprint(h.authority) == before


@pytest.mark.parametrize("expired", [False, True])
def test_given_a_published_package_when_a_replacement_is_appointed_then_assigned(
    expired: bool,
) -> None:
    h = mission_harness()
    h.publish_context_package()
    if expired:
        h.advance(3601)
    outcome = _assign(h, contextPackageId=CONTEXT_PACKAGE)
    assigned = outcome.events[-1]
    assert assigned["kind"] == "mission.coordinator.assigned"
    assert assigned["payload"]["contextPackageId"] == CONTEXT_PACKAGE
    assert h.authority.mission_view()["coordinator"]["agentId"] == COORD2.id


def test_a_replacement_s_package_must_have_mission_scope() -> None:
    h = mission_harness()
    h.authorize("a")
    scoped = "urn:example:context-package:scoped"
    h.publish_context_package(h.context_package(scoped, workItemId=item_id("a")))
    before = fingerprint(h.authority)
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": scoped},
    )
    assert error.details is not None and error.details["contextPackageId"] == scoped
    assert fingerprint(h.authority) == before


def test_re_appointing_the_holder_needs_no_package() -> None:
    h = mission_harness()
    h.advance(3601)
    outcome = h.submit(OWNER, "mission.assign_coordinator", {"agentId": COORD.id})
    assert outcome.events[-1]["payload"]["coordinator"]["coordinatorEpoch"] == 2


def test_under_older_rules_a_replacement_needs_no_package() -> None:
    h = mission_harness()
    h.rules = RULES_CONTEXT
    _assign(h)
    assert h.authority.mission_view()["coordinator"]["agentId"] == COORD2.id


# --- (d) a blocked item whose owner ran out of lease is offered again ---------------------------


def test_given_a_blocked_item_whose_lease_ran_out_then_an_offer_fences_the_owner_first() -> None:
    h = mission_harness()
    h.drive("a", "blocked")
    # While the blocked lease runs the owner is live: no new offer.
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.offer",
        {
            "candidates": [{"agentId": W2.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
        },
        workItemId=item_id("a"),
    )
    # The lease runs out; its timer has not fired yet, so the offer itself fences the owner.
    h.advance(3600)
    h.submit(COORD, "mission.renew_coordinator", {})
    assert h.view("a")["owner"]["agentId"] == W1.id

    outcome = h.offer("a", W2)  # straight from blocked, without work.unblock

    assert outcome.events[-1]["payload"]["fencedOwnership"] == {
        "agentId": W1.id,
        "ownershipEpoch": 1,
    }
    view = h.view("a")
    assert view["state"] == "offered" and "owner" not in view
    h.accept("a", W2)
    assert h.epoch("a") == 2
    # The fenced owner can no longer act on it; the new owner can.
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.start("a", W2)
    assert h.view("a")["owner"]["agentId"] == W2.id
