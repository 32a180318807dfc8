"""A Coordinator's declaration: its identity and the plain async functions that coordinate.

>>> coordinator = Coordinator("urn:mwp:agent:planner", identity, card=card, workers=[writer_id])
>>> @coordinator.plan
... async def plan(ctx: PlanningContext) -> Plan:
...     return Plan([PlannedItem("draft", "Write the report"),
...                  PlannedItem("check", "Check the report", depends_on=["draft"])])
>>> @coordinator.review
... async def review(ctx: ReviewContext) -> Review:
...     return Review.accept() if ctx.evidence_covers_every_criterion else Review.reject("...")

The runtime (:mod:`mwp.coordinator.runtime`) calls ``plan`` once for a new Mission (and
``on_changes_requested`` when the MissionOwner sends it back), authorizes each planned item as
a WorkItem whose ID derives from the Mission and the item's key, offers it once its
dependencies are verified, calls ``review`` for each submitted result, and submits the Mission
for Approval once every item is verified. Without a ``review`` function, a result is accepted
when its Evidence covers every acceptance criterion and reports none failed.

>>> @coordinator.reuse
... async def reuse(ctx: ReuseContext) -> list[KnowledgeSource]:
...     return [KnowledgeSource(g["groupId"], a["contentHash"])
...             for g in ctx.catalog for a in g["artifacts"] if a["goal"].startswith("Fix")]

``reuse`` (optional) is called once per Mission: each Artifact of another Mission it names is
imported into the Mission's Group, under the Organization's Knowledge Reuse Policy, before the
Coordinator's own work needs it (spec 13.3; nothing crosses otherwise).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mwp.agent.declaration import Agent, AgentDeclarationError, CardInfo
from mwp.client import Identity
from mwp.core.wire.values import is_identifier, is_sha256_ref

Json = dict[str, Any]

DEFAULT_CAPABILITY = ("mwp.dev.general", "1.0.0")
# What a Coordinator's Agent Card declares: it coordinates, and takes no WorkItems itself.
COORDINATION = ("mwp.coordination", "1.0.0")
DEFAULT_CRITERIA = ("The deliverable meets its goal.",)
KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")


@dataclass(frozen=True)
class ChildMission:
    """A planned item run as a child Mission (spec 14) in its own Group: ``coordinator`` (an
    agent other than this Coordinator) coordinates it, this Coordinator is its MissionOwner and
    approves it once it is submitted, and that approval verifies the item. Its budget is the
    item's, its deadline the item's."""

    objective: str
    coordinator: str
    definition_of_done: Sequence[str] = ("The child Mission's objective is delivered.",)

    def __post_init__(self) -> None:
        if not self.objective.strip():
            raise AgentDeclarationError("a child Mission needs an objective")
        if not is_identifier(self.coordinator):
            raise AgentDeclarationError(
                f"a child Mission's coordinator is an agent ID, not {self.coordinator!r}"
            )
        if not self.definition_of_done:
            raise AgentDeclarationError("a child Mission needs a definition of done")


@dataclass(frozen=True)
class PlannedItem:
    """One WorkItem of a plan. ``key`` names it within the Mission (its WorkItem ID derives
    from it, so planning again never adds it twice); ``depends_on`` names other keys."""

    key: str
    goal: str
    criteria: Sequence[str] = DEFAULT_CRITERIA
    depends_on: Sequence[str] = ()
    capability: tuple[str, str] = DEFAULT_CAPABILITY
    # The WorkItem budget (budget-shaped; None: 10 USD and 100 tool calls).
    budget: Mapping[str, Any] | None = None
    # The agents it may be offered to, in order of preference (empty: the Coordinator's workers).
    candidates: Sequence[str] = ()
    deadline_hours: float = 24.0
    # Who else it is offered to once an owner lost it (lease expired, start missed).
    reassign_to: Sequence[str] = ()
    # Run as a child Mission instead of offered (``candidates`` and ``capability`` unused).
    child: ChildMission | None = None

    def __post_init__(self) -> None:
        if not self.key or len(self.key) > 64 or not set(self.key) <= KEY_CHARS:
            raise AgentDeclarationError(
                f"plan key {self.key!r}: 1 to 64 of lower-case letters, digits, '-', '_', '.'"
            )
        if not self.goal.strip():
            raise AgentDeclarationError(f"plan item {self.key!r} needs a goal")
        if not self.criteria:
            raise AgentDeclarationError(f"plan item {self.key!r} needs an acceptance criterion")


@dataclass(frozen=True)
class Plan:
    """WorkItems to authorize, in order; each key at most once, dependencies within the plan
    (or on items of an earlier plan of the same Mission)."""

    items: Sequence[PlannedItem]

    def __post_init__(self) -> None:
        keys = [item.key for item in self.items]
        if len(set(keys)) != len(keys):
            raise AgentDeclarationError("a plan names each key once")


@dataclass(frozen=True)
class Review:
    """The Coordinator's verdict on a submitted result."""

    accepted: bool
    comments: str = ""
    # Criteria that did not pass (a rejection; empty: those whose Evidence reports a failure).
    failed: Sequence[str] = ()

    @classmethod
    def accept(cls, comments: str = "Evidence reviewed.") -> Review:
        return cls(True, comments)

    @classmethod
    def reject(cls, reason: str, failed: Sequence[str] = ()) -> Review:
        if not reason.strip():
            raise ValueError("a rejection needs its reason")
        return cls(False, reason, tuple(failed))


