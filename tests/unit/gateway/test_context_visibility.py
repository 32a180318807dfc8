"""A Context Package shows a late joiner the Events it cites, and nothing else before its
visibility start (MWP-MSN-012, MWP-WRK-027). The Group's own Events come from the pure Group
Authority; the publication and the grant naming the package are written here, as the timeline
reads them."""

from __future__ import annotations

from typing import Any

from mwp.gateway.visibility import CONTEXT_PACKAGE_PUBLISHED, MembershipTimeline
from tests.unit.group.harness import COORD, W3, mission_harness

TEXT = {"content": [{"type": "text", "text": "A thought."}]}
PACKAGE = "urn:uuid:6f1c2a4e-0000-4000-8000-00000000c0de"


def published(
    sequence: int, first: int, last: int, event_ids: list[str], package_id: str = PACKAGE
) -> dict[str, Any]:
    package = {
        "contextPackageId": package_id,
        "sourceEventRange": {"fromSequence": first, "toSequence": last, "eventIds": event_ids},
    }
    return {
        "sequence": sequence,
        "eventId": f"urn:uuid:00000000-0000-4000-8000-{sequence:012d}",
        "kind": CONTEXT_PACKAGE_PUBLISHED,
        "payload": {"contextPackage": package},
    }


def granted(sequence: int, member: str, package_id: str | None) -> dict[str, Any]:
    membership: dict[str, Any] = {
        "member": {"type": "agent", "id": member},
        "role": "worker",
        "state": "provisional",
        "visibilityStartSequence": sequence,
    }
    if package_id is not None:
        membership["contextPackageId"] = package_id
    return {
        "sequence": sequence,
        "eventId": f"urn:uuid:00000000-0000-4000-8000-{sequence:012d}",
        "kind": "membership.changed",
        "payload": {"membership": membership},
    }


def history(posts: int = 5) -> list[dict[str, Any]]:
    h = mission_harness()
    for _ in range(posts):
        h.submit(COORD, "message.post", TEXT)
    return list(h.events)


def visible(events: list[dict[str, Any]], member: str) -> list[int]:
    timeline = MembershipTimeline()
    for event in events:
        timeline.evolve(event)
    return [n for n in range(1, timeline.sequence + 1) if timeline.may_see(member, n)]


def test_a_member_granted_a_published_package_sees_its_cited_events_and_the_publication() -> None:
    events = history()
    head = len(events)
    cited = [events[head - 4], events[head - 2]]  # two of the posts, not the one between
    events.append(published(head + 1, head - 4, head, [e["eventId"] for e in cited]))
    events.append(granted(head + 2, W3.id, PACKAGE))
    assert visible(events, W3.id) == [head - 3, head - 1, head + 1, head + 2]


def test_the_same_ids_in_a_lookup_the_reader_supplies() -> None:
    """The reader's own lookup (it holds the Events) gives the same answer."""
    events = history()
    head = len(events)
    events.append(published(head + 1, 1, head, [events[1]["eventId"]]))
    events.append(granted(head + 2, W3.id, PACKAGE))
    timeline = MembershipTimeline(lambda n: str(events[n - 1]["eventId"]))
    for event in events:
        timeline.evolve(event)
    seen = [n for n in range(1, timeline.sequence + 1) if timeline.may_see(W3.id, n)]
    assert seen == [2, head + 1, head + 2]


def test_a_package_the_membership_does_not_name_shows_nothing() -> None:
    events = history()
    head = len(events)
    events.append(published(head + 1, 1, head, [e["eventId"] for e in events]))
    events.append(granted(head + 2, W3.id, None))
    assert visible(events, W3.id) == [head + 2]
    other = history()
    other.append(published(head + 1, 1, head, [e["eventId"] for e in other]))
    other.append(granted(head + 2, W3.id, "urn:uuid:6f1c2a4e-0000-4000-8000-0000000000ff"))
    assert visible(other, W3.id) == [head + 2]


def test_cited_ids_outside_the_range_show_nothing() -> None:
    events = history()
    head = len(events)
    ids = [e["eventId"] for e in events]
    # Cites every Event, but its range is only head - 1..head.
    events.append(published(head + 1, head - 1, head, ids))
    events.append(granted(head + 2, W3.id, PACKAGE))
    assert visible(events, W3.id) == [head - 1, head, head + 1, head + 2]


def test_a_package_published_after_the_grant_shows_nothing() -> None:
    events = history()
    head = len(events)
    events.append(granted(head + 1, W3.id, PACKAGE))
    events.append(published(head + 2, 1, head, [e["eventId"] for e in events]))
    assert visible(events, W3.id) == [head + 1, head + 2]


def test_a_range_reaching_past_its_publication_cites_only_earlier_events() -> None:
    events = history()
    head = len(events)
    later = f"urn:uuid:00000000-0000-4000-8000-{head + 2:012d}"
    events.append(published(head + 1, head, head + 5, [events[head - 1]["eventId"], later]))
    events.append(granted(head + 2, W3.id, PACKAGE))  # its eventId is the "later" one
    events.append(granted(head + 3, "urn:mwp:agent:other", None))
    assert visible(events, W3.id) == [head, head + 1, head + 2, head + 3]


def test_a_malformed_publication_is_ignored() -> None:
    events = history()
    head = len(events)
    broken = published(head + 1, 1, head, [e["eventId"] for e in events])
    broken["payload"]["contextPackage"]["sourceEventRange"] = "everything"
    events.append(broken)
    events.append(granted(head + 2, W3.id, PACKAGE))
    assert visible(events, W3.id) == [head + 2]


def offered(sequence: int, agents: list[str], package_id: str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"offers": [{"agentId": a} for a in agents]}
    if package_id is not None:
        payload["contextPackageId"] = package_id
    return {
        "sequence": sequence,
        "eventId": f"urn:uuid:00000000-0000-4000-8000-{sequence:012d}",
        "kind": "work.offer.created",
        "payload": payload,
    }


def test_an_offer_naming_a_package_shows_it_to_its_live_candidates_only() -> None:
    """A member admitted after the offered WorkItem's contract (its visibility starting
    later) is shown the package an offer to it names; a candidate without a live Membership,
    and an offer naming no package, show nothing."""
    events = history()
    head = len(events)
    events.append(granted(head + 1, W3.id, None))  # a member from here on, no package
    events.append(published(head + 2, 1, head, [events[1]["eventId"]]))
    events.append(offered(head + 3, [W3.id, "urn:mwp:agent:nobody"], PACKAGE))
    assert visible(events, W3.id) == [2, head + 1, head + 2, head + 3]
    assert visible(events, "urn:mwp:agent:nobody") == []
    without = [*events[:-1], offered(head + 3, [W3.id], None)]
    assert visible(without, W3.id) == [head + 1, head + 2, head + 3]
