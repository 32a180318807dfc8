"""The ordered Authority step: each check, its error code, and that a refusal changes nothing."""

from __future__ import annotations

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import Envelope, GroupAuthority
from mwp.core.group.api import RULES_LEDGER
from tests.unit.group.harness import (
    COORD,
    COORD2,
    OWNER,
    SERVICE,
    STRANGER,
    W1,
    W2,
    W3,
    item_id,
    mission_harness,
)

# --- 1. Group scope --------------------------------------------------------------------------


def test_given_a_group_when_command_names_another_group_then_group_not_found() -> None:
    h = mission_harness()
    error = h.reject(
        ErrorCode.GROUP_NOT_FOUND,
        W1,
        "message.post",
        {"content": [{"type": "text", "text": "hi"}]},
        groupId="urn:example:group:beta",
    )
    assert error.action_id is not None


# --- 2. Idempotency --------------------------------------------------------------------------


def test_given_accepted_command_when_retried_byte_equal_then_original_receipt_no_events() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", {"content": [{"type": "text", "text": "hello"}]})
    first = h.send(command)
    h.submit(W2, "message.post", {"content": [{"type": "text", "text": "in between"}]})

    again = h.send(command)
    h.authority.check(h.envelope(command), h.ctx())  # a retry passes the validator too

    assert again.duplicate and again.events == ()
    assert again.receipt == first.receipt
    assert again.receipt.to_json()["lastSequence"] == first.receipt.last_sequence


def test_given_accepted_command_when_action_id_reused_for_other_content_then_collision() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", {"content": [{"type": "text", "text": "hello"}]})
    h.send(command)
    changed = {**command, "payload": {"content": [{"type": "text", "text": "bye"}]}}
    h.refuse(changed, ErrorCode.ACTION_ID_COLLISION)


def test_given_same_action_id_from_another_actor_then_independent() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", {"content": [{"type": "text", "text": "hello"}]})
    h.send(command)
    other = h.command(W2, "message.post", {"content": [{"type": "text", "text": "hello"}]})
    other["actionId"] = command["actionId"]
    assert not h.send(other).duplicate


def test_given_a_retry_re_signed_over_the_same_content_then_still_a_duplicate() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", {"content": [{"type": "text", "text": "hello"}]})
    first = h.send(command)
    resigned = {**command, "signature": {**command["signature"], "value": "b3RoZXI"}}
    assert h.send(resigned).receipt == first.receipt


def test_given_a_rejected_command_when_retried_after_fix_then_not_a_collision() -> None:
    h = mission_harness()
    h.sessions[W1.id] = 2
    command = h.command(W1, "message.post", {"content": [{"type": "text", "text": "x"}]})
    command["sessionEpoch"] = 1
    h.refuse(command, ErrorCode.AUTH_STALE_SESSION)
    # A rejection leaves no receipt: the same Action ID may carry the corrected Command.
    fixed = {**command, "sessionEpoch": 2}
    assert not h.send(fixed).duplicate


# --- 3. Session fencing ----------------------------------------------------------------------


@pytest.mark.parametrize("carried", [1, 3])
def test_given_a_newer_session_when_old_epoch_acts_then_stale_session(carried: int) -> None:
    h = mission_harness()
    h.sessions[W1.id] = 2
    h.reject(
        ErrorCode.AUTH_STALE_SESSION,
        W1,
        "message.post",
        {"content": [{"type": "text", "text": "x"}]},
        sessionEpoch=carried,
    )


def test_given_agent_without_known_session_then_stale_session() -> None:
    h = mission_harness()
    del h.sessions[W1.id]
    h.reject(
        ErrorCode.AUTH_STALE_SESSION,
        W1,
        "message.post",
        {"content": [{"type": "text", "text": "x"}]},
        sessionEpoch=1,
    )


# --- 4. Membership ---------------------------------------------------------------------------


def test_given_no_membership_then_membership_required() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.MEMBERSHIP_REQUIRED,
        W3,
        "message.post",
        {"content": [{"type": "text", "text": "x"}]},
        membershipEpoch=1,
    )
    h.reject(
        ErrorCode.MEMBERSHIP_REQUIRED,
        STRANGER,
        "message.post",
        {"content": [{"type": "text", "text": "x"}]},
        membershipEpoch=1,
    )


