"""The timeline's live Membership of a member (role and state), what the Artifact routes
decide on, fed with the pure Group Authority's own Events."""

from __future__ import annotations

from mwp.gateway.visibility import MembershipTimeline
from tests.unit.group.harness import COORD, W1, W3, mission_harness

TEXT = {"content": [{"type": "text", "text": "A thought."}]}


def timeline_of(events: list[dict[str, object]]) -> MembershipTimeline:
    timeline = MembershipTimeline()
    for event in events:
        timeline.evolve(event)
    return timeline


def test_a_live_membership_has_its_role_and_state_and_ends_with_its_removal() -> None:
    h = mission_harness()
    assert timeline_of(h.events).membership(W1.id) == ("worker", "active")
    assert timeline_of(h.events).membership(COORD.id) == ("coordinator", "active")
    assert timeline_of(h.events).membership(W3.id) is None  # never a member
    h.submit(COORD, "membership.end", {"memberId": W1.id, "reason": "done"})
    h.submit(COORD, "message.post", TEXT)
    assert timeline_of(h.events).membership(W1.id) is None
    h.submit(COORD, "membership.change", {"memberId": W1.id, "role": "reviewer"})
    assert timeline_of(h.events).membership(W1.id) == ("reviewer", "active")


def test_an_offer_makes_a_provisional_membership() -> None:
    h = mission_harness()
    h.authorize("task")
    h.offer("task", W3)
    assert timeline_of(h.events).membership(W3.id) == ("worker", "provisional")
