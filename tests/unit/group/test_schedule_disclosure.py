"""Schedule disclosure in the Group (spec 11.2, MWP-WRK-012): an estimate on acceptance and on
material change while the item waits; malformed or unauthorized disclosures change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import replay
from mwp.core.group.schedule import SCHEDULE_DISCLOSE_KIND, SCHEDULE_DISCLOSED_KIND
from tests.unit.group.harness import W1, W2, item_id, mission_harness

ESTIMATE: dict[str, Any] = {
    "estimatedStart": "2026-07-15T01:00:00Z",
    "estimatedCompletion": "2026-07-15T02:00:00Z",
    "confidence": 0.8,
    "capacityStatus": "queued",
    "lastCalculatedAt": "2026-07-15T00:00:00Z",
}


def test_an_estimate_disclosed_on_acceptance_is_the_items_schedule_estimate() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    payload = h.accept_payload("a") | {"scheduleEstimate": ESTIMATE}
    outcome = h.submit(W1, "work.accept_offer", payload, workItemId=item_id("a"))
    accepted = next(e for e in outcome.events if e["kind"] == "work.offer.accepted")
    assert accepted["payload"]["scheduleEstimate"] == ESTIMATE
    assert h.view("a")["scheduleEstimate"] == ESTIMATE


def test_an_acceptance_without_an_estimate_discloses_none() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    assert "scheduleEstimate" not in h.view("a")


def test_a_material_change_while_waiting_is_disclosed_by_the_owner() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    later = ESTIMATE | {"estimatedStart": "2026-07-15T03:00:00Z", "capacityStatus": "constrained"}
    payload = {"ownershipEpoch": h.epoch("a"), "scheduleEstimate": later}
    outcome = h.submit(W1, SCHEDULE_DISCLOSE_KIND, payload, workItemId=item_id("a"))
    [event] = outcome.events
    assert event["kind"] == SCHEDULE_DISCLOSED_KIND
    assert event["payload"] == {"ownershipEpoch": 1, "scheduleEstimate": later}
    view = h.view("a")
    assert view["scheduleEstimate"] == later and view["state"] == "queued"  # advisory only
    assert replay(h.events).work_item_view(item_id("a"))["scheduleEstimate"] == later


@pytest.mark.parametrize(
    "estimate",
    [
        "soon",
        {k: v for k, v in ESTIMATE.items() if k != "confidence"},
        ESTIMATE | {"confidence": 1.5},
        ESTIMATE | {"confidence": True},
        ESTIMATE | {"capacityStatus": "busy"},
        ESTIMATE | {"estimatedStart": "tomorrow"},
        ESTIMATE | {"queuePosition": 3},  # nothing beyond the five members
    ],
)
def test_a_malformed_estimate_is_invalid_and_changes_nothing(estimate: Any) -> None:
    h = mission_harness()
    h.drive("a", "queued")
    payload = {"ownershipEpoch": h.epoch("a"), "scheduleEstimate": estimate}
    h.reject(
        ErrorCode.INVALID_COMMAND, W1, SCHEDULE_DISCLOSE_KIND, payload, workItemId=item_id("a")
    )
    h.authorize("b")
    h.offer("b", W1)
    accept = h.accept_payload("b") | {"scheduleEstimate": estimate}
    h.reject(ErrorCode.INVALID_COMMAND, W1, "work.accept_offer", accept, workItemId=item_id("b"))


def test_only_the_current_owner_of_waiting_work_may_disclose() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    payload = {"ownershipEpoch": 1, "scheduleEstimate": ESTIMATE}
    h.reject(ErrorCode.AUTH_FORBIDDEN, W2, SCHEDULE_DISCLOSE_KIND, payload, workItemId=item_id("a"))
    stale = {"ownershipEpoch": 2, "scheduleEstimate": ESTIMATE}
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP, W1, SCHEDULE_DISCLOSE_KIND, stale, workItemId=item_id("a")
    )
    h.drive("b", "active")
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        SCHEDULE_DISCLOSE_KIND,
        {"ownershipEpoch": 1, "scheduleEstimate": ESTIMATE},
        workItemId=item_id("b"),
    )