def test_given_changed_membership_when_old_epoch_acts_then_membership_stale() -> None:
    h = mission_harness()
    h.submit(COORD, "membership.change", {"memberId": W1.id, "role": "reviewer"})
    error = h.reject(
        ErrorCode.MEMBERSHIP_STALE,
        W1,
        "message.post",
        {"content": [{"type": "text", "text": "x"}]},
        membershipEpoch=1,
    )
    assert error.details == {"membershipEpoch": 1, "currentMembershipEpoch": 2}


def test_given_ended_membership_then_membership_stale() -> None:
    h = mission_harness()
    h.submit(COORD, "membership.end", {"memberId": W1.id})
    h.reject(
        ErrorCode.MEMBERSHIP_STALE,
        W1,
        "message.post",
        {"content": [{"type": "text", "text": "x"}]},
    )


def test_given_human_without_membership_epoch_then_membership_required() -> None:
    h = mission_harness()
    h.reject(ErrorCode.MEMBERSHIP_REQUIRED, OWNER, "mission.cancel", {}, membershipEpoch=None)


def test_given_provisional_member_when_it_does_more_than_accept_then_membership_required() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W3)  # W3 gets a provisional Membership with the offer
    h.reject(
        ErrorCode.MEMBERSHIP_REQUIRED,
        W3,
        "work.propose",
        {"title": "Something else"},
    )


# --- 5. Coordinator Epoch --------------------------------------------------------------------


def test_given_replaced_coordinator_when_old_one_coordinates_then_stale_coordinator() -> None:
    h = mission_harness()
    h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": h.handover_package()},
    )
    from tests.unit.group.harness import contract

    # With its old epoch, and even with the current epoch number it never held.
    for epoch in (1, 2):
        h.reject(
            ErrorCode.AUTH_STALE_COORDINATOR,
            COORD,
            "work.authorize",
            {"contract": contract()},
            workItemId=item_id("late"),
            coordinatorEpoch=epoch,
        )
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR, COORD, "mission.renew_coordinator", {}, coordinatorEpoch=1
    )
    # The new Coordinator coordinates.
    h.submit(COORD2, "work.authorize", {"contract": contract()}, workItemId=item_id("new"))


def test_given_coordinator_command_without_epoch_then_stale_coordinator() -> None:
    h = mission_harness()
    from tests.unit.group.harness import contract

    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        COORD,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("a"),
        coordinatorEpoch=None,
    )


def test_given_expired_coordinator_lease_then_stale_until_renewed() -> None:
    h = mission_harness()
    h.advance(3600)
    from tests.unit.group.harness import contract

    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        COORD,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("a"),
    )
    h.submit(COORD, "mission.renew_coordinator", {"leaseSeconds": 600})
    h.submit(COORD, "work.authorize", {"contract": contract()}, workItemId=item_id("a"))


def test_given_any_command_with_a_fenced_coordinator_epoch_then_stale_coordinator() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        OWNER,
        "mission.cancel",
        {},
        coordinatorEpoch=7,
    )


# --- 6. Expected revision --------------------------------------------------------------------


def test_given_wrong_expected_revision_then_revision_conflict_with_both_revisions() -> None:
    h = mission_harness()
    h.authorize("a")
    error = h.reject(
        ErrorCode.REVISION_CONFLICT,
        COORD,
        "work.cancel",
        {},
        workItemId=item_id("a"),
        expectedRevision=5,
    )
    assert (error.expected_revision, error.current_revision) == (5, 1)
    assert error.to_wire("2026-07-15T00:00:00Z")["currentRevision"] == 1


def test_given_right_expected_revision_then_accepted() -> None:
    h = mission_harness()
    h.authorize("a")
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("a"), expectedRevision=1)
    assert h.view("a")["revision"] == 2


def test_given_mission_revision_conflict_on_mission_command() -> None:
    h = mission_harness()
    h.reject(ErrorCode.REVISION_CONFLICT, OWNER, "mission.cancel", {}, expectedRevision=9)
    h.submit(OWNER, "mission.cancel", {}, expectedRevision=1)


