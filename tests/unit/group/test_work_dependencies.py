"""Dependency insertion (spec 10.4, MWP-WRK-007): ``ext.missionweaveprotocol.core.
work_dependency_add`` revises the Work Contract of an item no owner holds; cycles, unknown items
and edges that already exist are refused and change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import replay
from mwp.core.group.work_dependency import WORK_DEPENDENCY_ADD_KIND as ADD
from tests.unit.group.harness import (
    COORD,
    OWNER,
    W1,
    W2,
    Harness,
    item_id,
    mission_harness,
)


def _add(h: Harness, name: str, *dependencies: str, **envelope: Any) -> dict[str, Any]:
    outcome = h.submit(
        COORD,
        ADD,
        {"dependencyWorkItemIds": [item_id(d) for d in dependencies]},
        workItemId=item_id(name),
        **envelope,
    )
    [event] = outcome.events
    return event


def _refused(
    h: Harness, code: ErrorCode, name: str, *dependencies: str, actor: Any = COORD
) -> dict[str, Any]:
    error = h.reject(
        code,
        actor,
        ADD,
        {"dependencyWorkItemIds": [item_id(d) for d in dependencies]},
        workItemId=item_id(name),
    )
    return error.details or {}


def test_given_an_open_item_when_a_dependency_is_added_then_the_contract_is_revised() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b", dependencyWorkItemIds=[item_id("a")])
    h.authorize("c")
    revision = h.view("b")["revision"]

    event = _add(h, "b", "c", expectedRevision=revision)

    assert event["kind"] == "work.contract.revised"
    assert event["workItemId"] == item_id("b")
    assert event["payload"]["previousContractVersion"] == 1
    assert event["payload"]["addedDependencyWorkItemIds"] == [item_id("c")]
    contract = event["payload"]["contract"]
    assert contract["contractVersion"] == 2
    assert contract["dependencyWorkItemIds"] == [item_id("a"), item_id("c")]
    view = h.view("b")
    assert view["state"] == "open" and view["contract"] == contract
    assert view["pendingDependencies"] == [item_id("a"), item_id("c")]
    # The Event log alone rebuilds the same Group.
    rebuilt = replay(h.events)
    assert rebuilt.mission_view() == h.authority.mission_view()
    assert rebuilt.work_item_view(item_id("b")) == view


def test_given_an_offered_item_when_a_dependency_is_added_then_it_waits_for_it() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    h.offer("b", W1)
    stale = h.accept_payload("b", W1)

    _add(h, "b", "a")

    # The offer stands, but its acceptance must name the revised contract.
    h.reject(ErrorCode.INVALID_COMMAND, W1, "work.accept_offer", stale, workItemId=item_id("b"))
    h.accept("b", W1)
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("b"),
    )
    assert error.details and error.details["pendingDependencies"] == [item_id("a")]
    # Once the dependency is verified the item is eligible.
    h.offer("a", W2)
    h.accept("a", W2)
    h.start("a", W2)
    h.submit_work("a", W2)
    h.accept_result("a")
    h.start("b", W1)
    assert h.view("b")["state"] == "active"


def test_a_dependency_on_a_verified_item_is_satisfied_at_once() -> None:
    h = mission_harness()
    h.verify("a")
    h.authorize("b")
    _add(h, "b", "a")
    assert h.view("b")["pendingDependencies"] == []


def test_given_a_chain_when_an_edge_would_close_a_cycle_then_refused_with_the_cycle() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b", dependencyWorkItemIds=[item_id("a")])
    h.authorize("c", dependencyWorkItemIds=[item_id("b")])

    details = _refused(h, ErrorCode.INVALID_COMMAND, "a", "c")
    assert details["cycle"] == [item_id("a"), item_id("c"), item_id("b"), item_id("a")]
    details = _refused(h, ErrorCode.INVALID_COMMAND, "a", "a")
    assert details["cycle"] == [item_id("a"), item_id("a")]
    # The other direction is no cycle.
    _add(h, "c", "a")


def test_unknown_dependencies_are_refused() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    details = _refused(h, ErrorCode.INVALID_COMMAND, "a", "b", "ghost")
    assert details["missingWorkItemIds"] == [item_id("ghost")]
    # An unknown dependent item is refused too.
    details = _refused(h, ErrorCode.INVALID_COMMAND, "ghost", "a")
    assert details["workItemId"] == item_id("ghost")


def test_adding_an_existing_edge_changes_nothing_and_says_so() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    h.authorize("c", dependencyWorkItemIds=[item_id("a")])

    details = _refused(h, ErrorCode.INVALID_COMMAND, "c", "a")
    assert details["reason"] == "dependencies_present"
    assert h.view("c")["contract"]["contractVersion"] == 1
    # Of several named edges only the new ones are added.
    event = _add(h, "c", "a", "b")
    assert event["payload"]["addedDependencyWorkItemIds"] == [item_id("b")]
    assert event["payload"]["contract"]["dependencyWorkItemIds"] == [item_id("a"), item_id("b")]
    details = _refused(h, ErrorCode.INVALID_COMMAND, "c", "b", "a")
    assert details["reason"] == "dependencies_present"


def test_a_byte_equal_retry_gets_the_original_receipt() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    command = h.command(
        COORD, ADD, {"dependencyWorkItemIds": [item_id("a")]}, workItemId=item_id("b")
    )
    first = h.send(command)
    again = h.send(command)
    assert again.duplicate and again.receipt == first.receipt and not again.events


@pytest.mark.parametrize("actor", [OWNER, W1])
def test_only_the_coordinator_adds_dependencies(actor: Any) -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    _refused(h, ErrorCode.AUTH_FORBIDDEN, "b", "a", actor=actor)


def test_a_replaced_coordinator_is_stale() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    epoch = h.coordinator_epoch()
    assert epoch is not None
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        COORD,
        ADD,
        {"dependencyWorkItemIds": [item_id("a")]},
        workItemId=item_id("b"),
        coordinatorEpoch=epoch + 1,
    )


@pytest.mark.parametrize(
    "state", ["queued", "active", "blocked", "submitted", "verified", "cancelled"]
)
def test_an_item_an_owner_holds_or_that_is_settled_takes_no_new_dependency(state: str) -> None:
    h = mission_harness()
    h.authorize("a")
    h.drive("x", state)
    _refused(h, ErrorCode.INVALID_STATE_TRANSITION, "x", "a")


@pytest.mark.parametrize("state", ["open", "offered", "failed"])
def test_an_item_no_owner_holds_takes_a_new_dependency(state: str) -> None:
    h = mission_harness()
    h.authorize("a")
    h.drive("x", state)
    _add(h, "x", "a")
    assert h.view("x")["state"] == state


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"dependencyWorkItemIds": []},
        {"dependencyWorkItemIds": "urn:example:work-item:a"},
        {"dependencyWorkItemIds": [item_id("a"), item_id("a")]},
        {"dependencyWorkItemIds": [f"urn:example:work-item:{n}" for n in range(101)]},
        {"dependencyWorkItemIds": [item_id("a")], "contract": {}},
    ],
    ids=["missing", "empty", "not-a-list", "duplicates", "too-many", "unknown-member"],
)
def test_malformed_payloads_are_refused(payload: dict[str, Any]) -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    h.reject(ErrorCode.INVALID_COMMAND, COORD, ADD, payload, workItemId=item_id("b"))


def test_a_mission_not_active_takes_no_new_dependency() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    h.submit(OWNER, "mission.cancel", {"reason": "stop"})
    _refused(h, ErrorCode.INVALID_STATE_TRANSITION, "b", "a")
