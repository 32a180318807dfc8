"""Settled WorkItems (verified, cancelled) leave only a compact record in the Group's state.

The record carries what later decisions read: the outcome, revision, dependencies, budget,
parent link and delivered Artifacts. These tests restore the Authority from its snapshot, so
every decision below is taken from the records alone, and compare with the full-state answers.
"""

from __future__ import annotations

import json

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import WORK_ITEM_VIEW_EXTRAS, GroupAuthority, schema_part
from mwp.core.group.state import GroupState, WorkItem
from mwp.core.models import validate_document
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    W1,
    Harness,
    content_hash,
    contract,
    item_id,
    mission_harness,
)


def _settled_group() -> Harness:
    """``done`` verified (budget 300), ``dropped`` cancelled (budget 500), ``stuck`` failed."""
    h = mission_harness()
    h.verify("done", budget={"modelTokenLimit": 300})
    h.authorize("dropped", budget={"modelTokenLimit": 500})
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("dropped"))
    h.drive("stuck", "failed")
    return h


def _restored(h: Harness) -> GroupAuthority:
    return GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot())))


def test_a_settled_item_leaves_a_record_and_a_failed_one_stays_whole() -> None:
    h = _settled_group()
    state = h.authority.snapshot()["state"]

    assert [w["workItemId"] for w in state["workItems"]] == [item_id("stuck")]
    assert state["workItems"][0]["contract"]  # failed: may be offered again, kept whole
    records = {w["workItemId"]: w for w in state["settledWorkItems"]}
    assert records[item_id("done")] == {
        "workItemId": item_id("done"),
        "state": "verified",
        "revision": h.view("done")["revision"],
        "ownershipEpoch": 1,
        "owner": W1.id,
        "budget": {"modelTokenLimit": 300},
        "artifactHashes": [ARTIFACT_A],
        # Where its result was accepted: a Context Package for a dependant cites it.
        "acceptedSequence": h.view("done")["result"]["acceptedEvent"]["sequence"],
    }
    assert records[item_id("dropped")]["state"] == "cancelled"
    assert "artifactHashes" not in records[item_id("dropped")]
    # The full record stays readable in the run that settled it, schema-valid ...
    validate_document("work-item.schema.json", schema_part(h.view("done"), WORK_ITEM_VIEW_EXTRAS))
    assert h.view("done")["state"] == "verified"
    # ... and after a restore only the record is left (the log and the item's own workflow
    # hold the rest).
    restored = _restored(h)
    with pytest.raises(KeyError):
        restored.work_item_view(item_id("done"))
    assert restored.settled_work_item(item_id("done")) == records[item_id("done")]
    assert restored.settled_work_item(item_id("stuck")) is None
    assert restored.work_item_view(item_id("stuck"))["state"] == "failed"
    assert restored.snapshot() == h.authority.snapshot()


def test_a_settled_item_costs_the_snapshot_a_few_hundred_bytes_not_kilobytes() -> None:
    h = mission_harness()
    h.verify("first")
    before = len(json.dumps(h.authority.snapshot()))
    full = len(json.dumps(h.view("first")))
    for index in range(20):
        h.verify(f"item-{index}")
    per_item = (len(json.dumps(h.authority.snapshot())) - before) / 20

    # Receipts (about 95 bytes per Command, 6 per lifecycle) and the item's Conversation
    # still grow with each item; the item itself is a short record (with the sequence of the
    # Event that accepted it: about 1,510 bytes in all).
    assert full > 3000
    assert per_item < 1600, per_item


def test_decisions_about_settled_items_are_the_same_after_a_restore() -> None:
    h = _settled_group()
    allocated = h.authority.mission_view()["budgetAllocated"]
    h.authority = _restored(h)

    assert h.authority.mission_view()["budgetAllocated"] == allocated
    assert allocated["modelTokenLimit"] == 300 + 1000  # done and stuck; dropped released its own
    listed = {w["workItemId"]: w for w in h.authority.mission_view()["workItems"]}
    assert listed[item_id("done")]["state"] == "verified"
    assert listed[item_id("done")]["owner"] == W1.id
    assert listed[item_id("dropped")]["state"] == "cancelled"
    # No Command moves a settled item; the same answer the full item gave.
    h.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, "work.cancel", workItemId=item_id("done"))
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.accept_result",
        workItemId=item_id("dropped"),
    )
    revision = listed[item_id("done")]["revision"]
    h.reject(
        ErrorCode.REVISION_CONFLICT,
        COORD,
        "work.cancel",
        {},
        workItemId=item_id("done"),
        expectedRevision=revision + 1,
    )
    # Its ID stays taken.
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("done"),
    )
    # The Mission budget still counts the verified item and not the cancelled one:
    # 100_000 - 1_300 is left.
    h.reject(
        ErrorCode.BUDGET_EXCEEDED,
        COORD,
        "work.authorize",
        {"contract": contract(budget={"modelTokenLimit": 98_701})},
        workItemId=item_id("too-big"),
    )
    h.authorize("fits", budget={"modelTokenLimit": 98_700})


def test_dependencies_on_settled_items_are_checked_from_their_records() -> None:
    h = _settled_group()
    h.authority = _restored(h)

    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract(dependencyWorkItemIds=[item_id("never-authorized")])},
        workItemId=item_id("orphan"),
    )
    h.authorize("after-done", dependencyWorkItemIds=[item_id("done")])
    h.authorize("after-dropped", dependencyWorkItemIds=[item_id("dropped")])
    for name in ("after-done", "after-dropped"):
        h.offer(name, W1)
        h.accept(name, W1)
    h.start("after-done", W1)  # its dependency is verified
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        "work.start",
        h.owner_payload("after-dropped", lease=False),
        workItemId=item_id("after-dropped"),
    )
    assert error.details["pendingDependencies"] == [item_id("dropped")]


def test_the_mission_is_submitted_with_artifacts_of_settled_items_only() -> None:
    h = _settled_group()
    h.authority = _restored(h)

    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "mission.submit_for_approval",
        {"artifactHashes": [content_hash("elsewhere")]},
    )
    outcome = h.submit(COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]})
    assert outcome.events[0]["payload"]["verifiedWorkItemIds"] == [item_id("done")]


def test_a_snapshot_holding_settled_items_in_full_restores_them_as_records() -> None:
    h = _settled_group()
    state = h.authority.snapshot()["state"]
    # As a snapshot written before settled records existed: every item in full.
    full = [
        h.authority._retired[item_id(name)].to_json()  # the full records this run still holds
        for name in ("done", "dropped")
    ]
    old = {k: v for k, v in state.items() if k != "settledWorkItems"}
    old["workItems"] = [*full, *state["workItems"]]

    restored = GroupState.from_json(old)

    assert restored.to_json() == state
    assert isinstance(restored.work_items[item_id("stuck")], WorkItem)
