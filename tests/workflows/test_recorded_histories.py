"""Every recorded history of every release replays against the current workflow code."""

from __future__ import annotations

import pytest

from tests.histories import RecordedHistory, production_replayer, recorded_histories

RECORDED = recorded_histories()


def test_each_workflow_type_has_recorded_histories() -> None:
    recorded = {r.workflow_type for r in RECORDED}
    assert {
        "MissionWorkflow",
        "WorkItemWorkflow",
        "OrganizationRegistryWorkflow",
        "AgentWorkflow",
        "CoordinatorDecisionWorkflow",
    } <= recorded


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda r: f"{r.release}/{r.name}")
async def test_a_recorded_history_replays(recorded: RecordedHistory) -> None:
    await production_replayer().replay_workflow(recorded.history)
