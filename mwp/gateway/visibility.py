"""Which Events of a Group an Agent may receive: a Membership timeline evolved from the log.

Pure and incremental: :meth:`MembershipTimeline.evolve` takes the Group's Events in sequence
order (the same signed Events the gateway delivers) and keeps, per member, the spans of Group
sequences its Memberships cover. Only ``membership.changed`` and ``membership.ended`` change a
Membership (every grant of the Group Authority, offers' provisional Membership, acceptance,
MissionOwner and Coordinator included, is one of them, carrying the whole Membership object),
so the timeline needs nothing else of the Group's state.

A span opens when an Event leaves a member with a live (provisional or active) Membership and
starts at that Membership's ``visibilityStartSequence``: a Worker's starts at its admission, a
MissionOwner's or Coordinator's at 0 (complete visibility, spec 8), whenever it was granted. A
span closes at the Event that ends the Membership, inclusive, so a removed member receives its
removal and nothing after it. A re-admitted member gets a new span from its new visibility start;
the Events between its end and its re-admission stay withheld (MWP-MSN-012).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-EVT-009")

MEMBERSHIP_KINDS = frozenset({"membership.changed", "membership.ended"})


@dataclass
class Span:
    """Group sequences ``first``..``last`` (inclusive; ``last`` None while the Membership lives)."""

    first: int
    last: int | None = None

    def covers(self, sequence: int) -> bool:
        return self.first <= sequence and (self.last is None or sequence <= self.last)


class MembershipTimeline:
    """The visibility spans of every member of one Group, through :attr:`sequence`."""

    def __init__(self) -> None:
        self.sequence = 0
        self._spans: dict[str, list[Span]] = {}
        self._live: dict[str, tuple[str, str]] = {}  # member: (role, state) while it lives

    def evolve(self, event: Mapping[str, Any]) -> None:
        """Apply the next Event of the Group (sequence order, no gaps)."""
        sequence = int(event["sequence"])
        if sequence != self.sequence + 1:
            raise ValueError(f"Event {sequence} does not follow {self.sequence}")
        self.sequence = sequence
        if event["kind"] not in MEMBERSHIP_KINDS:
            return
        membership = event["payload"]["membership"]
        member = str(membership["member"]["id"])
        spans = self._spans.setdefault(member, [])
        current = spans[-1] if spans and spans[-1].last is None else None
        if membership["state"] == "ended":
            self._live.pop(member, None)
            if current is not None:
                current.last = sequence
            return
        self._live[member] = (str(membership.get("role", "")), str(membership["state"]))
        start = int(membership["visibilityStartSequence"])
        if current is None:
            spans.append(Span(start))
        elif start < current.first:  # promoted to a role that sees more history
            current.first = start

    def may_see(self, member: str, sequence: int) -> bool:
        """Whether ``member``'s Memberships cover Event ``sequence`` (at most :attr:`sequence`)."""
        return any(span.covers(sequence) for span in self._spans.get(member, ()))

    def membership(self, member: str) -> tuple[str, str] | None:
        """The role and state (``provisional`` or ``active``) of ``member``'s live Membership
        at :attr:`sequence`; None when it has none."""
        return self._live.get(member)

    def ever_member(self, member: str) -> bool:
        """Whether ``member`` ever held a Membership in this Group (through :attr:`sequence`)."""
        return bool(self._spans.get(member))

    def ended_at(self, member: str) -> int | None:
        """The Event that ended ``member``'s last Membership; None while one lives (or none
        ever did)."""
        spans = self._spans.get(member)
        return spans[-1].last if spans else None
