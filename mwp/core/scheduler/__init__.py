"""The Worker-owned Scheduler core (MWP-WRK-005, 008 to 012, 015): pure and deterministic.

No I/O, no Temporal, no clock, no randomness: the AgentWorkflow feeds it each Group's accepted
Events and the current time, and acts on what it returns. See docs/scheduler.md.
"""

from mwp.core.scheduler.admission import (
    AdmissionDecision,
    Admitted,
    AgentProfile,
    Declined,
    DeclineReason,
    GroupPolicy,
)
from mwp.core.scheduler.disclosure import CapacityStatus, ScheduleDisclosure
from mwp.core.scheduler.fairness import StrideFairness, starvation_bound
from mwp.core.scheduler.group_queue import Change, GroupQueue
from mwp.core.scheduler.model import Phase, SideEffectRisk, Terms, Urgency
from mwp.core.scheduler.scheduler import Dispatch, Scheduler
from mwp.core.scheduler.slots import ExecutionSlot, SlotContext

__all__ = [
    "AdmissionDecision",
    "Admitted",
    "AgentProfile",
    "CapacityStatus",
    "Change",
    "DeclineReason",
    "Declined",
    "Dispatch",
    "ExecutionSlot",
    "GroupPolicy",
    "GroupQueue",
    "Phase",
    "ScheduleDisclosure",
    "Scheduler",
    "SideEffectRisk",
    "SlotContext",
    "StrideFairness",
    "Terms",
    "Urgency",
    "starvation_bound",
]
