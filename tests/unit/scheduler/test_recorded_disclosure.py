"""A Scheduler rebuilt from the Group log knows which schedule estimates the Group already
recorded (on acceptance, or disclosed later) and publishes only material changes again."""

from __future__ import annotations

from mwp.core.scheduler import Scheduler
from mwp.core.scheduler.group_queue import SCHEDULE_DISCLOSED
from tests.unit.scheduler.builders import World, at, profile


def _queued_with_estimates(world: World) -> None:
    """Two items queued; the Group recorded the estimates the live Scheduler published."""
    live = World(Scheduler(profile(slots=1)))
    live.group("g1")
    live.queue_item("g1", "a")
    live.queue_item("g1", "b", when=1)
    published = {d.work_item_id: d for d in live.sched.material_changes("g1", at(1))}
    world.group("g1")
    log = world.logs["g1"]
    for event in live.logs["g1"].events:
        log.events.append(event)
        world.feed("g1", event)
    for item, disclosure in sorted(published.items()):
        payload = {"ownershipEpoch": 1, "scheduleEstimate": disclosure.schedule_estimate()}
        world.feed("g1", log.add(SCHEDULE_DISCLOSED, item, payload, when=1))


def test_a_rebuilt_scheduler_does_not_publish_what_the_group_recorded() -> None:
    rebuilt = World(Scheduler(profile(slots=1)))
    _queued_with_estimates(rebuilt)
    assert rebuilt.sched.queue("g1").entries["b"].disclosed is not None
    assert rebuilt.sched.material_changes("g1", at(1)) == []


def test_without_recorded_estimates_a_rebuilt_scheduler_publishes_them_all() -> None:
    fresh = World(Scheduler(profile(slots=1)))
    fresh.group("g1")
    fresh.queue_item("g1", "a")
    fresh.queue_item("g1", "b", when=1)
    assert [d.work_item_id for d in fresh.sched.material_changes("g1", at(1))] == ["a", "b"]


def test_a_recorded_estimate_that_has_moved_materially_is_published_again() -> None:
    rebuilt = World(Scheduler(profile(slots=1)))
    _queued_with_estimates(rebuilt)
    # Hours later nothing has started: every committed start has moved by far over 5 minutes.
    moved = rebuilt.sched.material_changes("g1", at(6 * 3600))
    assert {d.work_item_id for d in moved} == {"a", "b"}


def test_an_estimate_is_published_again_at_most_once_a_minute() -> None:
    world = World(Scheduler(profile(slots=1)))
    world.group("g1")
    world.queue_item("g1", "a")
    world.queue_item("g1", "b", when=1)
    assert len(world.sched.material_changes("g1", at(1))) == 2
    world.sched.observe_run(1)  # the estimates collapse from ten minutes to seconds ...
    world.sched.observe_run(1)
    world.sched.observe_run(1)
    assert world.sched.material_changes("g1", at(30)) == []  # ... but not within a minute
    assert {d.work_item_id for d in world.sched.material_changes("g1", at(7200))} == {"a", "b"}
