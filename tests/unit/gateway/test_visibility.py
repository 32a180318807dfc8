"""The Membership timeline the gateway evolves from a Group's log, fed with the Events the pure
Group Authority itself produces (MWP-MSN-012)."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.gateway.visibility import CONTEXT_PACKAGE_PUBLISHED, MembershipTimeline
from tests.unit.group.harness import COORD, OWNER, W1, W2, W3, mission_harness

TEXT = {"content": [{"type": "text", "text": "A thought."}]}


def timeline_of(events: list[dict[str, Any]]) -> MembershipTimeline:
    timeline = MembershipTimeline()
    for event in events:
        timeline.evolve(event)
    return timeline


def visible(timeline: MembershipTimeline, member: str) -> list[int]:
    return [n for n in range(1, timeline.sequence + 1) if timeline.may_see(member, n)]


def test_owner_and_coordinator_see_everything_a_worker_from_its_admission() -> None:
    h = mission_harness()
    h.submit(COORD, "message.post", TEXT)
    timeline = timeline_of(h.events)
    every = list(range(1, timeline.sequence + 1))
    assert visible(timeline, OWNER.id) == every
    assert visible(timeline, COORD.id) == every
    admitted = next(
        e["sequence"]
        for e in h.events
        if e["kind"] == "membership.changed" and e["payload"]["membership"]["member"]["id"] == W1.id
    )
    assert admitted > 1
    assert visible(timeline, W1.id) == list(range(admitted, timeline.sequence + 1))
    # The same start the Authority itself records for the Membership.
    view = {m["member"]["id"]: m for m in h.authority.mission_view()["memberships"]}
    assert view[W1.id]["visibilityStartSequence"] == admitted
    assert not timeline.ever_member(W3.id) and visible(timeline, W3.id) == []


def test_a_removed_member_sees_its_removal_and_nothing_after() -> None:
    h = mission_harness()
    h.submit(COORD, "message.post", TEXT)
    ended = h.submit(COORD, "membership.end", {"memberId": W1.id, "reason": "done"})
    removal = ended.events[0]["sequence"]
    h.submit(COORD, "message.post", TEXT)
    h.submit(W2, "message.post", TEXT)
    timeline = timeline_of(h.events)
    seen = visible(timeline, W1.id)
    assert seen[-1] == removal
    assert timeline.ended_at(W1.id) == removal
    assert timeline.ever_member(W1.id)
    assert visible(timeline, W2.id)[-1] == timeline.sequence  # the others go on
    assert timeline.ended_at(W2.id) is None


def test_a_late_joiner_sees_only_from_its_admission_and_a_returning_member_not_the_gap() -> None:
    h = mission_harness()
    for _ in range(3):
        h.submit(COORD, "message.post", TEXT)
    joined = h.submit(COORD, "membership.change", {"memberId": W3.id, "role": "worker"})
    admission = joined.events[0]["sequence"]
    ended = h.submit(COORD, "membership.end", {"memberId": W3.id})
    h.submit(COORD, "message.post", TEXT)  # while W3 is away
    back = h.submit(COORD, "membership.change", {"memberId": W3.id, "role": "reviewer"})
    h.submit(COORD, "message.post", TEXT)
    timeline = timeline_of(h.events)
    removal, readmission = ended.events[0]["sequence"], back.events[0]["sequence"]
    assert visible(timeline, W3.id) == [
        *range(admission, removal + 1),
        *range(readmission, timeline.sequence + 1),
    ]


def test_a_provisional_member_sees_from_its_offer_on() -> None:
    h = mission_harness()
    h.authorize("task")
    offered = h.offer("task", W3)
    grant = next(e for e in offered.events if e["kind"] == "membership.changed")
    assert grant["payload"]["membership"]["state"] == "provisional"
    timeline = timeline_of(h.events)
    start = grant["payload"]["membership"]["visibilityStartSequence"]
    assert visible(timeline, W3.id)[-2:] == [start, start + 1]
    assert timeline.may_see(W3.id, timeline.sequence)
    # Before its start only what the offer's Context Package shows: its publication and the
    # Events it cites.
    shown = {
        e["sequence"]
        for e in h.events
        if e["kind"] == CONTEXT_PACKAGE_PUBLISHED
        and e["payload"]["contextPackage"]["contextPackageId"]
        == grant["payload"]["membership"].get("contextPackageId")
    }
    cited = {
        e["sequence"]
        for e in h.events
        for p in h.events
        if p["sequence"] in shown
        and e["eventId"] in p["payload"]["contextPackage"]["sourceEventRange"]["eventIds"]
    }
    assert [n for n in visible(timeline, W3.id) if n < start] == sorted(shown | cited)


def test_a_member_given_complete_visibility_later_sees_the_history_before() -> None:
    """A Coordinator's Membership starts at 0 whenever it is granted (spec 8)."""
    h = mission_harness()
    timeline = MembershipTimeline()
    for event in h.events:
        timeline.evolve(event)
    promoted = {
        "sequence": timeline.sequence + 1,
        "kind": "membership.changed",
        "payload": {
            "membership": {
                "member": {"type": "agent", "id": W2.id},
                "state": "active",
                "visibilityStartSequence": 0,
            }
        },
    }
    timeline.evolve(promoted)
    assert visible(timeline, W2.id) == list(range(1, timeline.sequence + 1))


def test_events_must_come_in_group_order() -> None:
    h = mission_harness()
    timeline = MembershipTimeline()
    timeline.evolve(h.events[0])
    with pytest.raises(ValueError):
        timeline.evolve(h.events[2])
