"""Child Missions (spec 7.1 row 3, 10.2 rows for ``mission.create_child``, 14)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.api import ChildSettled
from mwp.core.group.policy import MAX_CHILD_MISSION_DEPTH
from mwp.core.models import validate_document
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    COORD2,
    MISSION,
    OWNER,
    W1,
    Harness,
    assert_valid_event,
    contract,
    fingerprint,
    item_id,
    mission_harness,
    selection_basis,
)

CHILD_MISSION = "urn:example:mission:alpha-child"
CHILD_GROUP = "urn:example:group:alpha-child"


def child_payload(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "childMissionId": CHILD_MISSION,
        "childGroupId": CHILD_GROUP,
        "objective": "Review the pagination change for security.",
        "definitionOfDone": [
            {
                "criterionId": "reviewed",
                "description": "Findings and their disposition are attached.",
                "evidenceRequired": ["reviewer_assessment"],
            }
        ],
        "budget": {"modelTokenLimit": 400},
        "deadline": "2026-07-19T00:00:00Z",
        "coordinatorAgentId": COORD2.id,
    }
    body.update(overrides)
    return body


def promote(h: Harness, name: str = "a", **overrides: Any) -> dict[str, Any]:
    outcome = h.submit(
        COORD, "mission.create_child", child_payload(**overrides), workItemId=item_id(name)
    )
    (event,) = outcome.events
    return event


class Family:
    """A parent Group with item "a" promoted, and the child Group founded from its Event."""

    def __init__(self, failure_policy: str = "block") -> None:
        self.parent = mission_harness()
        self.parent.drive("a", "active")
        self.link_event = promote(self.parent, failurePolicy=failure_policy)
        self.child = Harness(GroupAuthority(), group_id=CHILD_GROUP)
        self.child.now = self.parent.now
        founded = self.child.authority.found_child(self.link_event, self.child.ctx())
        assert founded is not None
        for event in founded.events:
            assert_valid_event(event)
        self.child.events.extend(founded.events)
        self.founding = list(founded.events)

    def settle(self, report: ChildSettled) -> list[dict[str, Any]]:
        outcome = self.parent.authority.settle_child(report, self.parent.ctx())
        if outcome is None:
            return []
        for event in outcome.events:
            assert_valid_event(event)
        self.parent.events.extend(outcome.events)
        return list(outcome.events)

    def approve_child(self) -> dict[str, Any]:
        """Run the child Mission to its approval by the Parent Coordinator (its owner)."""
        c = self.child
        c.submit(COORD2, "membership.change", {"memberId": W1.id, "role": "worker"})
        wid = item_id("child-work")
        c.submit(
            COORD2,
            "work.authorize",
            {"contract": contract(budget={"modelTokenLimit": 100})},
            workItemId=wid,
        )
        c.submit(
            COORD2,
            "work.offer",
            {
                "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
                "expiresAt": "2026-07-15T01:00:00Z",
            },
            workItemId=wid,
        )
        c.accept("child-work")
        c.start("child-work")
        c.submit_work("child-work")
        c.accept_result("child-work", COORD2)
        submitted = c.submit(
            COORD2, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]}
        )
        assert submitted.events[0]["payload"]["missionRevision"]
        approved = c.approve(COORD)
        (event,) = approved.events
        return event


def _approved_report(event: dict[str, Any]) -> ChildSettled:
    return ChildSettled(
        CHILD_MISSION, "approved", event["eventId"], event["actor"], event["payload"]["approval"]
    )


# --- promotion in the parent Group -------------------------------------------------------------


@pytest.mark.parametrize("state", ["open", "offered", "queued", "active", "blocked"])
def test_given_a_promotable_item_when_coordinator_creates_child_then_item_blocked_and_fenced(
    state: str,
) -> None:
    h = mission_harness()
    h.drive("a", state)

    event = promote(h)

    view = h.view("a")
    assert view["state"] == "blocked"
    assert view["childMission"]["missionId"] == CHILD_MISSION
    assert view["childMission"]["status"] == "running"
    assert event["kind"] == "mission.child.created" and event["workItemId"] == item_id("a")
    child = event["payload"]["childMission"]
    assert child["parent"] == {"missionId": MISSION, "workItemId": item_id("a"), "depth": 1}
    assert child["missionOwner"] == COORD.to_json()
    validate_document("mission.schema.json", child)
    assert event["payload"]["previousState"] == state
    assert h.authority.timers() == []  # a fenced owner holds no timer
    if state in ("queued", "active", "blocked"):
        assert event["payload"]["fencedOwnership"]["agentId"] == W1.id
    if state == "offered":
        assert event["payload"]["withdrawnOfferIds"]


def test_a_fenced_owner_can_no_longer_act_on_a_promoted_item() -> None:
    h = mission_harness()
    h.drive("a", "active")
    payload = h.owner_payload("a", reason="x", failureEvidenceIds=["urn:example:evidence:f"])
    promote(h)

    h.reject(ErrorCode.WORK_STALE_OWNERSHIP, W1, "work.fail", payload, workItemId=item_id("a"))


@pytest.mark.parametrize("state", ["submitted", "verified", "cancelled", "failed"])
def test_given_an_unpromotable_item_when_creating_child_then_invalid_state_transition(
    state: str,
) -> None:
    h = mission_harness()
    h.drive("a", state)
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "mission.create_child",
        child_payload(),
        workItemId=item_id("a"),
    )


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"budget": {"modelTokenLimit": 5000}}, ErrorCode.BUDGET_EXCEEDED),
        ({"budget": {"toolCallLimit": 1}}, ErrorCode.INVALID_COMMAND),
        ({"deadline": "2026-07-25T00:00:00Z"}, ErrorCode.INVALID_COMMAND),
        ({"deadline": "2026-07-14T00:00:00Z"}, ErrorCode.INVALID_COMMAND),
        ({"childMissionId": MISSION}, ErrorCode.INVALID_COMMAND),
        ({"childGroupId": "urn:example:group:alpha"}, ErrorCode.INVALID_COMMAND),
        ({"coordinatorAgentId": COORD.id}, ErrorCode.INVALID_COMMAND),
        (
            {"approvalPolicy": {"finalHumanApproval": True, "highRiskExecutionApproval": True}},
            ErrorCode.INVALID_COMMAND,
        ),
        ({"failurePolicy": "ignore"}, ErrorCode.INVALID_COMMAND),
        ({"definitionOfDone": []}, ErrorCode.INVALID_COMMAND),
    ],
)
def test_a_child_must_narrow_its_parent(overrides: dict[str, Any], code: ErrorCode) -> None:
    h = mission_harness()
    h.drive("a", "open")
    h.reject(
        code, COORD, "mission.create_child", child_payload(**overrides), workItemId=item_id("a")
    )


def test_only_the_current_coordinator_creates_children() -> None:
    h = mission_harness()
    h.drive("a", "open")
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        W1,
        "mission.create_child",
        child_payload(),
        workItemId=item_id("a"),
    )
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        COORD,
        "mission.create_child",
        child_payload(),
        workItemId=item_id("a"),
        coordinatorEpoch=7,
    )


def test_a_waiting_item_cannot_be_promoted_again_or_unblocked() -> None:
    h = mission_harness()
    h.drive("a", "open")
    promote(h)
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "mission.create_child",
        child_payload(childMissionId="urn:example:mission:second"),
        workItemId=item_id("a"),
    )
    h.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, "work.unblock", {}, workItemId=item_id("a"))


# --- the child Group ----------------------------------------------------------------------------


def test_the_child_group_is_founded_from_the_parent_event() -> None:
    f = Family()

    kinds = [e["kind"] for e in f.founding]
    assert kinds == ["mission.child.created", "membership.changed", "membership.changed"]
    first = f.founding[0]
    assert first["groupId"] == CHILD_GROUP and first["sequence"] == 1
    assert first["cause"] == {"type": "event", "id": f.link_event["eventId"]}
    assert first["payload"]["parentEventId"] == f.link_event["eventId"]
    view = f.child.authority.mission_view()
    assert view["missionOwner"] == COORD.to_json()
    assert view["coordinator"]["agentId"] == COORD2.id
    assert view["parent"]["depth"] == 1
    roles = {m["member"]["id"]: m["role"] for m in view["memberships"]}
    assert roles == {COORD.id: "mission_owner", COORD2.id: "coordinator"}
    # Founding again changes nothing; another Mission's Event is refused.
    before = fingerprint(f.child.authority)
    assert f.child.authority.found_child(f.link_event, f.child.ctx()) is None
    assert fingerprint(f.child.authority) == before
    other = copy.deepcopy(f.link_event)
    other["payload"]["childMission"]["missionId"] = "urn:example:mission:other"
    with pytest.raises(Exception, match="another Mission"):
        f.child.authority.found_child(other, f.child.ctx())


def test_the_child_is_approved_by_the_parent_coordinator_as_a_child_approval() -> None:
    f = Family()
    event = f.approve_child()
    approval = event["payload"]["approval"]
    assert approval["kind"] == "child_mission"
    assert approval["approver"] == COORD.to_json()
    assert f.child.authority.mission_view()["state"] == "approved"


def test_a_deeper_child_than_policy_allows_is_refused() -> None:
    f = Family()
    deep = copy.deepcopy(f.link_event)
    deep["payload"]["childMission"]["parent"]["depth"] = MAX_CHILD_MISSION_DEPTH
    child = Harness(GroupAuthority(), group_id=CHILD_GROUP)
    child.now = f.parent.now
    child.authority.found_child(deep, child.ctx())
    child.submit(
        COORD2,
        "work.authorize",
        {"contract": contract(budget={"modelTokenLimit": 100})},
        workItemId=item_id("x"),
    )
    refused = child.reject(
        ErrorCode.AUTH_FORBIDDEN,
        COORD2,
        "mission.create_child",
        child_payload(
            childMissionId="urn:example:mission:grandchild",
            childGroupId="urn:example:group:grandchild",
            coordinatorAgentId=W1.id,
            budget={"modelTokenLimit": 10},
        ),
        workItemId=item_id("x"),
    )
    assert refused.details["maximumDepth"] == MAX_CHILD_MISSION_DEPTH


# --- the parent records the child's outcome ---------------------------------------------------


def test_child_approval_verifies_the_parent_item_with_the_approval_as_evidence() -> None:
    f = Family()
    approved = f.approve_child()

    (event,) = f.settle(_approved_report(approved))

    assert event["kind"] == "work.result.accepted"
    assert event["cause"] == {"type": "event", "id": approved["eventId"]}
    assert event["actor"] == COORD.to_json()
    view = f.parent.view("a")
    assert view["state"] == "verified"
    assert view["childMission"]["status"] == "approved"
    assert event["payload"]["reviewEvidenceIds"] == [approved["payload"]["approval"]["approvalId"]]
    # The child's Artifacts are the item's result: the parent Mission can be submitted with them.
    f.parent.submit(COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]})
    assert f.parent.authority.mission_view()["state"] == "awaiting_approval"
    # A repeated report records nothing.
    assert f.settle(_approved_report(approved)) == []


@pytest.mark.parametrize("child_state", ["failed", "cancelled"])
def test_a_failed_child_blocks_the_item_by_default_and_the_coordinator_replans(
    child_state: str,
) -> None:
    f = Family("block")
    report = ChildSettled(CHILD_MISSION, child_state, "urn:example:event:end", COORD2.to_json())  # type: ignore[arg-type]

    (event,) = f.settle(report)

    assert event["kind"] == "work.blocked"
    view = f.parent.view("a")
    assert view["state"] == "blocked"
    assert view["childMission"]["status"] == child_state
    f.parent.submit(COORD, "work.unblock", {}, workItemId=item_id("a"))
    assert f.parent.view("a")["state"] == "open"


def test_a_failed_child_fails_the_item_when_the_policy_says_so() -> None:
    f = Family("fail")
    report = ChildSettled(CHILD_MISSION, "failed", "urn:example:event:end", COORD2.to_json())

    (event,) = f.settle(report)

    assert event["kind"] == "work.failed"
    assert event["payload"]["failureEvidenceIds"] == ["urn:example:event:end"]
    assert f.parent.view("a")["state"] == "failed"


def test_cancelling_the_parent_item_cancels_the_running_child() -> None:
    f = Family()
    outcome = f.parent.submit(COORD, "work.cancel", {}, workItemId=item_id("a"))

    abandoned = f.parent.authority.abandoned_children(outcome.events)
    assert abandoned == [(CHILD_MISSION, outcome.events[0]["eventId"])]
    closed = f.child.authority.close_for_parent(abandoned[0][1], f.child.ctx())
    assert closed is not None
    assert [e["kind"] for e in closed.events] == ["mission.cancelled"]
    assert closed.events[0]["cause"] == {"type": "event", "id": abandoned[0][1]}
    assert f.child.authority.mission_view()["state"] == "cancelled"
    # Closed once; the child's cancellation then finds no item waiting in the parent.
    assert f.child.authority.close_for_parent(abandoned[0][1], f.child.ctx()) is None
    report = ChildSettled(CHILD_MISSION, "cancelled", closed.events[0]["eventId"], COORD.to_json())
    assert f.settle(report) == []


def test_parent_mission_cancellation_abandons_its_children() -> None:
    f = Family()
    outcome = f.parent.submit(OWNER, "mission.cancel", {})
    assert [c for c, _ in f.parent.authority.abandoned_children(outcome.events)] == [CHILD_MISSION]


def test_both_groups_replay_and_restore_identically() -> None:
    f = Family()
    f.settle(_approved_report(f.approve_child()))
    for h in (f.parent, f.child):
        rebuilt = replay(h.events)
        assert rebuilt.mission_view() == h.authority.mission_view()
        restored = GroupAuthority.restore(h.authority.snapshot())
        assert fingerprint(restored) == fingerprint(h.authority)
