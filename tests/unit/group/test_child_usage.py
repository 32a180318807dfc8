"""A child Mission's usage charged to its parent Group too (spec 12, 14; child_usage.py): the
child decides, the parent charges its WorkItem and ancestry or refuses, then the child applies;
one overflow anywhere changes nothing in either Group."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.allocation import DIMENSIONS
from mwp.core.group.api import RULES_OVERSIGHT, ChildUsage, Outcome
from mwp.core.group.resource_usage import RECORD_KIND, RECORDED_KIND
from mwp.core.models import validate_document
from tests.unit.group.harness import (
    COORD,
    COORD2,
    W1,
    Harness,
    assert_valid_event,
    contract,
    fingerprint,
    item_id,
    selection_basis,
)
from tests.unit.group.test_child_missions import CHILD_GROUP, CHILD_MISSION, child_payload
from tests.unit.group.test_resource_usage import ITEM_BUDGET, MISSION_BUDGET, with_currency

# The ledger tests' budgets: room at the Mission, the parent item's (10 USD, 1000, 10, 60,
# 600, 2) binds first.
PARENT_ITEM_BUDGET = ITEM_BUDGET
CHILD_ITEM = "child-work"


def child_budget(unlimited: str = "toolCallLimit") -> dict[str, Any]:
    """A child budget that limits one dimension only, never ``unlimited``: the child alone
    would accept any amount of every other dimension."""
    return {"modelTokenLimit": 400} if unlimited != "modelTokenLimit" else {"toolCallLimit": 10}


def _state(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's Group state without its receipts (replay rebuilds no receipts)."""
    return {k: v for k, v in snapshot["state"].items() if k != "receipts"}


class Family:
    """A parent Group whose item "a" (PARENT_ITEM_BUDGET) waits for a child Mission, and the
    child Group with its item CHILD_ITEM active under W1."""

    def __init__(self, budget: dict[str, Any] | None = None) -> None:
        self.parent = Harness()
        p = self.parent
        p.create_mission(budget=MISSION_BUDGET)
        p.admit(W1)
        p.authorize("a", budget=PARENT_ITEM_BUDGET)
        p.offer("a", W1)
        p.accept("a", W1)
        p.start("a", W1)
        (link,) = p.submit(
            COORD,
            "mission.create_child",
            child_payload(budget=budget or child_budget()),
            workItemId=item_id("a"),
        ).events
        self.child = Harness(GroupAuthority(), group_id=CHILD_GROUP)
        c = self.child
        c.now = p.now
        founded = c.authority.found_child(link, c.ctx())
        assert founded is not None
        self.founding = list(founded.events)
        c.submit(COORD2, "membership.change", {"memberId": W1.id, "role": "worker"})
        c.submit(
            COORD2,
            "work.authorize",
            {"contract": contract(budget={"modelTokenLimit": 400})}
            if "modelTokenLimit" in (budget or child_budget())
            else {"contract": contract(budget={"toolCallLimit": 10})},
            workItemId=item_id(CHILD_ITEM),
        )
        c.submit(
            COORD2,
            "work.offer",
            {
                "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
                "expiresAt": "2026-07-15T01:00:00Z",
            },
            workItemId=item_id(CHILD_ITEM),
        )
        c.accept(CHILD_ITEM)
        c.start(CHILD_ITEM)

    def usage_command(self, delta: dict[str, Any]) -> dict[str, Any]:
        c = self.child
        payload = c.owner_payload(CHILD_ITEM, delta=with_currency(delta))
        return c.command(W1, RECORD_KIND, payload, workItemId=item_id(CHILD_ITEM))

    def record(self, delta: dict[str, Any]) -> tuple[dict[str, Any], Outcome]:
        """The three steps as the shells take them: the parent's Event and the child's."""
        command = self.usage_command(delta)
        envelope = self.child.envelope(command)
        usage = self.child.authority.upward_charge(envelope, self.child.ctx())
        assert usage is not None
        charged = self.parent.authority.charge_child(usage, self.parent.ctx())
        assert charged.outcome is not None
        (parent_event,) = charged.outcome.events
        assert_valid_event(parent_event)
        self.parent.events.extend(charged.outcome.events)
        answer = charged.answer(self.parent.authority.mission_id)
        context = replace(self.child.ctx(), parent_charge=answer)
        outcome = self.child.authority.submit(envelope, context)
        for event in outcome.events:
            assert_valid_event(event)
        self.child.events.extend(outcome.events)
        return parent_event, outcome


