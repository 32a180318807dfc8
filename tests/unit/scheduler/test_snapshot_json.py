"""A Group queue's snapshot as JSON: serialisable, and equal for queues built from the same
Events whatever the redelivery (the Cursor ignores duplicates at or before it)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from mwp.core.scheduler import GroupQueue
from mwp.core.scheduler.group_queue import SCHEDULED_KINDS, snapshot_json
from tests.unit.scheduler.builders import GroupLog, contract

Json = dict[str, Any]


def _history() -> list[Json]:
    """Offers, acceptances, starts, checkpoints (own and another owner's), a failure, a
    verification and a dependency: every part of the snapshot is populated."""
    log = GroupLog("g1")
    log.authorized("dep", contract())
    log.authorized("a", contract(urgency="high", budget={"toolCallLimit": 5, "currency": "USD"}))
    log.authorized("b", contract(deps=("dep",), approval="human_required"))
    log.authorized("c", contract())
    log.authorized("theirs", contract())
    log.offered("a")
    log.accepted("a", when=1)
    log.offered("b", when=2)
    log.accepted("b", when=2)
    log.offered("c", ("agent-a", "agent-b"), when=3)
    log.offered("theirs", ("agent-b",), when=4)
    log.accepted("theirs", agent="agent-b", when=4)
    log.started("theirs", when=5)
    log.progressed("theirs", "sha256:" + "9" * 64, when=6)
    log.started("a", when=7)
    log.progressed("a", "urn:example:checkpoint:a", when=8)
    log.checkpointed("a", "urn:example:checkpoint:a2", when=9)
    log.granted("b", when=10)
    log.result_accepted("dep", when=11)
    log.failed("theirs", when=12)
    return log.events


def _build(events: list[Json]) -> GroupQueue:
    queue = GroupQueue("g1", "agent-a")
    for event in events:
        queue.apply(event)
    return queue


def _redelivered(events: list[Json], seed: int) -> list[Json]:
    """The same Events in order, each followed by random redeliveries of earlier ones."""
    rng = random.Random(seed)
    out: list[Json] = []
    for i, event in enumerate(events):
        out.append(event)
        out.extend(rng.choice(events[: i + 1]) for _ in range(rng.randint(0, 3)))
    return out


def test_scheduled_kinds_are_exactly_the_kinds_a_queue_handles() -> None:
    queue = GroupQueue("g1", "agent-a")
    assert set(queue._handlers) == SCHEDULED_KINDS
    assert "work.progressed" in SCHEDULED_KINDS and "work.checkpointed" in SCHEDULED_KINDS


def test_an_event_kind_outside_the_scheduled_kinds_only_moves_the_cursor() -> None:
    log = GroupLog("g1")
    events = _history()
    queue = _build(events)
    before = snapshot_json(queue)
    other = log.add("message.posted", "a", {"message": {}})
    other["sequence"] = len(events) + 1
    assert other["kind"] not in SCHEDULED_KINDS

    assert queue.apply(other) is None

    after = snapshot_json(queue)
    assert after["cursor"] == before["cursor"] + 1
    assert {**after, "cursor": before["cursor"]} == before


def test_snapshot_json_is_json_and_survives_a_round_trip() -> None:
    snap = snapshot_json(_build(_history()))

    text = json.dumps(snap, sort_keys=True)

    assert json.loads(text) == snap
    assert snap["checkpoints"] == {
        "a": "urn:example:checkpoint:a2",
        "theirs": "sha256:" + "9" * 64,
    }
    assert set(snap["entries"]) == {"a", "b", "c"}
    phase, terms = snap["entries"]["a"][:2]
    assert phase == "queued" and terms["urgency"] == "HIGH"
    assert terms["budget"] == {"toolCallLimit": 5.0}  # the currency is not a limit
    assert "urn:example:checkpoint:a2" in snap["entries"]["a"]
    assert snap["ready"] == ["a", "b"]


@pytest.mark.parametrize("seed", range(5))
def test_redelivery_in_any_order_gives_an_equal_snapshot(seed: int) -> None:
    events = _history()
    in_order = snapshot_json(_build(events))

    redelivered = snapshot_json(_build(_redelivered(events, seed)))

    assert json.dumps(redelivered, sort_keys=True) == json.dumps(in_order, sort_keys=True)


def test_a_missing_event_gives_a_different_snapshot() -> None:
    events = _history()
    without = [e for e in events if e["kind"] != "work.progressed" or e["workItemId"] != "theirs"]

    assert snapshot_json(_build(without)) != snapshot_json(_build(events))
