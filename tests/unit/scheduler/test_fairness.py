"""MWP-WRK-009/010: weighted fairness across Groups, aging inside a Group, quotas, no urgency
across Groups. Deterministic simulations driven by Group Events."""

from __future__ import annotations

from itertools import pairwise

from mwp.core.scheduler import Scheduler, starvation_bound
from tests.unit.scheduler.builders import World, profile

WEIGHTS = {"low": 1, "mid": 2, "high": 4, "flood": 1}


def _simulate(world: World, decisions: int, urgency: dict[str, str]) -> list[str]:
    """Each decision starts one item and completes it; every Group stays backlogged."""
    served: list[str] = []
    counter = dict.fromkeys(world.logs, 0)
    for step in range(decisions):
        for gid in world.logs:
            while world.sched.queue(gid).queued_count() < 3:
                counter[gid] += 1
                world.queue_item(gid, f"{gid}-{counter[gid]}", when=step, urgency=urgency[gid])
        d = world.sched.next_start()
        assert d is not None
        gid, item = d.context.group_id, d.context.work_item_id
        served.append(gid)
        world.feed(gid, world.logs[gid].started(item, when=step))
        world.feed(gid, world.logs[gid].submitted(item, when=step))
    return served


def _world(slots: int = 1) -> World:
    world = World(Scheduler(profile(slots=slots)))
    for gid, w in WEIGHTS.items():
        world.group(gid, weight=w)
    return world


URGENCY = {"low": "routine", "mid": "routine", "high": "routine", "flood": "critical"}


def test_shares_follow_weights_within_ten_percent_despite_a_flood_of_critical_work() -> None:
    served = _simulate(_world(), 4000, URGENCY)
    total = sum(WEIGHTS.values())
    for gid, w in WEIGHTS.items():
        share = served.count(gid) / len(served)
        assert abs(share - w / total) <= 0.1 * w / total, (gid, share)
    # The flooding Group's critical urgency bought it nothing over its weight-1 peer.
    assert abs(served.count("flood") - served.count("low")) <= 2


def test_lowest_groups_longest_wait_is_bounded() -> None:
    served = _simulate(_world(), 4000, URGENCY)
    bound = starvation_bound(WEIGHTS, "low")
    assert bound == 10  # (ceil(2/1)+1) + (ceil(4/1)+1) + (ceil(1/1)+1)
    positions = [i for i, g in enumerate(served) if g == "low"]
    gaps = [b - a - 1 for a, b in pairwise(positions)]
    assert positions[0] <= bound and max(gaps) <= bound


def test_urgency_never_crosses_groups() -> None:
    world = World(Scheduler(profile(slots=1)))
    world.group("a")
    world.group("b")
    for i in range(5):
        world.queue_item("a", f"a{i}", when=i, urgency="critical")
        world.queue_item("b", f"b{i}", when=i, urgency="routine")
    order = []
    while (d := world.sched.next_start()) is not None:
        order.append(d.context.group_id)
        gid, item = d.context.group_id, d.context.work_item_id
        world.feed(gid, world.logs[gid].started(item))
        world.feed(gid, world.logs[gid].submitted(item))
    assert order == ["a", "b"] * 5  # equal weights alternate, whatever the urgency


def test_within_a_group_urgency_leads_but_aging_bounds_every_wait() -> None:
    world = World(Scheduler(profile(slots=1)))
    log = world.group("g")
    world.queue_item("g", "old-routine", when=0, urgency="routine")
    # Critical work arriving within its 4 h credit goes first ...
    world.queue_item("g", "critical-soon", when=3600, urgency="critical")
    # ... but critical work arriving after the credit is spent queues behind the old item.
    world.queue_item("g", "critical-late", when=4 * 3600 + 1, urgency="critical")
    order = []
    while (d := world.sched.next_start()) is not None:
        order.append(d.context.work_item_id)
        world.feed("g", log.started(d.context.work_item_id))
        world.feed("g", log.submitted(d.context.work_item_id))
    assert order == ["critical-soon", "old-routine", "critical-late"]


def test_group_quota_caps_concurrent_slots() -> None:
    world = World(Scheduler(profile(slots=4)))
    world.group("big", weight=8, quota=1)
    world.group("small", weight=1)
    for i in range(6):
        world.queue_item("big", f"b{i}")
        world.queue_item("small", f"s{i}")
    started = []
    while (d := world.sched.next_start()) is not None:
        started.append(d.context.group_id)
    assert started.count("big") == 1 and started.count("small") == 3
    # Freeing big's slot lets it run again; small's slots stay as they are.
    first_big = next(
        e for e in world.sched.queue("big").entries.values() if e.phase.value == "dispatched"
    )
    world.feed("big", world.logs["big"].started(first_big.work_item_id))
    world.feed("big", world.logs["big"].submitted(first_big.work_item_id))
    d = world.sched.next_start()
    assert d is not None and d.context.group_id == "big"


def test_an_idle_group_banks_no_credit() -> None:
    world = World(Scheduler(profile(slots=1)))
    world.group("busy")
    world.group("idle")
    for i in range(50):
        world.queue_item("busy", f"b{i}")
    for _ in range(20):
        d = world.sched.next_start()
        assert d is not None
        world.feed("busy", world.logs["busy"].started(d.context.work_item_id))
        world.feed("busy", world.logs["busy"].submitted(d.context.work_item_id))
    for i in range(10):
        world.queue_item("idle", f"i{i}")
    order = []
    for _ in range(6):
        d = world.sched.next_start()
        assert d is not None
        gid = d.context.group_id
        order.append(gid)
        world.feed(gid, world.logs[gid].started(d.context.work_item_id))
        world.feed(gid, world.logs[gid].submitted(d.context.work_item_id))
    assert order.count("busy") >= 2  # the newcomer alternates; it does not monopolize
