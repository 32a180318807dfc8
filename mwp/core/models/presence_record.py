"""The Presence Record: an Agent's session liveness, capacity and capability availability."""

from __future__ import annotations

from typing import Literal

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    CapabilityRef,
    Identifier,
    PositiveInteger,
    SafeInteger,
    Timestamp,
)


class Capacity(WireModel):
    max_slots: PositiveInteger
    active_slots: SafeInteger
    available_slots: SafeInteger
    queued_items: SafeInteger


class CapabilityAvailability(WireModel):
    capability: CapabilityRef
    status: Literal["available", "degraded", "unavailable"]


class PresenceRecord(WireModel):
    agent_id: Identifier
    session_epoch: PositiveInteger
    status: Literal["online", "busy", "away", "draining", "offline"]
    capacity: Capacity
    capability_availability: list[CapabilityAvailability]
    estimated_response_ms: SafeInteger | None = None
    last_heartbeat: Timestamp
    expires_at: Timestamp
