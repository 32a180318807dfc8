"""The budget ledger of consumption (spec 12, MWP-AUT-004, MWP-AUT-005):
``resource_usage_record`` charges the WorkItem, its parent WorkItems and the Mission in one
Event, or refuses the whole Command and changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.allocation import DIMENSIONS
from mwp.core.group.api import RULES_CONTEXT
from mwp.core.group.clock import plus_seconds
from mwp.core.group.resource_usage import RECORD_KIND, RECORDED_KIND, ResourceUsage
from tests.unit.group.harness import (
    COORD,
    DELEGATE,
    W1,
    W2,
    Harness,
    contract,
    fingerprint,
    full_budget,
    grant_payload,
    item_id,
    selection_basis,
)

# Room in every dimension at the Mission, so the WorkItem's own budget binds first.
MISSION_BUDGET = full_budget(
    financialLimit=100,
    modelTokenLimit=100_000,
    toolCallLimit=100,
    computeSecondsLimit=1000,
    wallClockSecondsLimit=10_000,
    externalSideEffectLimit=10,
)
ITEM_BUDGET = full_budget(externalSideEffectLimit=2)  # 10 USD, 1000, 10, 60, 600, 2
ONE = {  # one unit of each dimension
    "financialLimit": 1,
    "modelTokenLimit": 1,
    "toolCallLimit": 1,
    "computeSecondsLimit": 1,
    "wallClockSecondsLimit": 1,
    "externalSideEffectLimit": 1,
}


def harness(mission_budget: dict[str, Any] | None = None) -> Harness:
    h = Harness()
    h.create_mission(budget=mission_budget or MISSION_BUDGET)
    h.admit(W1)
    h.admit(W2)
    return h


def run(h: Harness, name: str, worker: Any = W1, **budget: Any) -> None:
    """Authorize ``name`` with ``budget`` (default ITEM_BUDGET) and start it as ``worker``."""
    h.authorize(name, budget=budget or ITEM_BUDGET)
    h.offer(name, worker)
    h.accept(name, worker)
    h.start(name, worker)


def with_currency(delta: dict[str, Any]) -> dict[str, Any]:
    return {**delta, "currency": "USD"} if "financialLimit" in delta else dict(delta)


def record(h: Harness, name: str, delta: dict[str, Any], worker: Any = W1, **payload: Any) -> Any:
    body = h.owner_payload(name, delta=with_currency(delta), **payload)
    return h.submit(worker, RECORD_KIND, body, workItemId=item_id(name))


def refuse(
    h: Harness, code: ErrorCode, name: str, delta: dict[str, Any], worker: Any = W1, **body: Any
) -> Any:
    payload = {**h.owner_payload(name), "delta": delta, **body}
    return h.reject(code, worker, RECORD_KIND, payload, workItemId=item_id(name))


# --- recording -----------------------------------------------------------------------------------


def test_given_an_active_item_when_its_owner_records_usage_then_one_event_charges_it() -> None:
    h = harness()
    run(h, "a")
    lease = h.lease_id("a")

    outcome = record(h, "a", {"modelTokenLimit": 120, "toolCallLimit": 2})

    (event,) = outcome.events
    assert event["kind"] == RECORDED_KIND
    assert event["workItemId"] == item_id("a")
    payload = event["payload"]
    assert payload["delta"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    assert (payload["ownershipEpoch"], payload["leaseId"]) == (1, lease)
    assert payload["cumulative"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    assert payload["remaining"] == {
        "currency": "USD",
        "financialLimit": 10,
        "modelTokenLimit": 880,
        "toolCallLimit": 8,
        "computeSecondsLimit": 60,
        "wallClockSecondsLimit": 600,
        "externalSideEffectLimit": 2,
    }
    assert payload["ancestry"] == []
    assert payload["mission"]["cumulative"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    assert payload["mission"]["remaining"]["modelTokenLimit"] == 99_880
    assert h.view("a")["resourceUsage"]["cumulative"] == payload["cumulative"]
    view = h.authority.mission_view()
    assert view["budgetUsed"] == payload["mission"]["cumulative"]
    assert view["budgetRemaining"] == payload["mission"]["remaining"]


def test_cumulative_usage_adds_up_as_decimals_over_every_dimension() -> None:
    h = harness()
    run(h, "a")
    record(h, "a", {"financialLimit": 0.1, "computeSecondsLimit": 5})
    record(h, "a", {"financialLimit": 0.2, "wallClockSecondsLimit": 30})

    outcome = record(h, "a", {**ONE, "financialLimit": 0.3})

    payload = outcome.events[0]["payload"]
    assert payload["cumulative"] == {
        "currency": "USD",
        "financialLimit": 0.6,  # 0.1 + 0.2 + 0.3 exactly, not 0.6000000000000001
        "modelTokenLimit": 1,
        "toolCallLimit": 1,
        "computeSecondsLimit": 6,
        "wallClockSecondsLimit": 31,
        "externalSideEffectLimit": 1,
    }
    assert payload["remaining"]["financialLimit"] == 9.4
    assert payload["remaining"]["externalSideEffectLimit"] == 1


def test_what_remains_is_capped_by_the_mission_where_the_contract_is_silent() -> None:
    h = harness()
    run(h, "a", modelTokenLimit=10)
    outcome = record(h, "a", {"toolCallLimit": 1})
    assert outcome.events[0]["payload"]["remaining"] == {
        "currency": "USD",
        "financialLimit": 100,
        "modelTokenLimit": 10,
        "toolCallLimit": 99,
        "computeSecondsLimit": 1000,
        "wallClockSecondsLimit": 10_000,
        "externalSideEffectLimit": 10,
    }


def test_recording_exactly_the_whole_budget_is_accepted() -> None:
    h = harness()
    run(h, "a")
    outcome = record(h, "a", {d: ITEM_BUDGET[d] for d in DIMENSIONS})
    assert all(v == 0 for k, v in outcome.events[0]["payload"]["remaining"].items() if k in ONE)


def test_a_retried_record_returns_its_receipt_and_charges_once() -> None:
    h = harness()
    run(h, "a")
    command = h.command(
        W1,
        RECORD_KIND,
        h.owner_payload("a", delta={"toolCallLimit": 3}),
        workItemId=item_id("a"),
    )
    first = h.send(command)
    again = h.send(command)
    assert again.duplicate and again.receipt == first.receipt
    assert h.view("a")["resourceUsage"]["cumulative"] == {"toolCallLimit": 3}


def test_the_typed_usage_builds_the_delta_under_the_budget_names() -> None:
    usage = ResourceUsage(financial=0.25, currency="USD", model_tokens=40, tool_calls=1)
    assert usage.delta() == {
        "financialLimit": 0.25,
        "currency": "USD",
        "modelTokenLimit": 40,
        "toolCallLimit": 1,
    }
    h = harness()
    run(h, "a")
    outcome = h.submit(
        W1, RECORD_KIND, h.owner_payload("a", delta=usage.delta()), workItemId=item_id("a")
    )
    assert outcome.events[0]["payload"]["cumulative"]["financialLimit"] == 0.25


# --- BUDGET_EXCEEDED, nothing changed ------------------------------------------------------------


@pytest.mark.parametrize("dimension", DIMENSIONS)
def test_one_dimension_over_the_work_item_budget_refuses_the_whole_record(dimension: str) -> None:
    h = harness()
    run(h, "a")
    record(h, "a", ONE)
    over = {**ONE, dimension: ITEM_BUDGET[dimension]}  # one more than is left in it

    error = refuse(h, ErrorCode.BUDGET_EXCEEDED, "a", with_currency(over))

    assert error.details is not None
    assert error.details["dimension"] == dimension
    assert error.details["workItemId"] == item_id("a")
    assert (error.details["used"], error.details["requested"]) == ("1", str(ITEM_BUDGET[dimension]))
    assert h.view("a")["resourceUsage"]["cumulative"] == with_currency(ONE)


@pytest.mark.parametrize("dimension", DIMENSIONS)
def test_one_dimension_over_the_mission_limit_refuses_the_whole_record(dimension: str) -> None:
    # The item's contract is silent on ``dimension`` (unbounded there); the Mission is not.
    silent = "toolCallLimit" if dimension == "modelTokenLimit" else "modelTokenLimit"
    h = harness(full_budget(**{dimension: 5 if dimension != "financialLimit" else 0.5}))
    run(h, "a", **{silent: 10})
    record(h, "a", with_currency({dimension: 0.5 if dimension == "financialLimit" else 5}))
    before = h.authority.mission_view()["budgetUsed"]

    error = refuse(h, ErrorCode.BUDGET_EXCEEDED, "a", with_currency({silent: 1, dimension: 1}))

    assert error.details is not None
    assert error.details["dimension"] == dimension
    assert error.details["missionId"] == h.authority.mission_id
    assert h.authority.mission_view()["budgetUsed"] == before


# --- the ancestry --------------------------------------------------------------------------------


def delegated_child(h: Harness) -> None:
    """``b`` active (owner W1) with a delegated child ``b1`` active (owner W2)."""
    run(h, "b")
    h.admit(DELEGATE, "work_delegate")
    granted = h.submit(COORD, "membership.grant_delegation", grant_payload("b")).events[0]
    grant_id = granted["payload"]["grant"]["grantId"]
    h.submit(
        DELEGATE,
        "work.authorize",
        {
            "contract": contract(budget=full_budget()),
            "parentWorkItemId": item_id("b"),
            "delegationGrantId": grant_id,
        },
        workItemId=item_id("b1"),
    )
    h.submit(
        DELEGATE,
        "work.offer",
        {
            "candidates": [{"agentId": W2.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
            "delegationGrantId": grant_id,
        },
        workItemId=item_id("b1"),
    )
    h.accept("b1", W2)
    h.start("b1", W2)


def test_a_child_work_item_charges_its_parent_and_the_mission_in_one_event() -> None:
    h = harness()
    delegated_child(h)
    record(h, "b", {"modelTokenLimit": 600})

    outcome = record(h, "b1", {"modelTokenLimit": 300, "toolCallLimit": 1}, W2)

    (event,) = outcome.events
    payload = event["payload"]
    assert payload["cumulative"] == {"modelTokenLimit": 300, "toolCallLimit": 1}
    (parent,) = payload["ancestry"]
    assert parent["workItemId"] == item_id("b")
    assert parent["cumulative"] == {"modelTokenLimit": 900, "toolCallLimit": 1}
    assert parent["remaining"]["modelTokenLimit"] == 100
    # What the child may still spend is capped by its parent: 100 tokens, not its own 700.
    assert payload["remaining"]["modelTokenLimit"] == 100
    assert payload["mission"]["cumulative"] == {"modelTokenLimit": 900, "toolCallLimit": 1}
    assert h.view("b")["resourceUsage"]["cumulative"] == parent["cumulative"]
    assert h.view("b1")["resourceUsage"]["remaining"]["modelTokenLimit"] == 100


def test_a_child_over_its_parents_budget_refuses_the_whole_record() -> None:
    h = harness()
    delegated_child(h)
    record(h, "b", {"modelTokenLimit": 600})
    before = fingerprint(h.authority)

    error = refuse(h, ErrorCode.BUDGET_EXCEEDED, "b1", {"modelTokenLimit": 401}, W2)

    assert error.details is not None
    assert error.details["workItemId"] == item_id("b")  # the child alone had room
    assert fingerprint(h.authority) == before
    assert "resourceUsage" not in h.view("b1")


# --- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "delta",
    [
        {},
        {"modelTokenLimit": 0},
        {"modelTokenLimit": 0, "toolCallLimit": 0, "financialLimit": 0, "currency": "USD"},
    ],
)
def test_a_zero_delta_is_refused(delta: dict[str, Any]) -> None:
    h = harness()
    run(h, "a")
    refuse(h, ErrorCode.INVALID_COMMAND, "a", delta)


@pytest.mark.parametrize(
    "delta",
    [
        {"modelTokenLimit": -1},
        {"modelTokenLimit": 1.5},
        {"toolCallLimit": True},
        {"financialLimit": -0.5, "currency": "USD"},
        {"financialLimit": "1", "currency": "USD"},
        {"financialLimit": 1},  # no currency
        {"financialLimit": 1, "currency": "EUR"},  # not the budget's currency
        {"modelTokenLimit": 1, "currency": "USD"},  # a currency without a financial amount
        {"modelTokenLimit": 1, "tokens": 1},  # not a dimension
    ],
)
def test_a_malformed_delta_is_refused(delta: dict[str, Any]) -> None:
    h = harness()
    run(h, "a")
    refuse(h, ErrorCode.INVALID_COMMAND, "a", delta)


def test_only_the_current_owner_under_its_epoch_and_lease_may_record() -> None:
    h = harness()
    run(h, "a")
    delta = {"toolCallLimit": 1}
    refuse(h, ErrorCode.AUTH_FORBIDDEN, "a", delta, W2)  # a worker of the Group, not the owner
    refuse(h, ErrorCode.AUTH_FORBIDDEN, "a", delta, COORD)  # nor the Coordinator
    refuse(h, ErrorCode.WORK_STALE_OWNERSHIP, "a", delta, ownershipEpoch=2)
    refuse(h, ErrorCode.WORK_LEASE_EXPIRED, "a", delta, leaseId="urn:example:lease:other")
    h.advance(301)  # past the Execution Lease
    refuse(h, ErrorCode.WORK_LEASE_EXPIRED, "a", delta)


def test_a_fenced_owner_may_not_record() -> None:
    h = harness()
    run(h, "a")
    payload = {**h.owner_payload("a"), "delta": {"toolCallLimit": 1}}
    lease = h.lease_id("a")
    h.advance(300)
    assert h.fire(item_id("a"), "execution_lease", lease) is not None  # the owner is fenced
    h.reject(ErrorCode.WORK_STALE_OWNERSHIP, W1, RECORD_KIND, payload, workItemId=item_id("a"))


def test_an_item_that_is_not_active_records_nothing() -> None:
    h = harness()
    h.drive("q", "queued")
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        RECORD_KIND,
        {"ownershipEpoch": 1, "leaseId": "urn:example:lease:none", "delta": {"toolCallLimit": 1}},
        workItemId=item_id("q"),
    )


def test_under_the_context_package_rules_the_kind_is_refused_as_before() -> None:
    h = harness()
    h.rules = RULES_CONTEXT
    run(h, "a")
    error = refuse(h, ErrorCode.INVALID_COMMAND, "a", {"toolCallLimit": 1})
    assert "not a Command this Authority accepts" in error.message


# --- snapshot, restore, replay -------------------------------------------------------------------


def _without_receipts(snapshot: dict[str, Any]) -> dict[str, Any]:
    state = dict(snapshot["state"])
    state.pop("receipts")
    return state


def test_usage_survives_snapshot_restore_and_replay() -> None:
    h = harness()
    delegated_child(h)
    record(h, "b", {"financialLimit": 0.1, "modelTokenLimit": 10})
    record(h, "b1", {"financialLimit": 0.2, "toolCallLimit": 2}, W2)
    live = h.authority.snapshot()

    restored = GroupAuthority.restore(json.loads(json.dumps(live)))
    rebuilt = replay(json.loads(json.dumps(h.events)))

    assert restored.snapshot() == live
    assert _without_receipts(rebuilt.snapshot()) == _without_receipts(live)
    for other in (restored, rebuilt):
        assert other.mission_view() == h.authority.mission_view()
        for name in ("b", "b1"):
            assert other.work_item_view(item_id(name)) == h.view(name)
    # The restored ledger keeps charging from where it was.
    h.authority = restored
    outcome = record(h, "b1", {"financialLimit": 0.3, "currency": "USD"}, W2)
    assert outcome.events[0]["payload"]["ancestry"][0]["cumulative"]["financialLimit"] == 0.6


def test_a_child_mission_gets_no_more_than_its_parent_item_has_left() -> None:
    from tests.unit.group.test_child_missions import child_payload

    h = harness()
    run(h, "a")  # 1,000 model tokens
    record(h, "a", {"modelTokenLimit": 700})
    error = h.reject(
        ErrorCode.BUDGET_EXCEEDED,
        COORD,
        "mission.create_child",
        child_payload(budget={"modelTokenLimit": 301}),
        workItemId=item_id("a"),
    )
    assert error.details["dimension"] == "modelTokenLimit"
    assert error.details["remaining"] == "300"
    h.submit(
        COORD,
        "mission.create_child",
        child_payload(budget={"modelTokenLimit": 300}),
        workItemId=item_id("a"),
    )
