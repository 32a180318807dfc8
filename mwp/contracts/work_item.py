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
QUERY_REFUSED_MESSAGES = "refused_messages"
# The failure type a failed WorkItem's workflow ends with; its details hold the final view.
WORK_ITEM_FAILED = "WorkItemFailed"


@dataclass
class WorkItemInput:
    mission_workflow_id: str
    mission_id: str
    work_item_id: str
    view: dict[str, Any]  # the item's summary: workItemId, state, revision, ownershipEpoch
    timers: list[dict[str, str]] = field(default_factory=list)
    search_attributes: dict[str, str] = field(default_factory=dict)
    final: dict[str, Any] | None = None  # the full view, once the item settled
    # The binding that seals this child's transitions (mwp.contracts.messages), set by a
    # Mission run that seals them; None from a run before sealing, whose transitions are
    # taken as they come. Versioned by this input, not by a patch: no history before it
    # holds one, and opening a message issues no command.
    trusted_key: dict[str, Any] | None = None
    refusals: dict[str, Any] | None = None  # RefusalRecord JSON, kept across runs
    # Set by a Mission run that asks a cancelled item's child to cancel (so the Temporal UI
    # shows it Cancelled): the child waits for that request once its item is cancelled.
    cancel_follows: bool = False


def work_item_workflow_id(mission_id: str, work_item_id: str) -> str:
    return f"mwp-work-item/{mission_id}/{work_item_id}"
