"""Admission control at acceptance (MWP-WRK-005): accept only a credible commitment; every
decline names one structured reason and machine-readable details."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mwp.core.scheduler.disclosure import ScheduleDisclosure
from mwp.core.scheduler.model import Entry, SideEffectRisk

CLAUSES: tuple[str, ...] = ("MWP-WRK-005",)


class DeclineReason(StrEnum):
    CAPACITY = "capacity"  # queue bounds: the Agent's or the Group's
    CONCURRENCY = "concurrency"  # no slot may serve this Group now (draining, quota zero)
    CAPABILITY = "capability"
    DEADLINE = "deadline"
    AUTHORIZATION = "authorization"
    DEPENDENCY = "dependency"
    BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class Declined:
    reason: DeclineReason
    details: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Admitted:
    disclosure: ScheduleDisclosure


AdmissionDecision = Admitted | Declined


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """The Agent's own declarations: its Agent Card and runtime limits."""

    agent_id: str
    card_version: int
    capabilities: Mapping[str, frozenset[str]]  # capability ID -> versions served
    slots: int  # the Agent Card's maximum concurrency
    queue_bound: int = 10_000  # queued items over all Groups
    mean_duration: int = 600
    max_risk: SideEffectRisk = SideEffectRisk.EXTERNAL
    authorized_groups: frozenset[str] | None = None  # None: any Group it is a member of
    # The Agent's own cost estimate per capability, in Work Contract budget members.
    cost_estimates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    """Set by Organization policy or the MissionOwner, never by a Coordinator."""

    weight: int = 1
    quota: int | None = None  # concurrent slots for this Group; None: all slots
    queue_bound: int = 1_000


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("+", 1)[0].split("-", 1)[0].split("."))


def check_static(profile: AgentProfile, group_id: str, entry: Entry) -> Declined | None:
    """Authorization, capability and budget: what does not depend on the queues."""
    offer, terms = entry.offer, entry.terms
    assert offer is not None
    if profile.authorized_groups is not None and group_id not in profile.authorized_groups:
        return Declined(DeclineReason.AUTHORIZATION, {"rule": "group_not_authorized"})
    if not offer.selection_basis.get("authorizationEligible", False):
        return Declined(DeclineReason.AUTHORIZATION, {"rule": "not_eligible"})
    if terms.risk.rank > profile.max_risk.rank:
        return Declined(
            DeclineReason.AUTHORIZATION,
            {"rule": "side_effect_risk", "risk": terms.risk.value, "max": profile.max_risk.value},
        )
    if offer.agent_card_version != profile.card_version:
        return Declined(
            DeclineReason.CAPABILITY,
            {"cardVersion": profile.card_version, "offered": offer.agent_card_version},
        )
    pins = {p["id"]: p["version"] for p in offer.selection_basis.get("verifiedMatches", [])}
    missing = []
    for cap_id, required in terms.capabilities:
        served = profile.capabilities.get(cap_id, frozenset())
        pinned = pins.get(cap_id)
        # A pin must name a version the card serves; without one any compatible version will do.
        ok = (
            pinned in served and _version(pinned) >= _version(required)
            if pinned is not None
            else any(
                _version(v)[0] == _version(required)[0] and _version(v) >= _version(required)
                for v in served
            )
        )
        if not ok:
            missing.append(cap_id)
    if missing:
        return Declined(DeclineReason.CAPABILITY, {"missing": sorted(missing)})
    cost: dict[str, float] = {}
    for cap_id, _ in terms.capabilities:
        for member, value in profile.cost_estimates.get(cap_id, {}).items():
            cost[member] = cost.get(member, 0.0) + value
    over = sorted(m for m, v in cost.items() if m in terms.budget and v > terms.budget[m])
    if over:
        return Declined(DeclineReason.BUDGET, {"exceeded": over})
    return None
