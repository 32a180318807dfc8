"""How a decision workflow is started: a workflow task that a killed runtime took is given to
the next runtime after ``DECISION_TASK_TIMEOUT``, not Temporal's default of 10 s (the
restarted runtime waits for that decision, every Group with it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from temporalio.client import Client

from mwp.contracts.coordinator import PLAN, CoordinatorDecision
from mwp.contracts.dead_runtime import DECISION_TASK_TIMEOUT
from mwp.coordinator.decisions import TemporalDecisions


class Handle:
    async def result(self) -> dict[str, Any]:
        return {"items": []}


class StartingClient:
    """Records how each workflow was started."""

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    async def start_workflow(self, *args: Any, **options: Any) -> Handle:
        self.started.append(options)
        return Handle()


async def test_a_decision_gives_up_on_a_workflow_task_of_a_dead_worker_within_seconds() -> None:
    client = StartingClient()
    decisions = TemporalDecisions(cast(Client, client), "mwp-coordinator/urn:mwp:agent:lead")
    decision = CoordinatorDecision("urn:uuid:g", "urn:mwp:agent:lead", 1, PLAN, "m", {})
    assert await decisions.decide(decision) == {"items": []}
    (options,) = client.started
    assert options["task_timeout"] == DECISION_TASK_TIMEOUT
    assert timedelta(seconds=3) >= DECISION_TASK_TIMEOUT