@dataclass(frozen=True)
class PlanningContext:
    """What ``plan`` sees: the Mission view (objective, definitionOfDone, budget, deadline)."""

    mission: Json

    @property
    def objective(self) -> str:
        return str(self.mission.get("objective", ""))


@dataclass(frozen=True)
class ChangesContext:
    """What ``on_changes_requested`` sees: the Mission, the MissionOwner's reason, and the
    WorkItems so far (their views)."""

    mission: Json
    reason: str
    work_items: Sequence[Json]


@dataclass
class ReviewContext:
    """What ``review`` sees: the submitted WorkItem's view and its Evidence per criterion;
    ``artifact(hash)`` reads a submitted Artifact through the gateway (hash checked)."""

    mission: Json
    work_item: Json
    artifact: Callable[[str], Awaitable[bytes]]
    evidence: dict[str, list[Json]] = field(default_factory=dict)

    @property
    def evidence_covers_every_criterion(self) -> bool:
        """Every criterion has Evidence and none of it reports a failure."""
        return all(
            entries and all(e.get("result", "passed") == "passed" for e in entries)
            for entries in self.evidence.values()
        )

    @property
    def artifact_hashes(self) -> list[str]:
        return list((self.work_item.get("submission") or {}).get("artifactHashes", []))


@dataclass(frozen=True)
class ProposalContext:
    """What ``on_proposal`` sees: the Mission and one open Work Proposal (``proposalId``,
    ``proposedBy``, ``title``, ``details``: its goal, rationale and draft contract)."""

    mission: Json
    proposal: Json


@dataclass(frozen=True)
class KnowledgeSource:
    """An Artifact of another Mission to import: the Group it was published in and its content
    hash. The Organization's Knowledge Reuse Policy decides whether it may cross."""

    group_id: str
    content_hash: str

    def __post_init__(self) -> None:
        if not is_identifier(self.group_id):
            raise AgentDeclarationError(
                f"a knowledge source names its Group, not {self.group_id!r}"
            )
        if not is_sha256_ref(self.content_hash):
            raise AgentDeclarationError(
                f"a knowledge source names a sha256: content hash, not {self.content_hash!r}"
            )


@dataclass(frozen=True)
class ReuseContext:
    """What ``reuse`` sees: the Mission, and what this Coordinator knows of the Organization's
    other Missions it coordinates: per Group its ``groupId``, ``missionId``, ``objective`` and
    the ``artifacts`` published there (``contentHash``, ``artifactId``, ``classification``,
    ``workItemId`` and its WorkItem's ``goal``). Their content stays where it is."""

    mission: Json
    catalog: Sequence[Json] = ()