def test_given_a_child_item_records_usage_then_the_parent_item_and_mission_are_charged() -> None:
    f = Family()
    parent_event, child_outcome = f.record({"modelTokenLimit": 120, "toolCallLimit": 2})

    assert parent_event["kind"] == RECORDED_KIND
    assert parent_event["workItemId"] == item_id("a")
    payload = parent_event["payload"]
    assert payload["delta"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    assert payload["childMission"]["missionId"] == CHILD_MISSION
    assert payload["childMission"]["groupId"] == CHILD_GROUP
    assert payload["childMission"]["workItemId"] == item_id(CHILD_ITEM)
    assert "ownershipEpoch" not in payload  # no owner of the parent Group spent it
    assert payload["remaining"]["toolCallLimit"] == 8
    assert payload["mission"]["cumulative"] == {"modelTokenLimit": 120, "toolCallLimit": 2}
    assert f.parent.view("a")["resourceUsage"]["cumulative"] == payload["cumulative"]
    (child_event,) = child_outcome.events
    assert child_event["payload"]["delta"] == payload["delta"]
    # The parent's record replays to the same state, the last charge included.
    live = f.parent.authority.snapshot()
    assert _state(replay(f.parent.events).snapshot())["childCharges"] == {
        CHILD_MISSION: {
            "chargeId": payload["childMission"]["chargeId"],
            "eventId": parent_event["eventId"],
            "sequence": parent_event["sequence"],
            "remaining": payload["remaining"],
        }
    }
    assert _state(replay(f.parent.events).snapshot()) == _state(live)
    assert GroupAuthority.restore(live).snapshot() == live


def test_the_child_event_cites_the_parent_charge_and_what_it_leaves_caps_the_child() -> None:
    f = Family()  # the child limits 400 model tokens and no tool calls; the parent item 10

    _, outcome = f.record({"toolCallLimit": 6, "modelTokenLimit": 100})

    (event,) = outcome.events
    cited = event["payload"]["parentCharge"]
    assert cited["missionId"] == f.parent.authority.mission_id
    assert cited["eventId"] == f.parent.events[-1]["eventId"]
    assert cited["remaining"]["toolCallLimit"] == 4
    assert event["payload"]["remaining"]["toolCallLimit"] == 4  # the parent's cap
    assert event["payload"]["remaining"]["modelTokenLimit"] == 300  # the child's own
    view = f.child.view(CHILD_ITEM)
    assert view["resourceUsage"]["remaining"]["toolCallLimit"] == 4
    # The cap survives restore and replay of the child Group.
    live = f.child.authority.snapshot()
    assert GroupAuthority.restore(live).snapshot() == live
    assert _state(replay(f.founding + f.child.events).snapshot()) == _state(live)


def test_usage_adds_up_across_groups_and_what_the_parent_item_has_left_binds_the_child() -> None:
    f = Family()
    f.record({"toolCallLimit": 6})
    before_parent, before_child = fingerprint(f.parent.authority), fingerprint(f.child.authority)
    command = f.usage_command({"toolCallLimit": 5})  # the child limits no tool calls
    usage = f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx())
    assert usage is not None

    with pytest.raises(MwpError) as refused:
        f.parent.authority.charge_child(usage, f.parent.ctx())

    assert refused.value.code == ErrorCode.BUDGET_EXCEEDED
    assert (refused.value.details or {})["dimension"] == "toolCallLimit"
    assert (refused.value.details or {})["workItemId"] == item_id("a")
    assert fingerprint(f.parent.authority) == before_parent
    assert fingerprint(f.child.authority) == before_child


@pytest.mark.parametrize("dimension", DIMENSIONS)
def test_one_dimension_over_the_parent_item_refuses_in_both_groups(dimension: str) -> None:
    f = Family(child_budget(unlimited=dimension))
    before_parent, before_child = fingerprint(f.parent.authority), fingerprint(f.child.authority)
    over = PARENT_ITEM_BUDGET[dimension] + 1
    command = f.usage_command({dimension: over})
    f.child.authority.check(f.child.envelope(command), f.child.ctx())  # the child alone: fine
    usage = f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx())
    assert usage is not None

    with pytest.raises(MwpError) as refused:
        f.parent.authority.charge_child(usage, f.parent.ctx())

    assert refused.value.code == ErrorCode.BUDGET_EXCEEDED
    assert (refused.value.details or {})["dimension"] == dimension
    validate_document("error.schema.json", refused.value.to_wire(f.parent.now))
    assert fingerprint(f.parent.authority) == before_parent
    assert fingerprint(f.child.authority) == before_child


