"""Capability-specific performance records of Workers, kept by a Coordinator from the signed
logs it reads, apart from Agent Cards (spec 8, MWP-IDN-004's kind of record; pure, no I/O).

Per Worker and capability (``id@version``, the WorkItem's first required capability), the IDs
of the Events that recorded each outcome of that Worker's work: ``completed`` (its result
accepted), ``failed`` (the item failed while it owned it), ``lease_expired`` (its Execution
Lease ran out), ``start_missed`` (it accepted and never started in time). Never one score:
each outcome stays a list of Events anyone can check in the Group log.

The Coordinator's default offer uses them: candidates with more failures and expiries than
completions (at least two) are left out while another candidate is not, the rest are offered
best record first, and each candidate's selection basis cites its records' Events
(``reliabilityEvidence``) and the policy rule that ordered it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mwp.core.group.execution_lease import OWNERSHIP_EXPIRED_KIND

Json = dict[str, Any]

OUTCOMES: Final = ("completed", "failed", "lease_expired", "start_missed")
RULE: Final = "coordinator.performance-records"
CITED: Final = 20  # the most recent Events cited per candidate
_EXPIRY = {"execution_lease_expired": "lease_expired", "start_by_missed": "start_missed"}


def capability_of(view: Mapping[str, Any]) -> str | None:
    required = (view.get("contract") or {}).get("requiredCapabilities") or []
    return f"{required[0]['id']}@{required[0]['version']}" if required else None


@dataclass
class PerformanceRecords:
    # (agent ID, capability) -> (outcome, Event ID), in the order they were seen
    records: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)

    def observe(self, event: Mapping[str, Any], before: Mapping[str, Any] | None) -> None:
        """Note ``event``'s outcome; ``before`` is its WorkItem's view before the Event."""
        if before is None:
            return
        kind, payload = event["kind"], event.get("payload") or {}
        owner = (before.get("owner") or {}).get("agentId")
        if kind == "work.result.accepted" and owner:
            outcome, agent = "completed", owner
        elif kind == "work.failed" and owner and before.get("state") != "open":
            outcome, agent = "failed", owner
        elif kind == OWNERSHIP_EXPIRED_KIND and payload.get("reason") in _EXPIRY:
            outcome, agent = _EXPIRY[payload["reason"]], payload.get("agentId")
        else:
            return
        capability = capability_of(before)
        if agent and capability:
            entry = self.records.setdefault((agent, capability), [])
            entry.append((outcome, str(event["eventId"])))

    def record(self, agent_id: str, capability: str) -> dict[str, int]:
        entry = self.records.get((agent_id, capability), [])
        return {o: sum(1 for seen, _ in entry if seen == o) for o in OUTCOMES}

    def _balance(self, agent_id: str, capability: str) -> int:
        r = self.record(agent_id, capability)
        return r["completed"] - r["failed"] - r["lease_expired"] - r["start_missed"]

    def _doubtful(self, agent_id: str, capability: str) -> bool:
        r = self.record(agent_id, capability)
        bad = r["failed"] + r["lease_expired"] + r["start_missed"]
        return bad >= 2 and bad > r["completed"]

    def choose(self, candidates: Sequence[str], capability: str) -> list[str]:
        """The candidates to offer to, best record first (ties keep the given order)."""
        kept = [a for a in candidates if not self._doubtful(a, capability)] or list(candidates)
        return sorted(kept, key=lambda a: -self._balance(a, capability))

    def evidence(self, agent_id: str, capability: str) -> list[str]:
        """The Events of the candidate's record, most recent last, at most CITED."""
        return [event_id for _, event_id in self.records.get((agent_id, capability), [])][-CITED:]
