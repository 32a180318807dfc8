"""mission.create and mission.create_follow_up: the Group comes into existence (spec 7.1)."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import (
    MISSION_VIEW_EXTRAS,
    WORK_ITEM_VIEW_EXTRAS,
    GroupAuthority,
    schema_part,
)
from mwp.core.group.ids import main_conversation_id
from mwp.core.models import validate_document
from tests.unit.group.harness import (
    COORD,
    GROUP,
    MISSION,
    OWNER,
    W1,
    Harness,
    item_id,
    mission_harness,
)


def test_given_no_group_when_owner_creates_mission_then_group_owner_and_coordinator_exist() -> None:
    h = Harness()

    outcome = h.create_mission()

    assert [e["kind"] for e in outcome.events] == [
        "mission.created",
        "membership.changed",
        "membership.changed",
    ]
    assert [e["sequence"] for e in outcome.events] == [1, 2, 3]
    assert h.authority.group_id == GROUP and h.authority.mission_id == MISSION
    assert h.authority.sequence == 3
    view = h.authority.mission_view()
    assert view["state"] == "active" and view["revision"] == 1
    assert view["missionOwner"] == OWNER.to_json()
    assert view["coordinator"]["agentId"] == COORD.id
    assert view["coordinator"]["coordinatorEpoch"] == 1
    assert view["mainConversationId"] == main_conversation_id(GROUP)
    roles = {m["member"]["id"]: (m["role"], m["state"]) for m in view["memberships"]}
    assert roles == {OWNER.id: ("mission_owner", "active"), COORD.id: ("coordinator", "active")}
    validate_document("mission.schema.json", schema_part(view, MISSION_VIEW_EXTRAS))
    for membership in view["memberships"]:
        validate_document("membership.schema.json", membership)
    validate_document("lease.schema.json", view["coordinatorLease"])
    conversation = outcome.events[0]["payload"]["mainConversation"]
    validate_document("conversation.schema.json", conversation)
    assert outcome.receipt.first_sequence == 1 and outcome.receipt.last_sequence == 3
    assert outcome.receipt.event_ids == tuple(e["eventId"] for e in outcome.events)
    assert h.authority.search_attributes() == {
        "MissionId": MISSION,
        "GroupId": GROUP,
        "MissionState": "active",
    }


def test_given_an_empty_authority_then_its_identity_is_blank() -> None:
    authority = GroupAuthority()
    assert (authority.group_id, authority.mission_id, authority.sequence) == ("", "", 0)
    assert authority.mission_view() == {} and authority.timers() == []


@pytest.mark.parametrize(
    "kind", ["message.post", "work.authorize", "mission.approve", "ext.acme.custom.thing"]
)
def test_given_no_group_when_any_other_kind_arrives_then_group_not_found(kind: str) -> None:
    h = Harness()
    h.reject(ErrorCode.GROUP_NOT_FOUND, COORD, kind, {}, membershipEpoch=1)


def test_given_a_group_when_mission_create_again_then_invalid_state_transition() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        OWNER,
        "mission.create",
        {"missionId": MISSION},
        membershipEpoch=None,
    )


def test_given_a_create_when_retried_byte_equal_then_original_receipt() -> None:
    h = Harness()
    command = h.command(OWNER, "mission.create", _create_payload())
    first = h.send(command)

    again = h.send(command)

    assert again.duplicate and again.events == ()
    assert again.receipt == first.receipt
    assert h.authority.sequence == 3


def _create_payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "missionId": MISSION,
        "objective": "Ship it.",
        "definitionOfDone": [
            {"criterionId": "done", "description": "Done.", "evidenceRequired": ["human_review"]}
        ],
        "budget": {"modelTokenLimit": 10},
        "deadline": "2026-08-01T00:00:00Z",
        "coordinatorAgentId": COORD.id,
    }
    payload.update(overrides)
    return payload


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"deadline": "2026-07-14T00:00:00Z"}, "deadline"),
        ({"objective": ""}, "objective"),
        ({"definitionOfDone": []}, "definitionOfDone"),
        ({"budget": {}}, "budget"),
        ({"approvalPolicy": {"finalHumanApproval": False, "highRiskExecutionApproval": True}}, ""),
        ({"coordinatorAgentId": "not a uri"}, "coordinatorAgentId"),
        ({"coordinatorAgentId": OWNER.id}, "Coordinator"),
        ({"groupId": "urn:example:group:other"}, "groupId"),
        ({"missionId": None}, "missionId"),
    ],
)
def test_given_bad_create_payload_then_invalid_command(
    overrides: dict[str, Any], reason: str
) -> None:
    h = Harness()
    payload = {k: v for k, v in _create_payload(**overrides).items() if v is not None}
    error = h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.create", payload)
    assert reason in error.message


def test_given_coordinator_without_session_when_create_then_invalid_command() -> None:
    h = Harness()
    del h.sessions[COORD.id]
    error = h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.create", _create_payload())
    assert "Session" in error.message


def test_given_an_agent_when_it_creates_a_mission_then_forbidden() -> None:
    h = Harness()
    command = h.command(W1, "mission.create", _create_payload(), membershipEpoch=None)
    h.refuse(command, ErrorCode.AUTH_FORBIDDEN)


def test_given_approved_mission_when_same_owner_creates_follow_up_then_linked_group() -> None:
    h = Harness()
    h.approved_missions["urn:example:mission:earlier"] = OWNER.id

    outcome = h.submit(
        OWNER,
        "mission.create_follow_up",
        _create_payload(followUpToMissionId="urn:example:mission:earlier"),
    )

    assert outcome.events[0]["kind"] == "mission.follow_up.created"
    view = h.authority.mission_view()
    assert view["followUpToMissionId"] == "urn:example:mission:earlier"
    validate_document("mission.schema.json", schema_part(view, MISSION_VIEW_EXTRAS))


def test_given_unapproved_link_when_follow_up_then_invalid_command() -> None:
    h = Harness()
    payload = _create_payload(followUpToMissionId="urn:example:mission:earlier")
    h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.create_follow_up", payload)


def test_given_someone_elses_mission_when_follow_up_then_forbidden() -> None:
    h = Harness()
    h.approved_missions["urn:example:mission:earlier"] = "urn:example:human:other"
    payload = _create_payload(followUpToMissionId="urn:example:mission:earlier")
    h.reject(ErrorCode.AUTH_FORBIDDEN, OWNER, "mission.create_follow_up", payload)


def test_work_item_view_is_schema_shaped_in_every_state() -> None:
    h = mission_harness()
    for index, state in enumerate(
        ["open", "offered", "queued", "active", "blocked", "submitted", "verified", "failed"]
    ):
        name = f"s{index}"
        h.drive(name, state)
        view = h.view(name)
        assert view["state"] == state
        validate_document("work-item.schema.json", schema_part(view, WORK_ITEM_VIEW_EXTRAS))
        attributes = h.authority.work_item_search_attributes(item_id(name))
        assert attributes["WorkItemState"] == state
        assert attributes["Capability"] == "acme.software.python@2.1.0"
        owned = state in ("queued", "active", "blocked", "submitted", "verified")
        assert attributes["Owner"] == (W1.id if owned else "")
    assert len(h.authority.work_item_ids()) == 8
