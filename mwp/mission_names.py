"""What a Mission's Group Authority workflow is called and started with.

Shared by the workflows and the client SDK, so a client never imports workflow code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Well below Temporal's 2,000 Updates per run and its ~4,000-event suggestion.
DEFAULT_UPDATES_PER_RUN = 1_000


@dataclass
class MissionInput:
    organization_id: str
    authority: dict[str, str]  # the Group Authority service Principal (acceptedBy)
    snapshot: dict[str, Any] | None = None
    registry_notice: dict[str, Any] | None = None  # the newest RegistryNotice, as JSON
    updates_per_run: int = DEFAULT_UPDATES_PER_RUN
    run_number: int = 1
    # A child Mission's first run: the parent Group's ``mission.child.created`` Event.
    founding: dict[str, Any] | None = None


@dataclass
class TimerReport:
    work_item_id: str
    kind: str
    token: str


def mission_workflow_id(mission_id: str) -> str:
    return f"mwp-mission/{mission_id}"


def work_item_workflow_id(mission_id: str, work_item_id: str) -> str:
    return f"mwp-work-item/{mission_id}/{work_item_id}"
