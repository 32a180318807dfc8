"""Capability-specific performance records of Workers, derived from signed Group logs (spec 8,
MWP-IDN-004): pure, no I/O, rebuildable from the logs at any time.

A record belongs to one Worker (Agent ID) and one capability (``id@version``, each capability
the WorkItem's contract requires) and is never one score: for each outcome, the Events that
prove it, which anyone may check in the Group's log. :class:`PerformanceLedger` classifies a
Group's Events as they come, in Group order, keeping per WorkItem only what the outcomes need
(its capabilities, deadline, owner, whether a result is under review, who last lost it). An
Event already seen (by Event ID) changes nothing: replaying a log is idempotent.

The outcomes, and the Event that proves each one:

* ``completed``: ``work.result.accepted`` of the item it owned;
* ``failed``: ``work.failed`` while it owned the item (not a review, not a budget);
* ``changes_requested``: ``work.failed`` of its submitted result (the review rejected it);
* ``budget_exceeded``: ``work.failed`` with a budget failure code, or ``work.blocked`` whose
  required resolution says the budget is exhausted (:data:`BUDGET_EXHAUSTED`);
* ``deadline_missed``: ``ownership_expired`` for a missed start-by deadline, or
  ``work.submitted`` at or after the Work Contract's deadline;
* ``lease_expired``: ``ownership_expired`` because its Execution or blocked lease ran out;
* ``reassigned``: ``work.offer.created`` offering again an item it lost without completing it
  (its expired ownership fenced by the offer, or its failure before).

Each Event proves at most one outcome of one Worker. :func:`choose` is the default offer
policy over records: a candidate whose setbacks (every outcome but ``completed`` and
``reassigned``, which follows a setback) are at least two and outnumber its completions is
left out while another candidate is not; the rest are ordered by completions minus setbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mwp.core.group.clock import reached

CLAUSES: tuple[str, ...] = ("MWP-IDN-004",)

Json = dict[str, Any]

OUTCOMES: Final = (
    "completed",
    "failed",
    "changes_requested",
    "budget_exceeded",
    "deadline_missed",
    "lease_expired",
    "reassigned",
)
SETBACKS: Final = frozenset(OUTCOMES) - {"completed", "reassigned"}
# How the agent SDK words the required resolution of work blocked on an exhausted budget.
BUDGET_EXHAUSTED: Final = "budget exhausted"
OWNERSHIP_EXPIRED: Final = "ext.missionweaveprotocol.core.ownership_expired"
_EXPIRED = {
    "start_by_missed": "deadline_missed",
    "execution_lease_expired": "lease_expired",
    "blocked_lease_expired": "lease_expired",
}


@dataclass(frozen=True)
class Outcome:
    """One outcome of one Worker's work: the Event that proves it and where it lies."""

    agent_id: str
    capability: str
    outcome: str
    group_id: str
    sequence: int
    event_id: str


@dataclass
class _Item:
    capabilities: tuple[str, ...] = ()
    deadline: str | None = None
    owner: str | None = None
    submitted: bool = False
    lost_by: str | None = None  # who lost it without completing it, until it is offered again


