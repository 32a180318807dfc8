"""A replacement Session's revocation (spec 11.3) frees the slot and queues the item again, for
this Agent only; the new runtime starts it from its latest checkpoint."""

from __future__ import annotations

from mwp.core.scheduler import Phase
from tests.unit.scheduler.builders import World, contract

REF = "sha256:" + "7" * 64


def test_a_revoked_lease_frees_the_slot_and_the_item_is_dispatched_again() -> None:
    world = World()
    log = world.group("g1")
    world.queue_item("g1", "w")
    dispatch = world.sched.next_start()
    assert dispatch is not None and dispatch.context.work_item_id == "w"
    world.feed("g1", log.started("w", when=10))
    world.feed("g1", log.progressed("w", REF, when=20))
    assert world.sched.running_total() == 1 and world.sched.next_start() is None

    world.feed("g1", log.lease_revoked("w", when=30))

    entry = world.sched.queue("g1").entries["w"]
    assert entry.phase is Phase.QUEUED and entry.lease_id is None
    assert world.sched.running_total() == 0
    again = world.sched.next_start()
    assert again is not None and again.context.work_item_id == "w"
    assert again.resume_from == REF  # resumed from the latest checkpoint


def test_another_agents_revocation_changes_nothing_here() -> None:
    world = World()
    log = world.group("g1")
    world.feed("g1", log.authorized("x", contract()))
    world.feed("g1", log.offered("x", ("agent-b",)))
    world.feed("g1", log.accepted("x", agent="agent-b"))
    world.feed("g1", log.started("x"))
    before = world.sched.queue("g1").snapshot()
    world.feed("g1", log.lease_revoked("x", agent="agent-b", when=5))
    after = world.sched.queue("g1").snapshot()
    assert after["entries"] == before["entries"] and "x" not in after["entries"]
