"""Schedule disclosure for one WorkItem of one Group (MWP-WRK-012).

The estimate is computed only from this Group's own queue, the Agent's declared slots and
policy, and *aggregates* of the rest (total runnable weight, free slots, total queue length).
Its type has no member that could carry another Group's name, content, assignment or queue
position: IDs of the asking Group and item, timestamps, a number and an enum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mwp.core.scheduler.clock import seconds, timestamp

CLAUSES: tuple[str, ...] = ("MWP-WRK-012",)


class CapacityStatus(StrEnum):
    AVAILABLE = "available"  # a slot is free for this Group now
    QUEUED = "queued"  # waiting its fair turn
    CONSTRAINED = "constrained"  # the Group is at its quota or the Agent's queues are filling
    BLOCKED = "blocked"  # waiting on a blocker, dependencies or an approval, not on capacity


@dataclass(frozen=True, slots=True)
class ScheduleDisclosure:
    group_id: str
    work_item_id: str
    earliest_start: str
    latest_start: str
    estimated_completion: str
    confidence: float
    capacity_status: CapacityStatus
    computed_at: str

    def schedule_estimate(self) -> dict[str, Any]:
        """The WorkItem ``scheduleEstimate`` shape (the committed, i.e. latest, start)."""
        return {
            "estimatedStart": self.latest_start,
            "estimatedCompletion": self.estimated_completion,
            "confidence": self.confidence,
            "capacityStatus": self.capacity_status.value,
            "lastCalculatedAt": self.computed_at,
        }


@dataclass(frozen=True, slots=True)
class Load:
    """Everything an estimate may know beyond the asking Group: counts and sums only."""

    slots: int
    free_slots: int
    runnable_weight: int  # sum of weights of runnable Groups, the asking one included
    queued_total: int
    queue_bound: int
    mean_duration: int  # the Agent's own declared mean, never another Group's contract


def estimate(
    *,
    group_id: str,
    work_item_id: str,
    now: int,
    ahead: int,
    duration: int,
    weight: int,
    quota: int,
    running: int,
    waiting_on: str | None,
    load: Load,
) -> ScheduleDisclosure:
    """Start window from the Group's own backlog ``ahead`` of the item: at best the Group gets
    every slot its quota allows; at worst only its weighted share (which the fairness
    guarantees)."""
    best_slots = min(quota, load.slots)
    fair_slots = min(quota, load.slots * weight / max(load.runnable_weight, weight))
    immediate = waiting_on is None and ahead == 0 and load.free_slots > 0 and running < quota
    if immediate:
        earliest = latest = now
    else:
        earliest = now + math.ceil(ahead * load.mean_duration / best_slots)
        latest = now + math.ceil((ahead + 1) * load.mean_duration / fair_slots)
    if waiting_on is not None:
        status, confidence = CapacityStatus.BLOCKED, 0.2
    elif immediate:
        status, confidence = CapacityStatus.AVAILABLE, 0.9
    elif running >= quota or 2 * load.queued_total >= load.queue_bound:
        status, confidence = CapacityStatus.CONSTRAINED, 0.5
    else:
        status, confidence = CapacityStatus.QUEUED, 0.7 if ahead < load.slots else 0.5
    return ScheduleDisclosure(
        group_id=group_id,
        work_item_id=work_item_id,
        earliest_start=timestamp(earliest),
        latest_start=timestamp(latest),
        estimated_completion=timestamp(latest + duration),
        confidence=confidence,
        capacity_status=status,
        computed_at=timestamp(now),
    )


def recorded(
    group_id: str, work_item_id: str, estimate: dict[str, Any] | None
) -> ScheduleDisclosure | None:
    """The disclosure behind a ``scheduleEstimate`` the Group recorded (None without one), so
    a Scheduler rebuilt from the log does not publish again what the Group already has."""
    if estimate is None:
        return None
    return ScheduleDisclosure(
        group_id=group_id,
        work_item_id=work_item_id,
        earliest_start=estimate["estimatedStart"],
        latest_start=estimate["estimatedStart"],
        estimated_completion=estimate["estimatedCompletion"],
        confidence=float(estimate["confidence"]),
        capacity_status=CapacityStatus(estimate["capacityStatus"]),
        computed_at=estimate["lastCalculatedAt"],
    )


# An item's estimate is published again at most once a minute: work that takes seconds would
# otherwise announce every shift of a queue that drains faster than anyone reads it.
MIN_REPUBLISH_SECONDS = 60


def material(previous: ScheduleDisclosure | None, current: ScheduleDisclosure, now: int) -> bool:
    """Worth publishing again: first time; or, a minute or more after the last publication, a
    new status or a start moved by over 10% of the remaining wait (at least five minutes)."""
    if previous is None:
        return True
    if now - seconds(previous.computed_at) < MIN_REPUBLISH_SECONDS:
        return False
    if previous.capacity_status is not current.capacity_status:
        return True
    before, after = seconds(previous.latest_start), seconds(current.latest_start)
    return abs(after - before) > max(300, (after - now) // 10)
