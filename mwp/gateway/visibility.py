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

A Context Package is the one way to see before a visibility start (MWP-MSN-012, MWP-WRK-027):
when a ``membership.changed`` grants a member a Membership whose ``contextPackageId`` names a
package published earlier in the Group (a :data:`CONTEXT_PACKAGE_PUBLISHED` Event), the member
may also see that publication Event and each Event the package cites: an ``eventId`` of its
``sourceEventRange`` whose sequence lies within the range's ``fromSequence..toSequence``. The
same holds for a live member that an offer names as a candidate when the offer (its
``work.offer.created`` Event) names a package published earlier: a member admitted after the
offered WorkItem was authorized learns its contract as a newcomer does. Events shown that
way lie before the member's feed position, so they are retrieved one by one
(:meth:`~mwp.gateway.artifacts.ArtifactGate.cited_events`), not delivered again. The
cited IDs are resolved when the package is published, against the Events already applied (a
package can only cite earlier Events), so the timeline keeps per package only the sequences it
cites, not an index of every Event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-EVT-009", "MWP-WRK-027")

MEMBERSHIP_KINDS = frozenset({"membership.changed", "membership.ended"})
CONTEXT_PACKAGE_PUBLISHED: Final = "ext.missionweaveprotocol.core.context_package_published"
OFFER_CREATED: Final = "work.offer.created"

# The eventId of an Event already applied, by sequence (None: not known).
EventIdOf = Callable[[int], str | None]


@dataclass
class Span:
    """Group sequences ``first``..``last`` (inclusive; ``last`` None while the Membership lives)."""

    first: int
    last: int | None = None

    def covers(self, sequence: int) -> bool:
        return self.first <= sequence and (self.last is None or sequence <= self.last)


@dataclass(frozen=True)
class _Package:
    """A published Context Package: its publication Event and the earlier Events it cites."""

    published_at: int
    cited: frozenset[int]


class MembershipTimeline:
    """The visibility spans of every member of one Group, through :attr:`sequence`.

    ``event_id_of`` looks up the eventId of an Event already applied (a reader that holds the
    Events passes its own lookup); without it the timeline records the IDs itself.
    """

    def __init__(self, event_id_of: EventIdOf | None = None) -> None:
        self.sequence = 0
        self._spans: dict[str, list[Span]] = {}
        self._live: dict[str, tuple[str, str]] = {}  # member: (role, state) while it lives
        self._packages: dict[str, _Package] = {}  # contextPackageId: the first publication
        self._cited: dict[str, set[int]] = {}  # member: sequences its Context Packages show
        self._own_ids: list[str | None] | None = None if event_id_of is not None else []
        self._event_id_of = event_id_of if event_id_of is not None else self._recorded_id

    def _recorded_id(self, sequence: int) -> str | None:
        assert self._own_ids is not None
        return self._own_ids[sequence - 1] if 0 < sequence <= len(self._own_ids) else None

    def evolve(self, event: Mapping[str, Any]) -> None:
        """Apply the next Event of the Group (sequence order, no gaps)."""
        sequence = int(event["sequence"])
        if sequence != self.sequence + 1:
            raise ValueError(f"Event {sequence} does not follow {self.sequence}")
        self.sequence = sequence
        kind = event["kind"]
        if kind == CONTEXT_PACKAGE_PUBLISHED:
            self._published(sequence, event.get("payload"))
        elif kind == OFFER_CREATED:
            self._offered(event.get("payload"))
        if self._own_ids is not None:
            event_id = event.get("eventId")
            self._own_ids.append(event_id if isinstance(event_id, str) else None)
        if kind not in MEMBERSHIP_KINDS:
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
        self._show(member, membership.get("contextPackageId"))  # published before the grant
        start = int(membership["visibilityStartSequence"])
        if current is None:
            spans.append(Span(start))
        elif start < current.first:  # promoted to a role that sees more history
            current.first = start

    def _show(self, member: str, package_id: object) -> None:
        """``member`` may see what the package ``package_id`` shows, if it was published."""
        package = self._packages.get(str(package_id))
        if package is not None:
            cited = self._cited.setdefault(member, set())
            cited.add(package.published_at)
            cited.update(package.cited)

    def _offered(self, payload: object) -> None:
        """An offer naming a package shows it to each of its live candidates: a member
        admitted after the offered WorkItem's contract learns it as a newcomer does."""
        if not isinstance(payload, Mapping):
            return
        for offer in payload.get("offers") or ():
            agent_id = offer.get("agentId") if isinstance(offer, Mapping) else None
            if isinstance(agent_id, str) and agent_id in self._live:
                self._show(agent_id, payload.get("contextPackageId"))

    def _published(self, sequence: int, payload: object) -> None:
        """Record a Context Package published at ``sequence``: the earlier Events it cites."""
        package = payload.get("contextPackage") if isinstance(payload, Mapping) else None
        if not isinstance(package, Mapping):
            return
        package_id, span = package.get("contextPackageId"), package.get("sourceEventRange")
        if not isinstance(package_id, str) or package_id in self._packages:
            return  # a later publication under the same ID changes nothing granted by it
        if not isinstance(span, Mapping):
            return
        first, last, ids = span.get("fromSequence"), span.get("toSequence"), span.get("eventIds")
        if not (isinstance(first, int) and isinstance(last, int) and isinstance(ids, list)):
            return
        wanted = {i for i in ids if isinstance(i, str)}
        cited = frozenset(
            n
            for n in range(max(first, 1), min(last, sequence - 1) + 1)
            if self._event_id_of(n) in wanted
        )
        self._packages[package_id] = _Package(sequence, cited)

    def may_see(self, member: str, sequence: int) -> bool:
        """Whether ``member``'s Memberships cover Event ``sequence`` (at most :attr:`sequence`),
        or a Context Package of its Memberships shows it."""
        if sequence in self._cited.get(member, ()):
            return True
        return any(span.covers(sequence) for span in self._spans.get(member, ()))

    def cited_by(self, package_id: str) -> frozenset[int] | None:
        """The sequences the Context Package ``package_id`` cites; None: not published here."""
        package = self._packages.get(package_id)
        return None if package is None else package.cited

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
