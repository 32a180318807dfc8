"""The Mission state table (spec 7.1), Coordinator lease (7.2) and human Approval (7.3)."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import MISSION_VIEW_EXTRAS, schema_part
from mwp.core.models import validate_document
from mwp.core.trust.registry import Principal
from tests.unit.group.harness import (
    ARTIFACT_A,
    ARTIFACT_B,
    COORD,
    COORD2,
    OWNER,
    SERVICE,
    W1,
    Harness,
    item_id,
    mission_harness,
)


def _verified_harness() -> Harness:
    h = mission_harness()
    h.verify("a")
    return h


def _submit_mission(h: Harness) -> int:
    h.submit(COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]})
    return int(h.authority.mission_view()["submission"]["missionRevision"])


# --- submission ------------------------------------------------------------------------------


def test_given_settled_work_when_coordinator_submits_then_awaiting_approval() -> None:
    h = _verified_harness()
    h.authorize("dropped")
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("dropped"))

    outcome = h.submit(
        COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A], "summary": "Done."}
    )

    view = h.authority.mission_view()
    assert view["state"] == "awaiting_approval"
    assert outcome.events[0]["payload"]["missionRevision"] == view["revision"] == 2
    assert outcome.receipt.aggregate_revision == 2
    assert view["submission"]["artifactHashes"] == [ARTIFACT_A]
    validate_document("mission.schema.json", schema_part(view, MISSION_VIEW_EXTRAS))


def test_given_unsettled_work_when_submitting_then_invalid_state_transition() -> None:
    h = _verified_harness()
    h.authorize("pending")
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "mission.submit_for_approval",
        {"artifactHashes": [ARTIFACT_A]},
    )
    assert error.details == {"unsettledWorkItemIds": [item_id("pending")]}


def test_given_no_verified_work_when_submitting_then_invalid_state_transition() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "mission.submit_for_approval",
        {"artifactHashes": [ARTIFACT_A]},
    )


def test_given_foreign_artifact_when_submitting_then_invalid_command() -> None:
    h = _verified_harness()
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "mission.submit_for_approval",
        {"artifactHashes": [ARTIFACT_A, ARTIFACT_B]},
    )
    h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "mission.submit_for_approval", {"artifactHashes": []}
    )


# --- approval --------------------------------------------------------------------------------


def test_given_submission_when_owner_approves_exact_revision_and_set_then_approved() -> None:
    h = _verified_harness()
    revision = _submit_mission(h)

    signed = h.approval(comments="Ship it.")
    outcome = h.submit(
        OWNER,
        "mission.approve",
        {"missionRevision": revision, "artifactHashes": [ARTIFACT_A], "approval": signed},
    )

    approval = outcome.events[0]["payload"]["approval"]
    assert approval["decision"] == "approved" and approval["kind"] == "mission_final"
    assert approval["missionRevision"] == revision and approval["approver"] == OWNER.to_json()
    assert approval == signed  # the approver's signed document, as sent
    validate_document("approval.schema.json", approval)
    assert h.authority.mission_view()["state"] == "approved"
    assert h.authority.search_attributes()["MissionState"] == "approved"


def test_given_submission_when_approval_names_another_revision_then_revision_conflict() -> None:
    h = _verified_harness()
    revision = _submit_mission(h)
    error = h.reject(
        ErrorCode.REVISION_CONFLICT,
        OWNER,
        "mission.approve",
        {"missionRevision": revision - 1, "artifactHashes": [ARTIFACT_A], "approval": h.approval()},
    )
    assert (error.expected_revision, error.current_revision) == (revision - 1, revision)


def test_given_submission_when_approval_names_another_artifact_set_then_invalid_command() -> None:
    h = _verified_harness()
    revision = _submit_mission(h)
    h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        "mission.approve",
        {"missionRevision": revision, "artifactHashes": [ARTIFACT_B], "approval": h.approval()},
    )


def test_given_submission_when_owner_requests_changes_then_active_again() -> None:
    h = _verified_harness()
    revision = _submit_mission(h)

    h.submit(OWNER, "mission.request_changes", h.changes_payload("Add an integration test."))

    view = h.authority.mission_view()
    assert view["state"] == "active" and view["submission"] is None
    assert view["approval"]["decision"] == "changes_requested"
    assert view["approval"]["comments"] == "Add an integration test."
    assert view["approval"]["missionRevision"] == revision
    # The Coordinator creates corrective work and submits again.
    h.verify("fix")
    second = _submit_mission(h)
    assert second > revision
    h.approve()


def test_request_changes_needs_a_reason() -> None:
    h = _verified_harness()
    _submit_mission(h)
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.request_changes", h.changes_payload(" "))
    payload = h.changes_payload()
    del payload["approval"]
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.request_changes", payload)


# --- cancel / terminate ----------------------------------------------------------------------


def test_given_unfinished_work_when_owner_cancels_then_mission_and_work_cancelled() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.drive("b", "offered")
    h.verify("c")

    outcome = h.submit(OWNER, "mission.cancel", {"reason": "Priorities changed."})

    assert [e["kind"] for e in outcome.events] == [
        "work.cancelled",
        "work.cancelled",
        "mission.cancelled",
    ]
    assert outcome.receipt.aggregate_revision == h.authority.mission_view()["revision"]
    assert [h.view(n)["state"] for n in "abc"] == ["cancelled", "cancelled", "verified"]
    assert h.authority.timers() == []


def test_given_service_policy_when_it_cancels_then_cancelled() -> None:
    h = mission_harness()
    h.submit(SERVICE, "mission.cancel", {"reason": "Organization policy."})
    assert h.authority.mission_view()["state"] == "cancelled"


def test_given_active_work_when_coordinator_terminates_then_failed_everywhere() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    outcome = h.submit(COORD, "mission.terminate", {"reason": "Unrecoverable."})
    assert [e["kind"] for e in outcome.events] == ["work.failed", "mission.terminated"]
    assert h.authority.mission_view()["state"] == "failed"
    assert h.view("a")["state"] == "failed"


def test_given_service_when_it_terminates_then_failed() -> None:
    h = mission_harness()
    h.submit(SERVICE, "mission.terminate", {"reason": "Policy."})
    assert h.authority.mission_view()["state"] == "failed"


# --- the Mission state table -----------------------------------------------------------------

MISSION_STATES = ["active", "awaiting_approval", "approved", "cancelled", "failed"]
ALLOWED = {
    "mission.submit_for_approval": {"active"},
    "mission.approve": {"awaiting_approval"},
    "mission.request_changes": {"awaiting_approval"},
    "mission.cancel": {"active", "awaiting_approval"},
    "mission.terminate": {"active", "awaiting_approval"},
    "mission.assign_coordinator": {"active", "awaiting_approval"},
    "mission.renew_coordinator": {"active", "awaiting_approval"},
}


def _mission_in(state: str) -> tuple[Harness, int]:
    h = _verified_harness()
    revision = 0
    if state != "active":
        revision = _submit_mission(h)
    if state == "approved":
        h.approve()
    elif state == "cancelled":
        h.submit(OWNER, "mission.cancel", {})
    elif state == "failed":
        h.submit(COORD, "mission.terminate", {"reason": "stop"})
    return h, revision


def _mission_command(h: Harness, kind: str, revision: int) -> tuple[Principal, dict[str, Any]]:
    payloads: dict[str, tuple[Principal, dict[str, Any]]] = {
        "mission.submit_for_approval": (COORD, {"artifactHashes": [ARTIFACT_A]}),
        "mission.approve": (OWNER, h.approve_payload()),
        "mission.request_changes": (OWNER, h.changes_payload()),
        "mission.cancel": (OWNER, {}),
        "mission.terminate": (COORD, {"reason": "stop"}),
        "mission.assign_coordinator": (OWNER, {"agentId": COORD2.id}),
        "mission.renew_coordinator": (COORD, {}),
    }
    if kind == "mission.assign_coordinator" and state_allows(h, kind):
        # A replacement is handed a Context Package (published while the Mission takes one).
        return OWNER, {"agentId": COORD2.id, "contextPackageId": h.handover_package()}
    return payloads[kind]


def state_allows(h: Harness, kind: str) -> bool:
    return h.authority.mission_view()["state"] in ALLOWED[kind]


@pytest.mark.parametrize("state", MISSION_STATES)
@pytest.mark.parametrize("kind", sorted(ALLOWED))
def test_mission_state_table(state: str, kind: str) -> None:
    h, revision = _mission_in(state)
    assert h.authority.mission_view()["state"] == state
    actor, payload = _mission_command(h, kind, revision)
    if state in ALLOWED[kind]:
        outcome = h.submit(actor, kind, payload)
        assert outcome.events
    else:
        h.reject(ErrorCode.INVALID_STATE_TRANSITION, actor, kind, payload)


@pytest.mark.parametrize("state", ["awaiting_approval", "approved", "cancelled", "failed"])
def test_work_moves_only_while_the_mission_is_active(state: str) -> None:
    h, _ = _mission_in(state)
    from tests.unit.group.harness import contract

    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD if state != "approved" else OWNER,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("late"),
    )


# --- Coordinator lease -----------------------------------------------------------------------


def test_given_a_coordinator_when_owner_assigns_another_then_higher_epoch_and_membership() -> None:
    h = mission_harness()
    handover = "urn:example:context-package:handover"
    h.publish_context_package(h.context_package(handover))
    outcome = h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": handover},
    )
    assert [e["kind"] for e in outcome.events] == [
        "membership.changed",
        "mission.coordinator.assigned",
    ]
    view = h.authority.mission_view()
    assert view["coordinator"]["agentId"] == COORD2.id
    assert view["coordinator"]["coordinatorEpoch"] == 2
    assert view["coordinator"]["leaseId"] != outcome.events[1]["payload"]["previousCoordinator"]
    assert outcome.events[1]["payload"]["previousCoordinator"] == {
        "agentId": COORD.id,
        "coordinatorEpoch": 1,
    }
    validate_document("lease.schema.json", view["coordinatorLease"])
    # The replaced Coordinator stays a member: it may still talk.
    h.submit(COORD, "message.post", {"content": [{"type": "text", "text": "Handing over."}]})


def test_given_service_when_it_assigns_a_coordinator_then_assigned() -> None:
    h = mission_harness()
    h.submit(
        SERVICE,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": h.handover_package()},
    )
    assert h.authority.mission_view()["coordinator"]["agentId"] == COORD2.id


def test_assigning_a_coordinator_without_a_session_or_a_human_is_invalid() -> None:
    h = mission_harness()
    del h.sessions[COORD2.id]
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.assign_coordinator", {"agentId": COORD2.id})
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.assign_coordinator", {"agentId": OWNER.id})


def test_given_a_coordinator_when_it_renews_then_expiry_moves_and_count_grows() -> None:
    h = mission_harness()
    h.advance(600)
    outcome = h.submit(
        COORD, "mission.renew_coordinator", {"leaseSeconds": 7200}, expectedRevision=1
    )
    lease = h.authority.mission_view()["coordinatorLease"]
    assert lease["renewalCount"] == 1 and lease["lastRenewedAt"] == h.now
    assert lease["expiresAt"] == "2026-07-15T02:10:00Z"
    assert outcome.receipt.aggregate_revision == 2
    h.reject(
        ErrorCode.REVISION_CONFLICT, COORD, "mission.renew_coordinator", {}, expectedRevision=1
    )
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "mission.renew_coordinator", {"leaseSeconds": 10**9})


def test_a_worker_cannot_renew_the_coordinator_lease() -> None:
    h = mission_harness()
    h.reject(ErrorCode.AUTH_FORBIDDEN, W1, "mission.renew_coordinator", {}, coordinatorEpoch=1)
