"""MWP-WRK-011 (isolated slots) and MWP-WRK-012 (disclosure never reveals another Group)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mwp.core.scheduler import CapacityStatus, ScheduleDisclosure, Scheduler
from tests.unit.scheduler.builders import World, at, profile


def test_each_slot_isolates_its_item() -> None:
    world = World(Scheduler(profile(slots=2)))
    world.group("g1")
    world.group("g2")
    world.queue_item("g1", "a", budget={"toolCallLimit": 5})
    world.queue_item("g2", "b", budget={"toolCallLimit": 9})
    d1, d2 = world.sched.next_start(), world.sched.next_start()
    assert d1 is not None and d2 is not None and d1.slot_index != d2.slot_index
    c1, c2 = d1.context, d2.context
    assert c1.mission_id != c2.mission_id
    assert c1.credentials_ref != c2.credentials_ref
    assert c1.side_effect_namespace != c2.side_effect_namespace
    assert c1.tool_budget["toolCallLimit"] != c2.tool_budget["toolCallLimit"]
    with pytest.raises(TypeError):
        c1.tool_budget["toolCallLimit"] = 99  # type: ignore[index]
    assert world.sched.next_start() is None  # only the declared slots


def test_disclosure_on_acceptance_and_material_change() -> None:
    world = World(Scheduler(profile(slots=1)))
    world.group("g1")
    world.queue_item("g1", "a")
    world.queue_item("g1", "b", when=1)
    d = world.sched.disclose("g1", "b", at(1))
    assert d.capacity_status is CapacityStatus.QUEUED and d.earliest_start <= d.latest_start
    assert set(d.schedule_estimate()) == {
        "estimatedStart",
        "estimatedCompletion",
        "confidence",
        "capacityStatus",
        "lastCalculatedAt",
    }
    first = world.sched.material_changes("g1", at(1))
    assert [x.work_item_id for x in first] == ["a", "b"]
    assert world.sched.material_changes("g1", at(1)) == []  # nothing moved
    started = world.sched.next_start()
    assert started is not None
    world.feed("g1", world.logs["g1"].started(started.context.work_item_id))
    moved = world.sched.material_changes("g1", at(2))
    assert moved == [] or all(x.group_id == "g1" for x in moved)


# Prefixed so a name cannot match a timestamp or enum by chance: any hit is a real leak.
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12).map(
    lambda s: "other-" + s
)


def _disclose_for_mine(others: list[tuple[str, int, int, str]]) -> ScheduleDisclosure:
    world = World(Scheduler(profile(slots=2)))
    world.group("mine-group")
    for gid, weight, _, _ in others:
        world.group(gid, weight=weight)
    for gid, _, count, secret in others:
        for i in range(count):
            world.queue_item(gid, f"{gid}-{secret}-{i}", when=i, goal=secret, urgency="critical")
    world.queue_item("mine-group", "mine-item", when=5)
    return world.sched.disclose("mine-group", "mine-item", at(10))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(names, st.integers(1, 4), st.integers(0, 4), names),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[0],
    ),
    st.data(),
)
def test_disclosure_never_reveals_other_groups(
    others: list[tuple[str, int, int, str]], data: st.DataObject
) -> None:
    disclosure = _disclose_for_mine(others)
    text = json.dumps(asdict(disclosure), default=str)
    for gid, _, _, secret in others:
        assert gid not in text and secret not in text
    assert disclosure.group_id == "mine-group" and disclosure.work_item_id == "mine-item"
    # Renaming every other Group, item and content gives the very same disclosure: nothing
    # identifying of theirs can be in it, only aggregate load.
    renamed = [(f"zz{data.draw(names)}{i}", w, c, "x" + s) for i, (_, w, c, s) in enumerate(others)]
    assert _disclose_for_mine(renamed) == disclosure


def test_estimates_follow_the_observed_pace_of_runs() -> None:
    world = World(Scheduler(profile(slots=1)))
    world.group("g1")
    world.queue_item("g1", "a")
    world.queue_item("g1", "b", when=1)
    declared = world.sched.disclose("g1", "b", at(1))
    for _ in range(30):  # runs take 2 s, not the declared 600 s
        world.sched.observe_run(2.0)
    observed = world.sched.disclose("g1", "b", at(1))
    assert world.sched.mean_duration < 10
    assert observed.latest_start < declared.latest_start
    world.sched.observe_run(-5)  # a clock step backwards counts as an instant run
    assert world.sched.mean_duration >= 1