def capabilities_of(contract: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The ``id@version`` of each capability ``contract`` requires."""
    required = (contract or {}).get("requiredCapabilities") or []
    return tuple(f"{c['id']}@{c['version']}" for c in required if isinstance(c, Mapping))


def budget_failure(code: object) -> bool:
    """Whether a failure code says a budget ran out (``TOOL_BUDGET_EXHAUSTED``, ...)."""
    return isinstance(code, str) and "BUDGET" in code


@dataclass
class _Group:
    items: dict[str, _Item] = field(default_factory=dict)


class PerformanceLedger:
    """Every Worker's outcomes, per capability, from the Group logs it is fed."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}
        self._seen: set[str] = set()
        self._records: dict[tuple[str, str], list[Outcome]] = {}

    def evolve(self, event: Mapping[str, Any]) -> list[Outcome]:
        """Take the next Event of its Group (Group order); the outcomes it proves."""
        event_id = str(event["eventId"])
        if event_id in self._seen:
            return []
        self._seen.add(event_id)
        work_item_id = event.get("workItemId")
        if not isinstance(work_item_id, str):
            return []
        group = self._groups.setdefault(str(event["groupId"]), _Group())
        found = _classify(group.items, work_item_id, event)
        if found is None:
            return []
        agent_id, outcome, item = found
        outcomes = [
            Outcome(agent_id, c, outcome, str(event["groupId"]), int(event["sequence"]), event_id)
            for c in item.capabilities
        ]
        for o in outcomes:
            self._records.setdefault((o.agent_id, o.capability), []).append(o)
        return outcomes

    def outcomes(self, agent_id: str, capability: str | None = None) -> list[Outcome]:
        """The Worker's outcomes (for one capability, or all), in the order they were seen."""
        if capability is not None:
            return list(self._records.get((agent_id, capability), ()))
        return [o for (a, _), found in self._records.items() if a == agent_id for o in found]

    def capabilities(self, agent_id: str) -> list[str]:
        return sorted(c for a, c in self._records if a == agent_id)


def _classify(
    items: dict[str, _Item], work_item_id: str, event: Mapping[str, Any]
) -> tuple[str, str, _Item] | None:
    """Evolve the item's tracker by ``event``; (Worker, outcome, item) if it proves one."""
    kind, payload = event["kind"], event.get("payload") or {}
    if kind == "work.authorized":
        contract = (payload.get("workItem") or {}).get("contract")
        items[work_item_id] = _Item(capabilities_of(contract), (contract or {}).get("deadline"))
        return None
    item = items.get(work_item_id)
    if item is None:  # an item authorized before this log's start, or no WorkItem
        return None
    rule = _RULES.get(kind)
    return rule(items, work_item_id, item, event, payload) if rule is not None else None


Found = tuple[str, str, _Item] | None


def _revised(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    contract = payload.get("contract")
    item.capabilities = capabilities_of(contract) or item.capabilities
    item.deadline = (contract or {}).get("deadline", item.deadline)
    return None


def _offered(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    fenced = (payload.get("fencedOwnership") or {}).get("agentId")
    lost_by = fenced if isinstance(fenced, str) else item.lost_by
    item.owner, item.lost_by, item.submitted = None, None, False
    return (lost_by, "reassigned", item) if lost_by else None


def _accepted(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    owner = (payload.get("owner") or {}).get("agentId")
    item.owner = owner if isinstance(owner, str) else None
    item.lost_by, item.submitted = None, False
    return None


def _submitted(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    item.submitted = True
    late = item.deadline is not None and reached(str(event["occurredAt"]), item.deadline)
    return (item.owner, "deadline_missed", item) if late and item.owner else None


def _completed(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    owner = item.owner
    del items[key]  # verified: it never changes again
    return (owner, "completed", item) if owner else None


def _failed(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    owner, submitted = item.owner, item.submitted
    item.owner, item.lost_by, item.submitted = None, owner, False
    if owner is None:  # failed before anyone owned it: no Worker's outcome
        return None
    if submitted:
        return owner, "changes_requested", item
    if budget_failure(payload.get("failureCode")):
        return owner, "budget_exceeded", item
    return owner, "failed", item


def _blocked(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    resolution = str(payload.get("requiredResolution") or "")
    if item.owner and resolution.startswith(BUDGET_EXHAUSTED):
        return item.owner, "budget_exceeded", item
    return None


def _expired(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    outcome, agent_id = _EXPIRED.get(str(payload.get("reason"))), payload.get("agentId")
    if outcome is None or not isinstance(agent_id, str):
        return None
    item.owner, item.lost_by = None, agent_id  # fenced: the next offer takes it away
    return agent_id, outcome, item


def _cancelled(items: dict[str, _Item], key: str, item: _Item, event: Any, payload: Json) -> Found:
    del items[key]  # the Coordinator's decision, no Worker's outcome
    return None


_RULES: Final[Mapping[str, Callable[[dict[str, _Item], str, _Item, Any, Json], Found]]] = {
    "work.contract.revised": _revised,
    "work.offer.created": _offered,
    "work.offer.accepted": _accepted,
    "work.submitted": _submitted,
    "work.result.accepted": _completed,
    "work.failed": _failed,
    "work.blocked": _blocked,
    OWNERSHIP_EXPIRED: _expired,
    "work.cancelled": _cancelled,
}


# --- the record as it is served, and the default offer policy ------------------------------


@dataclass(frozen=True)
class PerformanceRecord:
    """One Worker's record for one capability: per outcome, how many Events prove it and the
    IDs of those its reader may see (a reader may see fewer than the count)."""

    agent_id: str
    capability: str
    counts: Mapping[str, int]
    cited: Mapping[str, tuple[str, ...]]

    @property
    def setbacks(self) -> int:
        return sum(self.counts.get(o, 0) for o in SETBACKS)

    @property
    def balance(self) -> int:
        return self.counts.get("completed", 0) - self.setbacks

    @property
    def doubtful(self) -> bool:
        return self.setbacks >= 2 and self.setbacks > self.counts.get("completed", 0)

    def evidence(self, most: int) -> list[str]:
        """At most ``most`` cited Events: outcome by outcome (:data:`OUTCOMES` order), the
        latest of each."""
        if most <= 0:
            return []
        return [i for o in OUTCOMES for i in self.cited.get(o, ())[-most:]][:most]

    def to_json(self) -> Json:
        return {
            "agentId": self.agent_id,
            "capability": self.capability,
            "outcomes": {
                o: {"count": self.counts.get(o, 0), "eventIds": list(self.cited.get(o, ()))}
                for o in OUTCOMES
            },
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PerformanceRecord:
        outcomes = value.get("outcomes")
        if not isinstance(outcomes, Mapping):
            raise ValueError("a performance record has outcomes")
        counts, cited = {}, {}
        for outcome in OUTCOMES:
            entry = outcomes.get(outcome) or {}
            count, ids = entry.get("count", 0), entry.get("eventIds", [])
            if not isinstance(count, int) or count < 0 or not isinstance(ids, list):
                raise ValueError(f"a malformed {outcome} outcome")
            counts[outcome], cited[outcome] = count, tuple(str(i) for i in ids)
        return cls(str(value["agentId"]), str(value["capability"]), counts, cited)


def record_of(
    outcomes: Iterable[Outcome],
    agent_id: str,
    capability: str,
    visible: Callable[[Outcome], bool] = lambda _: True,
) -> PerformanceRecord:
    """The record of ``outcomes`` (one Worker's, one capability's): every outcome counted,
    only the ``visible`` ones cited, in the order they were recorded."""
    counts = dict.fromkeys(OUTCOMES, 0)
    cited: dict[str, list[str]] = {o: [] for o in OUTCOMES}
    for found in outcomes:
        counts[found.outcome] += 1
        if visible(found):
            cited[found.outcome].append(found.event_id)
    return PerformanceRecord(
        agent_id, capability, counts, {o: tuple(ids) for o, ids in cited.items()}
    )


def choose(candidates: Sequence[str], records: Mapping[str, PerformanceRecord]) -> list[str]:
    """The candidates to offer to, best record first (ties keep the given order): a doubtful
    record is left out while another candidate is not doubtful; no record is a zero record."""

    def doubtful(agent_id: str) -> bool:
        record = records.get(agent_id)
        return record is not None and record.doubtful

    def balance(agent_id: str) -> int:
        record = records.get(agent_id)
        return record.balance if record is not None else 0

    kept = [a for a in candidates if not doubtful(a)] or list(candidates)
    return sorted(kept, key=lambda a: -balance(a))