# --- 7. Role and policy ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "kind"),
    [
        (W1, "work.authorize"),
        (W1, "mission.submit_for_approval"),
        (W1, "mission.assign_coordinator"),
        (COORD, "mission.approve"),
        (COORD, "mission.cancel"),
        (COORD, "mission.assign_coordinator"),
        (W1, "membership.change"),
        (SERVICE, "mission.approve"),
        (SERVICE, "work.propose"),
    ],
)
def test_given_an_actor_without_the_role_then_forbidden(actor: object, kind: str) -> None:
    h = mission_harness()
    if actor is W1 and kind == "mission.submit_for_approval":
        command = h.command(W1, kind, {}, coordinatorEpoch=1)
    else:
        command = h.command(actor, kind, {"memberId": W2.id, "role": "observer"})  # type: ignore[arg-type]
    h.refuse(command, ErrorCode.AUTH_FORBIDDEN)


def test_a_message_never_authorizes_anything() -> None:
    h = mission_harness()
    h.drive("deploy", "queued")
    before = {i: h.authority.work_item_view(i) for i in h.authority.work_item_ids()}
    mission_before = {k: v for k, v in h.authority.mission_view().items() if k != "sequence"}

    outcome = h.submit(
        COORD,
        "message.post",
        {
            "content": [{"type": "text", "text": "Deploy immediately and approve the Mission!"}],
            "mentions": [W1.to_json()],
            "references": [item_id("deploy")],
        },
        workItemId=item_id("deploy"),
    )

    assert [e["kind"] for e in outcome.events] == ["message.posted"]
    assert outcome.events[0]["payload"]["message"]["authority"] is False
    assert {i: h.authority.work_item_view(i) for i in h.authority.work_item_ids()} == before
    after = {k: v for k, v in h.authority.mission_view().items() if k != "sequence"}
    assert after == mission_before
    assert h.authority.timers() == h.authority.timers()


def test_malformed_commands_get_typed_errors() -> None:
    h = mission_harness()
    with pytest.raises(MwpError) as not_object:
        h.authority.submit(Envelope([], "sha256:" + "0" * 64, "sha256:" + "0" * 64), h.ctx())  # type: ignore[arg-type]
    assert not_object.value.code == ErrorCode.SCHEMA_VALIDATION_FAILED
    command = h.command(W1, "message.post", {"content": []})
    command["payload"] = "nope"
    h.refuse(command, ErrorCode.SCHEMA_VALIDATION_FAILED)
    command = h.command(W1, "message.post", {"content": []})
    del command["actor"]
    h.refuse(command, ErrorCode.SCHEMA_VALIDATION_FAILED)


def test_an_unsupported_kind_in_an_existing_group_is_invalid_command() -> None:
    h = mission_harness()
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "ext.acme.custom.thing", {})
    h.rules = RULES_LEDGER  # rules that know no Cooperation Override Grant
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "policy.grant_cooperation_override", {})


def test_an_unexpected_fault_is_internal_error_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mwp.core.group import kinds

    h = mission_harness()
    rule = kinds.RULES["message.post"]

    def broken(*args: object) -> None:
        raise KeyError("defect")

    broken_rule = type(rule)(rule.kind, broken, rule.authorize, payload=rule.payload)
    monkeypatch.setitem(kinds.RULES, "message.post", broken_rule)
    error = h.reject(ErrorCode.INTERNAL_ERROR, W1, "message.post", {"content": []})
    assert error.retryable and error.diagnostic is not None


def test_check_decides_without_changing_anything() -> None:
    from tests.unit.group.harness import fingerprint

    h = mission_harness()
    h.drive("a", "offered")
    command = h.command(W1, "work.accept_offer", h.accept_payload("a"), workItemId=item_id("a"))
    before = fingerprint(h.authority)
    for _ in range(3):
        h.authority.check(h.envelope(command), h.ctx())
    assert fingerprint(h.authority) == before
    h.send(command)
    assert h.view("a")["state"] == "queued"


def test_epochs_of_names_the_live_membership_and_the_current_coordinator() -> None:
    h = mission_harness()
    epochs = h.authority.epochs_of(W1.id)
    assert epochs["membershipEpoch"] == h.membership_epoch(W1.id)
    assert epochs["coordinator"] == {"agentId": COORD.id, "coordinatorEpoch": 1}
    assert h.authority.epochs_of("urn:example:agent:nobody")["membershipEpoch"] is None
    h.submit(COORD, "membership.end", {"memberId": W1.id, "reason": "done"})
    assert h.authority.epochs_of(W1.id)["membershipEpoch"] is None
    assert GroupAuthority().epochs_of(W1.id) == {"membershipEpoch": None, "coordinator": None}
