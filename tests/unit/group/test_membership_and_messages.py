"""Memberships (spec 8) and Conversations/Messages (spec 9)."""

from __future__ import annotations

from mwp.core.errors import ErrorCode
from mwp.core.group.ids import work_item_conversation_id
from mwp.core.models import validate_document
from tests.unit.group.harness import (
    COORD,
    COORD2,
    GROUP,
    OWNER,
    SERVICE,
    W1,
    W2,
    W3,
    Harness,
    item_id,
    mission_harness,
)

TEXT = {"content": [{"type": "text", "text": "A thought."}]}


def _membership(h: Harness, member_id: str) -> dict[str, object]:
    return next(
        m for m in h.authority.mission_view()["memberships"] if m["member"]["id"] == member_id
    )


# --- membership.change -----------------------------------------------------------------------


def test_given_a_new_member_when_admitted_then_active_epoch_one() -> None:
    h = mission_harness()
    outcome = h.submit(COORD, "membership.change", {"memberId": W3.id, "role": "reviewer"})
    doc = outcome.events[0]["payload"]["membership"]
    validate_document("membership.schema.json", doc)
    assert (doc["role"], doc["state"], doc["membershipEpoch"]) == ("reviewer", "active", 1)
    assert doc["visibilityStartSequence"] == outcome.events[0]["sequence"]


def test_given_a_member_when_role_or_scopes_change_then_epoch_increases() -> None:
    h = mission_harness()
    h.submit(OWNER, "membership.change", {"memberId": W1.id, "role": "reviewer"})
    assert _membership(h, W1.id)["membershipEpoch"] == 2
    h.submit(
        SERVICE,
        "membership.change",
        {"memberId": W1.id, "role": "reviewer", "scopes": ["work.review", "mission.observe"]},
    )
    assert _membership(h, W1.id)["membershipEpoch"] == 3


def test_membership_change_refusals() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "membership.change", {"memberId": W1.id, "role": "worker"}
    )  # no change
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "membership.change",
        {"memberId": OWNER.id, "memberType": "human", "role": "observer"},
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        "membership.change",
        {"memberId": COORD.id, "role": "worker"},
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "membership.change",
        {"memberId": W3.id, "role": "mission_owner"},
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "membership.change",
        {"memberId": W3.id, "role": "worker", "scopes": ["Bad Scope"]},
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "membership.change",
        {"memberId": W1.id, "memberType": "human", "role": "observer"},
    )
    h.reject(
        ErrorCode.REVISION_CONFLICT,
        COORD,
        "membership.change",
        {"memberId": W1.id, "role": "observer"},
        expectedRevision=7,
    )
    h.submit(
        COORD, "membership.change", {"memberId": W1.id, "role": "observer"}, expectedRevision=1
    )


# --- membership.end --------------------------------------------------------------------------


def test_given_a_member_when_it_leaves_then_ended_and_fenced() -> None:
    h = mission_harness()
    outcome = h.submit(W2, "membership.end", {"memberId": W2.id, "reason": "Done here."})
    doc = outcome.events[0]["payload"]["membership"]
    validate_document("membership.schema.json", doc)
    assert doc["state"] == "ended" and "endedAt" in doc
    h.reject(ErrorCode.MEMBERSHIP_STALE, W2, "message.post", TEXT)
    h.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, "membership.end", {"memberId": W2.id})


def test_given_an_owner_when_its_membership_ends_then_its_items_are_fenced() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.drive("b", "offered")
    outcome = h.submit(COORD, "membership.end", {"memberId": W1.id})
    assert outcome.events[0]["payload"]["fencedWorkItemIds"] == [item_id("a")]
    assert h.view("a")["ownerFencedReason"] == "membership_ended"
    assert h.view("b")["offers"][0]["status"] == "withdrawn"
    # The item is re-offerable at once.
    h.offer("a", W2)
    assert h.view("a")["state"] == "offered"


def test_membership_end_refusals() -> None:
    h = mission_harness()
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "membership.end", {"memberId": OWNER.id})
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "membership.end", {"memberId": COORD.id})
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "membership.end", {"memberId": W3.id})
    h.reject(ErrorCode.AUTH_FORBIDDEN, W1, "membership.end", {"memberId": W2.id})


def test_ending_a_membership_is_allowed_after_the_mission_closed() -> None:
    h = mission_harness()
    h.submit(OWNER, "mission.cancel", {})
    h.submit(OWNER, "membership.end", {"memberId": W1.id})
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        OWNER,
        "membership.change",
        {"memberId": W3.id, "role": "observer"},
    )


def test_an_ended_member_readmitted_gets_a_higher_epoch() -> None:
    h = mission_harness()
    h.submit(COORD, "membership.end", {"memberId": W1.id})
    h.admit(W1)
    assert _membership(h, W1.id)["membershipEpoch"] == 2
    h.submit(W1, "message.post", TEXT)


def test_a_replaced_coordinator_who_leaves_is_not_stale() -> None:
    h = mission_harness()
    h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": h.handover_package()},
    )
    h.submit(COORD, "membership.end", {"memberId": COORD.id}, coordinatorEpoch=None)
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        COORD2,
        "membership.end",
        {"memberId": W1.id},
        coordinatorEpoch=1,
    )


# --- Messages --------------------------------------------------------------------------------


def test_given_a_member_when_it_posts_then_committed_message_without_authority() -> None:
    h = mission_harness()
    outcome = h.submit(
        W1,
        "message.post",
        {
            "content": [
                {"type": "text", "text": "Found it."},
                {"type": "artifact_ref", "artifactHash": "sha256:" + "c" * 64},
            ],
            "mentions": [COORD.to_json()],
        },
    )
    event = outcome.events[0]
    message = event["payload"]["message"]
    validate_document("message.schema.json", message)
    assert message["authority"] is False and message["kind"] == "message"
    assert event["conversationId"] == message["conversationId"]
    assert outcome.receipt.aggregate_revision == 1  # the Conversation's revision


