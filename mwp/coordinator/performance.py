"""The performance records a Coordinator's default offer selection rests on (spec 8,
MWP-IDN-004): the Registry's, served by the gateway, or, when the gateway serves none, its own.

The Registry keeps every Worker's records per capability from all the Organization's Group
logs (:mod:`mwp.gateway.performance`); the gateway answers a Coordinator with the count of
each outcome Organization-wide and the IDs of the Events it may see. Without that answer (an
older gateway, or none reachable) the runtime falls back on :class:`PerformanceRecords`, kept
from the logs of its own Groups with the same pure classifier
(:mod:`mwp.core.organization.performance`) and rebuilt on every connection.

Either way the offer is ordered by :func:`~mwp.core.organization.performance.choose`, and each
candidate's selection basis names the rule of the records used (:data:`REGISTRY_RULE` or
:data:`RULE`) and cites at most :data:`CITED` of its records' Events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mwp.core.organization.performance import PerformanceLedger, PerformanceRecord, record_of

CLAUSES: tuple[str, ...] = ("MWP-IDN-004",)

RULE: Final = "coordinator.performance-records"
REGISTRY_RULE: Final = "registry.performance-records"
CITED: Final = 20  # the Events cited per candidate


class PerformanceRecords:
    """The Coordinator's own records, from the Events of its Groups (each once, in order)."""

    def __init__(self) -> None:
        self.ledger = PerformanceLedger()

    def follow(self, event: Mapping[str, Any]) -> None:
        self.ledger.evolve(event)

    def record(self, agent_id: str, capability: str) -> PerformanceRecord:
        return record_of(self.ledger.outcomes(agent_id, capability), agent_id, capability)

    def records(self, candidates: Iterable[str], capability: str) -> dict[str, PerformanceRecord]:
        return {a: self.record(a, capability) for a in candidates}
