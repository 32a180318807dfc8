"""MWP-WRK-008 and 015: per-Group queues are projections of each Group's Events."""

from __future__ import annotations

from mwp.core.scheduler import Phase, Scheduler
from tests.unit.scheduler.builders import World, contract, profile


def _two_groups() -> World:
    world = World()
    world.group("g1")
    world.group("g2")
    return world


def test_each_group_has_its_own_queue_and_cursor() -> None:
    world = _two_groups()
    world.queue_item("g1", "a")
    world.queue_item("g2", "b")
    q1, q2 = world.sched.queue("g1"), world.sched.queue("g2")
    assert set(q1.entries) == {"a"} and set(q2.entries) == {"b"}
    assert q1.cursor == 3 and q2.cursor == 3
    world.feed("g1", world.logs["g1"].result_accepted("a"))
    assert q1.cursor == 4 and q2.cursor == 3 and "a" in q1.verified and not q2.verified


def _drive(world: World) -> None:
    """A busy life: queue, dispatch, start, checkpoint, block, unblock, submit, fail."""
    log = world.logs["g1"]
    for i in range(6):
        world.queue_item("g1", f"w{i}", when=i, urgency=["routine", "high", "critical"][i % 3])
    world.feed("g1", log.authorized("dep", contract()))
    world.feed("g1", log.authorized("w6", contract(deps=("dep",))))
    world.feed("g1", log.offered("w6"))
    world.feed("g1", log.accepted("w6"))
    world.feed("g1", log.offered("lost", ("agent-a", "agent-b")))  # unknown item: ignored
    started = []
    while (d := world.sched.next_start()) is not None:
        started.append(d.context.work_item_id)
        world.feed("g1", log.started(d.context.work_item_id))
    world.feed("g1", log.checkpointed(started[0], "ck-1", when=10))
    world.feed("g1", log.blocked(started[1], when=11))
    world.feed("g1", log.unblocked(started[1], when=12))
    world.feed("g1", log.result_accepted("dep", when=13))
    world.feed("g1", log.failed("w5", when=14))


def test_rebuild_by_replay_equals_live_state() -> None:
    live = World()
    live.group("g1")
    _drive(live)
    rebuilt = Scheduler(profile())
    rebuilt.join_group("g1", "mission-g1")
    for event in live.logs["g1"].events:
        rebuilt.apply("g1", event)
    assert rebuilt.queue("g1").snapshot() == live.sched.queue("g1").snapshot()
    assert live.sched.queue("g1").entries["w6"].phase is Phase.QUEUED  # dependency now met
    assert "w6" in live.sched.queue("g1").snapshot()["ready"]


def test_redelivered_events_change_nothing() -> None:
    world = World()
    world.group("g1")
    _drive(world)
    before = world.sched.queue("g1").snapshot()
    for event in world.logs["g1"].events:
        world.feed("g1", event)
    assert world.sched.queue("g1").snapshot() == before


def test_losing_the_race_drops_the_offer() -> None:
    world = World()
    log = world.group("g1")
    world.feed("g1", log.authorized("w", contract()))
    world.feed("g1", log.offered("w", ("agent-a", "agent-b")))
    assert world.sched.queue("g1").entries["w"].phase is Phase.OFFERED
    world.feed("g1", log.accepted("w", agent="agent-b"))
    assert "w" not in world.sched.queue("g1").entries


def test_urgency_change_reorders_queued_work_at_once() -> None:
    world = World(Scheduler(profile(slots=1)))
    log = world.group("g1")
    world.queue_item("g1", "old", when=0, urgency="routine")
    world.queue_item("g1", "new", when=60, urgency="routine")
    assert world.sched.queue("g1").peek().work_item_id == "old"  # type: ignore[union-attr]
    world.feed("g1", log.revised("new", contract(urgency="high", version=2)))
    assert world.sched.queue("g1").peek().work_item_id == "new"  # type: ignore[union-attr]


def test_dependencies_and_approval_gate_eligibility() -> None:
    world = World()
    log = world.group("g1")
    world.feed("g1", log.authorized("dep", contract()))
    world.queue_item("g1", "w", deps=("dep",), approval="human_required")
    assert world.sched.next_start() is None
    world.feed("g1", log.result_accepted("dep"))
    assert world.sched.next_start() is None  # still gated
    world.feed("g1", log.granted("w"))
    d = world.sched.next_start()
    assert d is not None and d.context.work_item_id == "w"


def test_preemption_is_a_request_then_checkpoint_requeues_with_its_checkpoint() -> None:
    world = World(Scheduler(profile(slots=1)))
    log = world.group("g1")
    world.queue_item("g1", "w")
    d = world.sched.next_start()
    assert d is not None and d.resume_from is None
    world.feed("g1", log.started("w"))
    assert world.sched.request_preemption("g1", "w")
    slot = world.sched.slot_of("g1", "w")
    assert slot is not None and slot.preemption_requested
    assert world.sched.queue("g1").entries["w"].phase is Phase.ACTIVE  # never stopped at once
    assert world.sched.next_start() is None  # the slot is still held
    world.feed("g1", log.checkpointed("w", "ck-7"))
    assert world.sched.slot_of("g1", "w") is None
    again = world.sched.next_start()
    assert again is not None and again.resume_from == "ck-7"
    assert again.context.checkpoint_ref == "ck-7"
    assert not world.sched.request_preemption("g1", "missing")


def test_blocked_work_frees_its_slot_and_unblocked_work_returns() -> None:
    world = World(Scheduler(profile(slots=1)))
    log = world.group("g1")
    world.queue_item("g1", "a")
    world.queue_item("g1", "b", when=5)
    assert world.sched.next_start().context.work_item_id == "a"  # type: ignore[union-attr]
    world.feed("g1", log.started("a"))
    world.feed("g1", log.blocked("a"))
    assert world.sched.next_start().context.work_item_id == "b"  # type: ignore[union-attr]
    world.feed("g1", log.started("b"))
    world.feed("g1", log.unblocked("a"))
    assert world.sched.queue("g1").entries["a"].phase is Phase.QUEUED
    world.feed("g1", log.submitted("b"))
    assert world.sched.next_start().context.work_item_id == "a"  # type: ignore[union-attr]


def test_a_cited_event_gives_an_item_its_terms_and_checkpoint_and_moves_no_cursor() -> None:
    """A member offered an item authorized before its admission never had the item's
    work.authorized delivered: its inbox retrieves the Events the offer's Context Package cites
    and hands them over marked ``cited``, behind the Cursor. They give the item its terms and
    latest checkpoint, so the offer is admitted; uncited, the offer is ignored."""
    world = World()
    log = world.group("g1")
    authorized = log.authorized("w", contract())
    checkpoint = log.progressed("w", "ck-9")  # the last owner's
    for _ in range(3):
        world.feed("g1", log.result_accepted("other"))  # the agent's view starts here
    offer = log.offered("w")
    world.feed("g1", offer)
    queue = world.sched.queue("g1")
    assert "w" not in queue.entries  # no terms: the offer cannot be admitted
    cursor = queue.cursor
    for cited in (authorized, checkpoint):
        world.feed("g1", {**cited, "cited": True})
    assert queue.cursor == cursor and "w" in queue.terms
    world.feed("g1", log.offered("w"))  # the offer, delivered after its cited Events
    entry = queue.entries["w"]
    assert entry.phase is Phase.OFFERED and entry.checkpoint_ref == "ck-9"
