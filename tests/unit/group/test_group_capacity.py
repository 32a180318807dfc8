"""A Group at capacity (its shell can carry no more state) takes no new WorkItems, with a typed
error and no change; everything else, including retries of accepted Commands, goes on."""

from __future__ import annotations

from mwp.core.errors import ErrorCode
from tests.unit.group.harness import COORD, W1, contract, fingerprint, item_id, mission_harness


def test_at_capacity_new_work_items_are_refused_and_nothing_changes() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    h.at_capacity = True
    before = fingerprint(h.authority)
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("b"),
    )
    assert error.details["reason"] == "group_capacity"
    assert fingerprint(h.authority) == before


def test_at_capacity_work_already_in_the_group_goes_on() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    h.at_capacity = True
    h.start("a", W1)  # existing items still start, finish and are verified
    h.submit_work("a", W1)
    h.accept_result("a")
    assert h.view("a")["state"] == "verified"


def test_at_capacity_a_retry_of_an_accepted_authorization_returns_its_receipt() -> None:
    h = mission_harness()
    command = h.command(COORD, "work.authorize", {"contract": contract()}, workItemId=item_id("b"))
    first = h.send(command)
    h.at_capacity = True
    again = h.send(command)
    assert again.duplicate and again.receipt == first.receipt


def test_below_capacity_the_same_authorization_is_accepted() -> None:
    h = mission_harness()
    h.at_capacity = False
    h.authorize("b")
    assert h.view("b")["state"] == "open"
