"""MWP-WRK-005: admission control declines with one structured reason per constraint."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.scheduler import Admitted, Declined, DeclineReason, Scheduler
from mwp.core.scheduler.model import SideEffectRisk
from tests.unit.scheduler.builders import CAP, World, at, contract, profile


def _offer(world: World, item: str = "w1", terms: Any = None, **offer: Any) -> None:
    log = world.logs["g1"]
    world.feed("g1", log.authorized(item, contract(**(terms or {}))))
    world.offer_item("g1", item, **offer)


def _world(**prof: Any) -> World:
    world = World(Scheduler(profile(**prof)))
    world.group("g1")
    return world


def _declined(world: World, item: str = "w1", now: int = 0) -> Declined:
    decision = world.sched.admit("g1", item, at(now))
    assert isinstance(decision, Declined), decision
    return decision


def test_a_feasible_offer_is_admitted_with_a_disclosure() -> None:
    world = _world()
    _offer(world)
    decision = world.sched.admit("g1", "w1", at(0))
    assert isinstance(decision, Admitted)
    assert decision.disclosure.work_item_id == "w1"
    assert decision.disclosure.capacity_status.value == "available"


def test_capacity_group_queue_bound() -> None:
    world = World(Scheduler(profile()))
    world.group("g1", queue_bound=2)
    for i in range(2):
        world.queue_item("g1", f"q{i}")
    _offer(world)
    d = _declined(world)
    assert (d.reason, d.details["bound"]) == (DeclineReason.CAPACITY, "group_queue")


def test_capacity_agent_queue_bound() -> None:
    world = _world(queue_bound=1)
    world.queue_item("g1", "q0")
    _offer(world)
    d = _declined(world)
    assert (d.reason, d.details["bound"]) == (DeclineReason.CAPACITY, "agent_queue")


def test_concurrency_when_no_slot_may_serve() -> None:
    world = _world()
    world.sched.usable_slots = 0  # Presence: draining
    _offer(world)
    assert _declined(world).reason is DeclineReason.CONCURRENCY


def test_capability_missing_or_pinned_to_an_unserved_version() -> None:
    world = _world()
    _offer(world, terms={"caps": (("image.render", "1.0.0"),)}, pins=())
    d = _declined(world)
    assert d.reason is DeclineReason.CAPABILITY and d.details["missing"] == ["image.render"]
    _offer(world, item="w2", pins=((CAP, "1.9.0"),))  # pinned version the card lacks
    assert _declined(world, "w2").reason is DeclineReason.CAPABILITY


def test_capability_major_version_must_match_without_a_pin() -> None:
    world = _world(capabilities={CAP: frozenset({"2.0.0"})})
    _offer(world, pins=())
    assert _declined(world).reason is DeclineReason.CAPABILITY


def test_capability_card_version_mismatch() -> None:
    world = _world()
    _offer(world, card=7)
    d = _declined(world)
    assert d.reason is DeclineReason.CAPABILITY and d.details["offered"] == 7


def test_deadline_start_by_cannot_be_met() -> None:
    world = _world(slots=1, mean_duration=3000)
    world.queue_item("g1", "q0")
    world.queue_item("g1", "q1")
    _offer(world, start_within=60)
    d = _declined(world)
    assert (d.reason, d.details["limit"]) == (DeclineReason.DEADLINE, "start_by")


def test_deadline_contract_deadline_cannot_be_met() -> None:
    world = _world()
    _offer(world, terms={"deadline": at(100)})  # 600 s of work, 100 s left
    d = _declined(world)
    assert (d.reason, d.details["limit"]) == (DeclineReason.DEADLINE, "contract_deadline")


def test_authorization_not_eligible_risk_or_group() -> None:
    world = _world(max_risk=SideEffectRisk.REVERSIBLE)
    _offer(world, eligible=False)
    assert _declined(world).details == {"rule": "not_eligible"}
    _offer(world, item="w2", terms={"risk": "destructive"})
    d = _declined(world, "w2")
    assert d.reason is DeclineReason.AUTHORIZATION and d.details["rule"] == "side_effect_risk"
    other = _world(authorized_groups=frozenset({"g9"}))
    _offer(other)
    assert _declined(other).details == {"rule": "group_not_authorized"}


def test_dependency_failed_or_unknown() -> None:
    world = _world()
    log = world.logs["g1"]
    world.feed("g1", log.authorized("dep", contract()))
    world.feed("g1", log.failed("dep"))
    _offer(world, terms={"deps": ("dep", "ghost")})
    d = _declined(world)
    assert d.reason is DeclineReason.DEPENDENCY
    assert d.details == {"failed": ["dep"], "unknown": ["ghost"]}


def test_a_pending_dependency_is_admitted_but_not_eligible() -> None:
    world = _world()
    world.feed("g1", world.logs["g1"].authorized("dep", contract()))
    _offer(world, terms={"deps": ("dep",)})
    assert isinstance(world.sched.admit("g1", "w1", at(0)), Admitted)


def test_budget_estimate_over_the_contract() -> None:
    world = _world(cost_estimates={CAP: {"toolCallLimit": 80}})
    _offer(world)  # contract allows 50 tool calls
    d = _declined(world)
    assert d.reason is DeclineReason.BUDGET and d.details["exceeded"] == ["toolCallLimit"]


def test_admission_needs_a_pending_offer() -> None:
    world = _world()
    with pytest.raises(KeyError):
        world.sched.admit("g1", "nope", at(0))


def test_a_dependency_known_only_as_verified_is_admitted_when_the_caller_says_so() -> None:
    """MWP-MSN-012: a Worker new to the Group learns that a dependency authorized before its
    visibility start was verified from the offer's Context Package, which cites the Event
    that accepted its result. The offer is admitted and the item eligible at once; a Scheduler
    told not to count it (an AgentWorkflow replaying a history from before the patch) declines
    the dependency as unknown."""
    world = _world()
    log = world.logs["g1"]
    log.authorized("dep", contract())  # before this Agent's visibility start: never delivered
    accepted = log.result_accepted("dep")
    world.feed("g1", {**accepted, "cited": True})
    _offer(world, terms={"deps": ("dep",)})
    assert _declined(world).details == {"failed": [], "unknown": ["dep"]}
    decision = world.sched.admit("g1", "w1", at(0), verified_is_known=True)
    assert isinstance(decision, Admitted)
    assert world.sched.queue("g1").waiting_on(world.sched.queue("g1").entries["w1"]) is None
