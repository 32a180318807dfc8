"""The ``WorkItemWorkflow``'s contract: its ID, type, Signal and Query names and its input."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WORK_ITEM_WORKFLOW_TYPE = "WorkItemWorkflow"

# From its Mission: the item's newest summary, search attributes and timers (and, once the
# item settled, its full final view).
SIGNAL_TRANSITION = "transition"
QUERY_WORK_ITEM = "work_item"
QUERY_TIMERS = "timers"


@dataclass
class WorkItemInput:
    mission_workflow_id: str
    mission_id: str
    work_item_id: str
    view: dict[str, Any]  # the item's summary: workItemId, state, revision, ownershipEpoch
    timers: list[dict[str, str]] = field(default_factory=list)
    search_attributes: dict[str, str] = field(default_factory=dict)
    final: dict[str, Any] | None = None  # the full view, once the item settled


def work_item_workflow_id(mission_id: str, work_item_id: str) -> str:
    return f"mwp-work-item/{mission_id}/{work_item_id}"