def test_posting_to_a_work_item_conversation_and_unknown_conversations() -> None:
    h = mission_harness()
    h.authorize("a")
    conversation = work_item_conversation_id(GROUP, item_id("a"))
    outcome = h.submit(W1, "message.post", TEXT, conversationId=conversation)
    assert outcome.events[0]["payload"]["message"]["conversationId"] == conversation
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "message.post",
        TEXT,
        conversationId="urn:example:conversation:nowhere",
    )
    h.reject(ErrorCode.INVALID_COMMAND, W1, "message.post", {"content": []})
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "message.post",
        {"content": [{"type": "video", "bytes": "..."}]},
    )


def test_a_provisional_worker_talks_only_in_its_offered_items_conversation() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W3)
    conversation = work_item_conversation_id(GROUP, item_id("a"))
    h.submit(W3, "message.post", TEXT, conversationId=conversation)
    h.reject(ErrorCode.AUTH_FORBIDDEN, W3, "message.post", TEXT)


def test_given_a_message_when_its_author_corrects_then_retracts_it() -> None:
    h = mission_harness()
    posted = h.submit(W1, "message.post", TEXT).events[0]["payload"]["message"]

    corrected = h.submit(
        W1,
        "message.correct",
        {
            "targetMessageId": posted["messageId"],
            "content": [{"type": "text", "text": "A better thought."}],
            "reason": "Typo.",
        },
    ).events[0]
    retracted = h.submit(
        W1, "message.retract", {"targetMessageId": posted["messageId"], "reason": "Wrong."}
    ).events[0]

    for event, kind in ((corrected, "correction"), (retracted, "retraction")):
        message = event["payload"]["message"]
        validate_document("message.schema.json", message)
        assert message["kind"] == kind and message["targetMessageId"] == posted["messageId"]
    assert corrected["kind"] == "message.corrected" and retracted["kind"] == "message.retracted"
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        "message.correct",
        {"targetMessageId": posted["messageId"], "content": TEXT["content"], "reason": "Again."},
    )


def test_only_the_author_corrects_or_retracts() -> None:
    h = mission_harness()
    posted = h.submit(W1, "message.post", TEXT).events[0]["payload"]["message"]
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        W2,
        "message.retract",
        {"targetMessageId": posted["messageId"], "reason": "Not mine."},
    )
    h.reject(
        ErrorCode.INVALID_COMMAND, W1, "message.retract", {"targetMessageId": posted["messageId"]}
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "message.retract",
        {"targetMessageId": "urn:example:message:unknown", "reason": "?"},
    )
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        SERVICE,
        "message.correct",
        {"targetMessageId": posted["messageId"], "content": TEXT["content"], "reason": "x"},
    )


def test_given_a_message_when_policy_redacts_it_then_a_tombstone_with_reason() -> None:
    h = mission_harness()
    posted = h.submit(W1, "message.post", TEXT).events[0]["payload"]["message"]
    h.submit(W1, "message.retract", {"targetMessageId": posted["messageId"], "reason": "Oops."})

    redacted = h.submit(
        SERVICE,
        "message.redact",
        {
            "targetMessageId": posted["messageId"],
            "reason": "Contained a credential.",
            "policy": "secrets-policy",
        },
    ).events[0]["payload"]["message"]

    validate_document("message.schema.json", redacted)
    assert redacted["kind"] == "redaction" and "secrets-policy" in redacted["reason"]
    assert "A thought." not in str(redacted)
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        OWNER,
        "message.redact",
        {"targetMessageId": posted["messageId"], "reason": "Again.", "policy": "p"},
    )


def test_redaction_needs_a_policy_reason_and_authority() -> None:
    h = mission_harness()
    posted = h.submit(W2, "message.post", TEXT).events[0]["payload"]["message"]
    target = {"targetMessageId": posted["messageId"]}
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "message.redact", {**target, "policy": "p"})
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "message.redact", {**target, "reason": "r"})
    h.reject(
        ErrorCode.AUTH_FORBIDDEN, W1, "message.redact", {**target, "reason": "r", "policy": "p"}
    )
    h.submit(COORD, "message.redact", {**target, "reason": "r", "policy": "p"})


def test_messages_are_allowed_after_the_mission_closed() -> None:
    h = mission_harness()
    h.submit(OWNER, "mission.cancel", {})
    h.submit(OWNER, "message.post", TEXT)


def test_a_message_older_than_the_window_can_no_longer_be_amended() -> None:
    from mwp.core.group import GroupAuthority

    h = Harness(GroupAuthority(message_window=3))
    h.create_mission()
    h.admit(W1)
    first = h.submit(W1, "message.post", TEXT).events[0]["payload"]["message"]
    for _ in range(3):
        h.submit(W1, "message.post", TEXT)
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "message.retract",
        {"targetMessageId": first["messageId"], "reason": "Too late."},
    )


def test_message_commands_compare_expected_revision_with_their_conversation() -> None:
    h = mission_harness()
    posted = h.submit(W1, "message.post", TEXT, expectedRevision=0).events[0]
    assert posted["aggregateRevision"] == 1
    h.reject(ErrorCode.REVISION_CONFLICT, W1, "message.post", TEXT, expectedRevision=0)
    target = {"targetMessageId": posted["payload"]["message"]["messageId"], "reason": "x"}
    h.reject(ErrorCode.REVISION_CONFLICT, W1, "message.retract", target, expectedRevision=0)
    h.submit(W1, "message.retract", target, expectedRevision=1)