@dataclass(frozen=True)
class MessageContext:
    """What ``on_message`` sees: the Mission and a Message another Member posted (a
    clarification, say): its ``message`` document, ``text``, and the WorkItem whose
    Conversation it is in (None in the planning Conversation)."""

    mission: Json
    message: Json
    work_item: Json | None

    @property
    def text(self) -> str:
        return "\n".join(
            str(c.get("text", ""))
            for c in self.message.get("content", [])
            if c.get("type") == "text"
        )


PlanFn = Callable[[PlanningContext], Awaitable[Plan]]
ReviewFn = Callable[[ReviewContext], Awaitable[Review]]
ChangesFn = Callable[[ChangesContext], Awaitable[Plan]]
ProposalFn = Callable[[ProposalContext], Awaitable[PlannedItem | None]]
MessageFn = Callable[[MessageContext], Awaitable[str | None]]
ReuseFn = Callable[[ReuseContext], Awaitable[Sequence[KnowledgeSource]]]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


async def _coordinates_only(ctx: Any) -> Any:
    raise RuntimeError("a Coordinator takes no WorkItems: offer them to its Workers")


def _async(fn: Any, what: str) -> None:
    if not inspect.iscoroutinefunction(fn):
        raise AgentDeclarationError(f"{what} {getattr(fn, '__name__', fn)!r} must be async def")


class Coordinator:
    """A Coordinator Agent: its ID, signing identity and card (as :class:`~mwp.agent.Agent`),
    the Workers it offers to by default, and its coordinating functions."""

    def __init__(
        self,
        agent_id: str,
        identity: Identity,
        *,
        card: CardInfo,
        workers: Sequence[str] = (),
        lease_seconds: int = 3600,
    ) -> None:
        self.agent = Agent(agent_id, identity, card=card)
        self.agent.capability(*COORDINATION)(_coordinates_only)
        self.workers = tuple(workers)
        self.lease_seconds = lease_seconds
        self.planner: PlanFn | None = None
        self.reviewer: ReviewFn | None = None
        self.replanner: ChangesFn | None = None
        self.proposals: ProposalFn | None = None
        self.answerer: MessageFn | None = None
        self.reuser: ReuseFn | None = None

    @property
    def agent_id(self) -> str:
        return self.agent.agent_id

    @property
    def identity(self) -> Identity:
        return self.agent.identity

    def __repr__(self) -> str:
        return f"Coordinator({self.agent_id})"

    def plan(self, fn: PlanFn) -> PlanFn:
        """Register ``async def plan(ctx: PlanningContext) -> Plan``: a new Mission's WorkItems."""
        _async(fn, "plan")
        self.planner = fn
        return fn

    def review(self, fn: ReviewFn) -> ReviewFn:
        """Register ``async def review(ctx: ReviewContext) -> Review`` for submitted results."""
        _async(fn, "review")
        self.reviewer = fn
        return fn

    def on_proposal(self, fn: ProposalFn) -> ProposalFn:
        """Register ``async def decide(ctx: ProposalContext) -> PlannedItem | None``: a
        Worker's Work Proposal becomes that WorkItem (authorized citing the proposal), or
        stays open (None; without this function every proposal stays open)."""
        _async(fn, "on_proposal")
        self.proposals = fn
        return fn

    def on_message(self, fn: MessageFn) -> MessageFn:
        """Register ``async def answer(ctx: MessageContext) -> str | None``: the reply, posted
        in the same Conversation citing the Message (None: no reply). Each Message is
        answered once, even across restarts."""
        _async(fn, "on_message")
        self.answerer = fn
        return fn

    def on_changes_requested(self, fn: ChangesFn) -> ChangesFn:
        """Register ``async def replan(ctx: ChangesContext) -> Plan``: the WorkItems that answer
        the MissionOwner's change request (none: the same result is submitted again)."""
        _async(fn, "on_changes_requested")
        self.replanner = fn
        return fn

    def reuse(self, fn: ReuseFn) -> ReuseFn:
        """Register ``async def reuse(ctx: ReuseContext) -> Sequence[KnowledgeSource]``: the
        Artifacts of other Missions a new Mission imports (called once per Mission; empty:
        none). Each is imported once, with the approval the gateway's Knowledge Reuse Policy
        gives; one the policy refuses is reported and left out."""
        _async(fn, "reuse")
        self.reuser = fn
        return fn
