"""Undispatch: an item dispatched by ``next_start`` that then did not start (the Authority
refused ``work.start``) frees its slot and goes back to its Group queue; nothing else moves."""

from __future__ import annotations

from mwp.core.scheduler import Phase, Scheduler
from tests.unit.scheduler.builders import World, profile


def _one_slot() -> World:
    world = World(Scheduler(profile(slots=1)))
    world.group("g1")
    return world


def test_given_a_dispatched_item_when_undispatched_then_its_slot_is_free_and_it_is_queued() -> None:
    world = _one_slot()
    world.queue_item("g1", "w")
    d = world.sched.next_start()
    assert d is not None and world.sched.next_start() is None  # the only slot is taken

    assert world.sched.undispatch("g1", "w") is True

    queue = world.sched.queue("g1")
    assert queue.entries["w"].phase is Phase.QUEUED
    assert world.sched.slot_of("g1", "w") is None
    assert world.sched.slots.free_count == 1 and world.sched.running_total() == 0
    assert "w" in queue.snapshot()["ready"]
    again = world.sched.next_start()
    assert again is not None and again.context.work_item_id == "w"


def test_an_undispatched_item_keeps_its_place_ahead_of_younger_work() -> None:
    world = _one_slot()
    world.queue_item("g1", "old", when=0)
    world.queue_item("g1", "young", when=60)
    assert world.sched.next_start().context.work_item_id == "old"  # type: ignore[union-attr]

    world.sched.undispatch("g1", "old")

    assert world.sched.next_start().context.work_item_id == "old"  # type: ignore[union-attr]


def test_undispatch_frees_the_group_quota_too() -> None:
    world = World(Scheduler(profile(slots=2)))
    world.group("g1", quota=1)
    world.queue_item("g1", "a", when=0)
    world.queue_item("g1", "b", when=1)
    assert world.sched.next_start().context.work_item_id == "a"  # type: ignore[union-attr]
    assert world.sched.next_start() is None  # the Group's quota is used

    world.sched.undispatch("g1", "a")

    assert world.sched.next_start() is not None


def test_an_undispatched_checkpointed_item_still_resumes_from_its_checkpoint() -> None:
    world = _one_slot()
    log = world.logs["g1"]
    world.queue_item("g1", "w")
    world.sched.next_start()
    world.feed("g1", log.started("w"))
    world.feed("g1", log.checkpointed("w", "urn:example:checkpoint:w"))
    assert world.sched.next_start() is not None

    world.sched.undispatch("g1", "w")

    again = world.sched.next_start()
    assert again is not None and again.resume_from == "urn:example:checkpoint:w"


def test_a_late_start_after_undispatch_occupies_a_slot_again() -> None:
    world = _one_slot()
    world.queue_item("g1", "w")
    world.sched.next_start()
    world.sched.undispatch("g1", "w")

    world.feed("g1", world.logs["g1"].started("w"))

    assert world.sched.queue("g1").entries["w"].phase is Phase.ACTIVE
    assert world.sched.slot_of("g1", "w") is not None
    assert world.sched.running_total() == 1 and world.sched.next_start() is None


def _state(world: World) -> tuple[object, ...]:
    sched = world.sched
    return (
        sched.queue("g1").snapshot(),
        sched.slots.free_count,
        sched.running_total(),
        [(s.index, s.context) for s in sched.slots.slots],
        dict(sched.served),
    )


def test_undispatch_of_a_queued_item_returns_false_and_changes_nothing() -> None:
    world = _one_slot()
    world.queue_item("g1", "w")
    before = _state(world)

    assert world.sched.undispatch("g1", "w") is False

    assert _state(world) == before


def test_undispatch_of_an_active_item_returns_false_and_keeps_its_slot() -> None:
    world = _one_slot()
    world.queue_item("g1", "w")
    world.sched.next_start()
    world.feed("g1", world.logs["g1"].started("w"))
    before = _state(world)

    assert world.sched.undispatch("g1", "w") is False

    assert _state(world) == before
    assert world.sched.queue("g1").entries["w"].phase is Phase.ACTIVE
    assert world.sched.slot_of("g1", "w") is not None and world.sched.next_start() is None


def test_undispatch_of_an_unknown_or_offered_item_returns_false_and_changes_nothing() -> None:
    world = _one_slot()
    world.queue_item("g1", "w")
    world.sched.next_start()
    world.offer_item("g1", "offered")
    before = _state(world)

    assert world.sched.undispatch("g1", "missing") is False
    assert world.sched.undispatch("g1", "offered") is False

    assert _state(world) == before
    assert world.sched.queue("g1").entries["w"].phase is Phase.DISPATCHED


def test_a_second_undispatch_returns_false() -> None:
    world = _one_slot()
    world.queue_item("g1", "w")
    world.sched.next_start()
    assert world.sched.undispatch("g1", "w") is True
    before = _state(world)

    assert world.sched.undispatch("g1", "w") is False

    assert _state(world) == before


def test_a_finished_run_frees_its_slot_before_its_event_arrives_and_once_only() -> None:
    world = World(Scheduler(profile(slots=1)))
    log = world.group("g1")
    world.queue_item("g1", "a")
    world.queue_item("g1", "b", when=1)
    first = world.sched.next_start()
    assert first is not None and first.context.work_item_id == "a"
    assert world.sched.next_start() is None  # the one slot is taken
    assert world.sched.finish("g1", "a")  # the Authority accepted a's submission
    second = world.sched.next_start()
    assert second is not None and second.context.work_item_id == "b"
    # a's Events arrive later: they move a, and leave b's slot alone.
    world.feed("g1", log.started("a", when=2))
    world.feed("g1", log.submitted("a", when=3))
    assert world.sched.running_total() == 1
    assert world.sched.slot_of("g1", "b") is not None
    assert world.sched.queue("g1").entries["a"].phase.value == "submitted"
    assert not world.sched.finish("g1", "a")  # nothing left to free


def test_finish_of_an_item_without_a_slot_changes_nothing() -> None:
    world = World(Scheduler(profile(slots=1)))
    world.group("g1")
    world.queue_item("g1", "a")
    before = world.sched.queue("g1").snapshot()
    assert not world.sched.finish("g1", "a")
    assert not world.sched.finish("g1", "ghost")
    assert world.sched.queue("g1").snapshot() == before


def test_a_finished_runs_late_events_keep_the_group_quota_exact() -> None:
    world = World(Scheduler(profile(slots=2)))
    log = world.group("g1", quota=1)
    for n, item in enumerate(("a", "b", "c")):
        world.queue_item("g1", item, when=n)
    assert world.sched.next_start() is not None  # a
    assert world.sched.finish("g1", "a")
    assert world.sched.next_start() is not None  # b: the Group's one slot again
    world.feed("g1", log.started("a", when=5))
    world.feed("g1", log.submitted("a", when=6))
    assert world.sched.next_start() is None  # still one running in g1: quota 1 holds