def test_a_retried_charge_finds_the_event_recorded_before() -> None:
    f = Family()
    command = f.usage_command({"modelTokenLimit": 10})
    usage = f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx())
    assert usage is not None
    first = f.parent.authority.charge_child(usage, f.parent.ctx())
    sequence = f.parent.authority.sequence

    again = f.parent.authority.charge_child(usage, f.parent.ctx())

    assert again.duplicate and again.outcome is None
    assert (again.event_id, again.sequence) == (first.event_id, first.sequence)
    assert f.parent.authority.sequence == sequence
    assert f.parent.authority.relayed_charge(usage, f.parent.ctx()) is None


def test_a_retried_child_command_asks_its_parent_for_nothing() -> None:
    f = Family()
    command = f.usage_command({"modelTokenLimit": 10})
    usage = f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx())
    assert usage is not None
    f.parent.authority.charge_child(usage, f.parent.ctx())
    f.child.send(command)

    assert f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx()) is None


def test_charges_of_different_commands_are_told_apart() -> None:
    f = Family()
    f.record({"modelTokenLimit": 10})
    f.record({"modelTokenLimit": 10})

    assert f.parent.view("a")["resourceUsage"]["cumulative"] == {"modelTokenLimit": 20}


def test_a_charge_for_a_child_no_item_waits_for_is_refused() -> None:
    f = Family()
    command = f.usage_command({"modelTokenLimit": 10})
    usage = f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx())
    assert usage is not None
    p = f.parent
    p.submit(COORD, "work.cancel", {"reason": "Replanned."}, workItemId=item_id("a"))
    before = fingerprint(p.authority)
    stranger = ChildUsage("urn:example:mission:stranger", usage.charge_id, usage.delta, "x")

    for report in (usage, stranger):
        with pytest.raises(MwpError) as refused:
            p.authority.charge_child(report, p.ctx())
        assert refused.value.code == ErrorCode.INVALID_STATE_TRANSITION

    assert fingerprint(p.authority) == before


def test_before_the_child_usage_rules_a_child_charges_its_own_group_only() -> None:
    f = Family()
    f.child.rules = RULES_OVERSIGHT
    command = f.usage_command({"modelTokenLimit": 10})

    assert f.child.authority.upward_charge(f.child.envelope(command), f.child.ctx()) is None
    f.parent.rules = RULES_OVERSIGHT
    usage = ChildUsage(CHILD_MISSION, "urn:uuid:1", {"modelTokenLimit": 10}, "x")
    with pytest.raises(MwpError) as refused:
        f.parent.authority.charge_child(usage, f.parent.ctx())
    assert refused.value.code == ErrorCode.INVALID_COMMAND


def test_a_root_mission_asks_no_one() -> None:
    f = Family()
    p = f.parent
    p.authorize("b")
    p.offer("b", W1)
    p.accept("b", W1)
    p.start("b", W1)
    command = p.command(
        W1,
        RECORD_KIND,
        p.owner_payload("b", delta={"modelTokenLimit": 1}),
        workItemId=item_id("b"),
    )

    assert p.authority.upward_charge(p.envelope(command), p.ctx()) is None
    child = f.child.authority
    usage = child.upward_charge(
        f.child.envelope(f.usage_command({"modelTokenLimit": 1})), f.child.ctx()
    )
    assert usage is not None
    assert p.authority.relayed_charge(usage, p.ctx()) is None  # the root has no parent


def test_a_grandchild_charge_is_relayed_to_the_root() -> None:
    f = Family({"modelTokenLimit": 400})
    c = f.child
    # The child's item is promoted in turn: a grandchild Mission under it.
    (link,) = c.submit(
        COORD2,
        "mission.create_child",
        child_payload(
            childMissionId="urn:example:mission:grandchild",
            childGroupId="urn:example:group:grandchild",
            coordinatorAgentId=W1.id,
            budget={"modelTokenLimit": 300},
        ),
        workItemId=item_id(CHILD_ITEM),
    ).events
    g = Harness(GroupAuthority(), group_id="urn:example:group:grandchild")
    g.now = c.now
    assert g.authority.found_child(link, g.ctx()) is not None
    usage = ChildUsage(
        "urn:example:mission:grandchild", "urn:uuid:charge-1", {"modelTokenLimit": 50}, "g"
    )

    relayed = c.authority.relayed_charge(usage, c.ctx())

    assert relayed is not None and relayed.child_mission_id == CHILD_MISSION
    assert relayed.charge_id != usage.charge_id
    top = f.parent.authority.charge_child(relayed, f.parent.ctx())
    middle = c.authority.charge_child(usage, c.ctx())
    assert top.outcome is not None and middle.outcome is not None
    assert f.parent.view("a")["resourceUsage"]["cumulative"] == {"modelTokenLimit": 50}
    assert c.view(CHILD_ITEM)["resourceUsage"]["cumulative"] == {"modelTokenLimit": 50}
