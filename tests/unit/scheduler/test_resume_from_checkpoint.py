"""A new owner resumes from the previous owner's checkpoint (spec 11.5): every Group queue
records the latest checkpoint of every item, whoever recorded it, and hands it to this Agent's
entry and Dispatch."""

from __future__ import annotations

from mwp.core.scheduler import Phase, Scheduler
from tests.unit.scheduler.builders import GroupLog, World, contract, profile

REF_1 = "sha256:" + "1" * 64
REF_2 = "urn:example:checkpoint:two"


def _held_by_another(world: World, log: GroupLog, item: str = "w") -> None:
    """``item`` authorized, offered to and accepted by agent-b, which starts it."""
    world.feed("g1", log.authorized(item, contract()))
    world.feed("g1", log.offered(item, ("agent-b",)))
    world.feed("g1", log.accepted(item, agent="agent-b"))
    world.feed("g1", log.started(item))


def _reassigned_to_me(world: World, log: GroupLog, item: str = "w") -> None:
    world.feed("g1", log.ownership_expired(item, agent="agent-b", when=400))
    world.feed("g1", log.offered(item, ("agent-a",), when=500))


def test_a_renewal_checkpoint_of_another_owner_is_recorded_but_no_entry_is_made() -> None:
    world = World()
    log = world.group("g1")
    _held_by_another(world, log)

    world.feed("g1", log.progressed("w", REF_1))

    queue = world.sched.queue("g1")
    assert queue.checkpoints == {"w": REF_1}
    assert "w" not in queue.entries


def test_given_another_owners_renewal_checkpoint_when_offered_to_me_then_the_entry_resumes() -> (
    None
):
    world = World()
    log = world.group("g1")
    _held_by_another(world, log)
    world.feed("g1", log.progressed("w", REF_1, when=60))

    _reassigned_to_me(world, log)

    entry = world.sched.queue("g1").entries["w"]
    assert entry.phase is Phase.OFFERED and entry.checkpoint_ref == REF_1
    world.feed("g1", log.accepted("w", when=510, epoch=2))
    d = world.sched.next_start()
    assert d is not None and d.context.work_item_id == "w"
    assert d.resume_from == REF_1 and d.context.checkpoint_ref == REF_1


def test_given_another_owners_checkpoint_when_accepted_without_an_offer_seen_then_it_resumes() -> (
    None
):
    world = World()
    log = world.group("g1")
    _held_by_another(world, log)
    world.feed("g1", log.checkpointed("w", REF_2, when=60))
    world.feed("g1", log.ownership_expired("w", agent="agent-b", when=400))

    # This Agent's acceptance arrives without the offer Event for it (e.g. a later join).
    world.feed("g1", log.accepted("w", when=500, epoch=2))

    entry = world.sched.queue("g1").entries["w"]
    assert entry.phase is Phase.QUEUED and entry.checkpoint_ref == REF_2
    d = world.sched.next_start()
    assert d is not None and d.resume_from == REF_2


def test_the_latest_checkpoint_wins_whichever_event_recorded_it() -> None:
    world = World()
    log = world.group("g1")
    _held_by_another(world, log)
    world.feed("g1", log.checkpointed("w", REF_1, when=10))
    world.feed("g1", log.started("w", when=20))
    world.feed("g1", log.progressed("w", REF_2, when=30))
    assert world.sched.queue("g1").checkpoints["w"] == REF_2
    world.feed("g1", log.progressed("w", REF_1, when=40))
    assert world.sched.queue("g1").checkpoints["w"] == REF_1

    _reassigned_to_me(world, log)
    assert world.sched.queue("g1").entries["w"].checkpoint_ref == REF_1


def test_a_renewal_without_a_checkpoint_ref_records_nothing_and_keeps_the_last_one() -> None:
    world = World()
    log = world.group("g1")
    _held_by_another(world, log)
    world.feed("g1", log.progressed("w"))
    assert world.sched.queue("g1").checkpoints == {}

    world.feed("g1", log.progressed("w", REF_1))
    world.feed("g1", log.progressed("w"))
    assert world.sched.queue("g1").checkpoints == {"w": REF_1}


def test_a_checkpoint_without_a_ref_keeps_the_last_one() -> None:
    world = World()
    log = world.group("g1")
    _held_by_another(world, log)
    world.feed("g1", log.progressed("w", REF_1))
    bare = log.checkpointed("w", REF_2)
    del bare["payload"]["checkpointRef"]
    world.feed("g1", bare)
    assert world.sched.queue("g1").checkpoints == {"w": REF_1}


def test_an_item_never_checkpointed_dispatches_without_resume_and_others_do_not_leak() -> None:
    world = World()
    log = world.group("g1")
    _held_by_another(world, log, "other")
    world.feed("g1", log.progressed("other", REF_1))

    world.queue_item("g1", "fresh")

    d = world.sched.next_start()
    assert d is not None and d.context.work_item_id == "fresh"
    assert d.resume_from is None and d.context.checkpoint_ref is None


def test_my_own_renewal_checkpoint_updates_my_entry_for_the_next_start() -> None:
    world = World(Scheduler(profile(slots=1)))
    log = world.group("g1")
    world.queue_item("g1", "w")
    assert world.sched.next_start() is not None
    world.feed("g1", log.started("w"))

    world.feed("g1", log.progressed("w", REF_1, when=30))

    entry = world.sched.queue("g1").entries["w"]
    assert entry.phase is Phase.ACTIVE and entry.checkpoint_ref == REF_1
    world.feed("g1", log.blocked("w", when=40))
    world.feed("g1", log.unblocked("w", when=50))
    again = world.sched.next_start()
    assert again is not None and again.resume_from == REF_1


def test_checkpoints_of_one_group_never_reach_another() -> None:
    world = World()
    log = world.group("g1")
    world.group("g2")
    _held_by_another(world, log)
    world.feed("g1", log.progressed("w", REF_1))
    assert world.sched.queue("g2").checkpoints == {}
