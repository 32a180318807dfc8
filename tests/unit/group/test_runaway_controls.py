"""Runaway controls (spec 20, MWP-EXT-006/007): each cooperation limit's soft threshold
notifies the Coordinator, its binding limit refuses with ``RATE_LIMITED`` and changes nothing,
and older rules decide as before."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.api import RULES_LEDGER
from mwp.core.group.cooperation_limits import CooperationLimits, Limit
from mwp.core.group.ids import message_id
from mwp.core.group.resource_usage import RECORD_KIND as USAGE_RECORD
from mwp.core.group.resource_usage import RECORDED_KIND as USAGE_RECORDED
from mwp.core.group.runaway import THRESHOLD_KIND
from tests.unit.group.harness import (
    COORD,
    GROUP,
    W1,
    W2,
    Harness,
    contract,
    item_id,
    mission_harness,
)

TEXT = {"content": [{"type": "text", "text": "Status."}]}


def limited(**limits: Limit) -> Harness:
    h = mission_harness()
    h.cooperation_limits = replace(CooperationLimits(), **limits)
    return h


def kinds(events: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]


def notice(outcome: Any) -> dict[str, Any]:
    first = outcome.events[0]
    assert first["kind"] == THRESHOLD_KIND
    return dict(first["payload"])


# --- Message rate ---------------------------------------------------------------------------------


def test_the_message_rate_notifies_at_its_soft_threshold_and_binds_past_its_limit() -> None:
    h = limited(message_rate=Limit(2, 3))
    assert kinds(h.submit(W1, "message.post", TEXT).events) == ["message.posted"]
    second = h.submit(W1, "message.post", TEXT)
    assert kinds(second.events) == [THRESHOLD_KIND, "message.posted"]
    assert notice(second) == {
        "policyName": "messageRate",
        "observed": 2,
        "softThreshold": 2,
        "limit": 3,
        "commandKind": "message.post",
        "actionId": second.receipt.action_id,
        "coordinatorAgentId": COORD.id,
    }
    # The Message keeps the ID derived from its own Event's sequence, after the notice.
    posted = second.events[-1]
    assert posted["payload"]["message"]["messageId"] == message_id(GROUP, posted["sequence"])
    # The receipt names both Events; its revision is the Message's Conversation's.
    assert second.receipt.event_ids == tuple(e["eventId"] for e in second.events)
    assert second.receipt.aggregate_revision == second.events[-1]["aggregateRevision"]
    assert kinds(h.submit(W1, "message.post", TEXT).events) == [THRESHOLD_KIND, "message.posted"]
    error = h.reject(ErrorCode.RATE_LIMITED, W1, "message.post", TEXT)
    assert error.details == {"policy": "messageRate", "limit": 3, "observed": 4}


def test_the_message_rate_is_per_actor_and_per_window() -> None:
    h = limited(message_rate=Limit(1, 1))
    assert kinds(h.submit(W1, "message.post", TEXT).events) == [THRESHOLD_KIND, "message.posted"]
    h.reject(ErrorCode.RATE_LIMITED, W1, "message.post", TEXT)
    h.submit(W2, "message.post", TEXT)  # another actor counts on its own
    h.advance(60)  # the next rate window of the Authority's clock
    h.submit(W1, "message.post", TEXT)
    h.reject(ErrorCode.RATE_LIMITED, W1, "message.post", TEXT)


def test_rate_counters_survive_snapshot_restore_and_replay() -> None:
    h = limited(message_rate=Limit(2, 2))
    h.submit(W1, "message.post", TEXT)
    h.submit(W1, "message.post", TEXT)
    h.authority = GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot())))
    h.reject(ErrorCode.RATE_LIMITED, W1, "message.post", TEXT)
    rebuilt = replay(h.events)
    assert rebuilt.snapshot()["state"]["rates"] == h.authority.snapshot()["state"]["rates"]
    h.authority = rebuilt
    h.reject(ErrorCode.RATE_LIMITED, W1, "message.post", TEXT)


# --- Work Proposals -------------------------------------------------------------------------------


def test_the_proposal_rate_notifies_then_binds() -> None:
    h = limited(proposal_rate=Limit(2, 2))
    assert kinds(h.submit(W1, "work.propose", {"title": "One"}).events) == ["work.proposed"]
    second = h.submit(W1, "work.propose", {"title": "Two"})
    assert notice(second)["policyName"] == "proposalRate"
    error = h.reject(ErrorCode.RATE_LIMITED, W1, "work.propose", {"title": "Three"})
    assert error.details == {"policy": "proposalRate", "limit": 2, "observed": 3}


def test_open_proposals_bind_until_the_coordinator_decides_one() -> None:
    """An actor's unresolved rounds: proposals still awaiting the Coordinator's decision."""
    h = limited(open_proposals=Limit(2, 2))
    first = h.submit(W1, "work.propose", {"title": "One"}).events[0]["payload"]["proposal"]
    assert notice(h.submit(W1, "work.propose", {"title": "Two"}))["policyName"] == "openProposals"
    h.advance(60)  # not a rate: a new window changes nothing
    error = h.reject(ErrorCode.RATE_LIMITED, W1, "work.propose", {"title": "Three"})
    assert error.details == {"policy": "openProposals", "limit": 2, "observed": 3}
    h.submit(W2, "work.propose", {"title": "Another's"})  # counted per actor
    h.submit(
        COORD,
        "work.authorize",
        {"contract": contract(), "proposalId": first["proposalId"]},
        workItemId=item_id("decided"),
    )
    h.submit(W1, "work.propose", {"title": "Three"})


# --- active and queued WorkItems ------------------------------------------------------------------


def test_active_and_queued_work_binds_and_accepted_work_is_kept() -> None:
    h = limited(active_work=Limit(2, 2))
    h.drive("a", "active")
    h.authorize("b")
    h.offer("b", W1)
    accepted = h.accept("b")
    assert notice(accepted) | {"actionId": None} == {
        "policyName": "activeWork",
        "observed": 2,
        "softThreshold": 2,
        "limit": 2,
        "commandKind": "work.accept_offer",
        "actionId": None,
        "coordinatorAgentId": COORD.id,
        "workItemId": item_id("b"),
    }
    h.authorize("c")
    h.offer("c", W2)
    error = h.refuse(
        h.command(W2, "work.accept_offer", h.accept_payload("c", W2), workItemId=item_id("c")),
        ErrorCode.RATE_LIMITED,
    )
    assert error.details == {"policy": "activeWork", "limit": 2, "observed": 3}
    # Nothing accepted was discarded: a and b keep their owners, c its pending offer.
    assert (h.view("a")["state"], h.view("b")["state"], h.view("c")["state"]) == (
        "active",
        "queued",
        "offered",
    )


# --- decomposition: depth, duplicates, circles ----------------------------------------------------


def test_work_item_depth_notifies_then_binds() -> None:
    h = limited(work_item_depth=Limit(2, 2))
    assert kinds(h.authorize("root").events) == ["work.authorized"]
    linked = _authorize(h, "linked", "root", goal="Write the parser.")
    assert notice(linked)["policyName"] == "workItemDepth"
    assert notice(linked)["observed"] == 2
    error = h.refuse(_command(h, "deep", "linked", goal="Write the lexer."), ErrorCode.RATE_LIMITED)
    assert error.details == {"policy": "workItemDepth", "limit": 2, "observed": 3}


def test_duplicate_decomposition_among_live_siblings_binds() -> None:
    h = limited(duplicate_work=Limit(2, 2))
    assert kinds(h.authorize("a").events) == ["work.authorized"]
    assert notice(h.authorize("b"))["policyName"] == "duplicateWork"
    error = h.reject(
        ErrorCode.RATE_LIMITED,
        COORD,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("c"),
    )
    assert error.details == {"policy": "duplicateWork", "limit": 2, "observed": 3}
    assert kinds(h.authorize("d", goal="Another goal.").events) == ["work.authorized"]


def test_circular_decomposition_repeating_an_ancestors_goal_binds() -> None:
    h = limited(duplicate_work=Limit(2, 2))
    h.authorize("root", goal="Ship it.")
    assert notice(_authorize(h, "again", "root", goal="Ship it."))["observed"] == 2
    error = h.refuse(
        _command(h, "again-and-again", "again", goal="Ship it."), ErrorCode.RATE_LIMITED
    )
    assert error.details == {"policy": "duplicateWork", "limit": 2, "observed": 3}


def _command(h: Harness, name: str, parent: str, **overrides: Any) -> dict[str, Any]:
    return h.command(
        COORD,
        "work.authorize",
        {"contract": contract(**overrides), "parentWorkItemId": item_id(parent)},
        workItemId=item_id(name),
    )


def _authorize(h: Harness, name: str, parent: str, **overrides: Any) -> Any:
    return h.send(_command(h, name, parent, **overrides))


# --- budgets --------------------------------------------------------------------------------------


def test_a_budget_share_notifies_and_the_ledger_binds() -> None:
    h = mission_harness()
    h.cooperation_limits = replace(CooperationLimits(), budget_soft_percent=80)
    h.drive("a", "active")  # its contract allows 1000 model tokens

    def record(tokens: int) -> Any:
        payload = h.owner_payload("a", delta={"modelTokenLimit": tokens})
        return h.command(W1, USAGE_RECORD, payload, workItemId=item_id("a"))

    assert kinds(h.send(record(799)).events) == [USAGE_RECORDED]
    reached = h.send(record(1))
    assert kinds(reached.events) == [THRESHOLD_KIND, USAGE_RECORDED]
    assert notice(reached) | {"actionId": None} == {
        "policyName": "budget",
        "observed": 80,
        "softThreshold": 80,
        "limit": 100,
        "commandKind": USAGE_RECORD,
        "actionId": None,
        "coordinatorAgentId": COORD.id,
        "workItemId": item_id("a"),
    }
    h.refuse(record(201), ErrorCode.BUDGET_EXCEEDED)  # the ledger binds, no grant lifts it
    assert notice(h.send(record(200)))["observed"] == 100
    # Off by default: the same records notify nothing.
    h.cooperation_limits = CooperationLimits()
    h.drive("b", "active")
    assert kinds(h.send(record_for(h, "b", 1000)).events) == [USAGE_RECORDED]


def record_for(h: Harness, name: str, tokens: int) -> dict[str, Any]:
    payload = h.owner_payload(name, delta={"modelTokenLimit": tokens})
    return h.command(W1, USAGE_RECORD, payload, workItemId=item_id(name))


# --- older rules ----------------------------------------------------------------------------------


def test_older_rules_neither_notify_nor_bind() -> None:
    h = limited(message_rate=Limit(1, 1), duplicate_work=Limit(1, 1))
    h.rules = RULES_LEDGER
    for _ in range(3):
        (posted,) = h.submit(W1, "message.post", TEXT).events
        assert posted["payload"]["message"]["messageId"] == message_id(GROUP, posted["sequence"])
    assert kinds(h.authorize("a").events) == ["work.authorized"]
    assert kinds(h.authorize("b").events) == ["work.authorized"]


def test_limits_need_a_soft_threshold_within_the_binding_limit() -> None:
    for soft, binding in ((0, 1), (3, 2)):
        with pytest.raises(ValueError):
            Limit(soft, binding)
    for percent in (0, 101):
        with pytest.raises(ValueError):
            CooperationLimits(budget_soft_percent=percent)


# --- the defaults ---------------------------------------------------------------------------------


def test_by_default_rates_and_work_are_unlimited_and_only_runaway_decomposition_is() -> None:
    """An Organization that sets nothing keeps a busy Group busy: no rate, open proposal or
    active-work limit; decomposition is limited far beyond a planned graph."""
    h = mission_harness()
    assert h.cooperation_limits == CooperationLimits()
    for _ in range(300):  # one actor, one rate window
        assert kinds(h.submit(COORD, "message.post", TEXT).events) == ["message.posted"]
    defaults = CooperationLimits()
    assert None is defaults.message_rate is defaults.proposal_rate is defaults.active_work
    assert defaults.open_proposals is None
    assert (defaults.work_item_depth, defaults.duplicate_work) == (Limit(8, 16), Limit(10, 20))
    off = CooperationLimits.from_json({"workItemDepth": None, "messageRate": None})
    assert off.work_item_depth is None and off.duplicate_work == Limit(10, 20)
    assert CooperationLimits.from_json(off.to_json()) == off
