"""The Coordinator's process: its runtime through the gateway, and a Temporal Worker that runs
its functions as activities.

``mwp coordinator run MODULE:ATTR`` (or :func:`run_coordinator_worker`) connects to Temporal
(``address``/``namespace``: the agents' namespace, the Coordinator's own zone; it never
touches the authority namespace or the store) and serves the Coordinator's task queue
(``mwp-coordinator/<agent id>``) with the ``CoordinatorDecisionWorkflow`` and the
``run_handler`` activity, then runs :func:`~mwp.coordinator.runtime.run_coordinator`, whose
every call of a Coordinator function is one such decision. The activity runs in this process:
it reads Artifacts through the runtime's live gateway link.

Stopping (SIGINT, SIGTERM) lets a handler still running finish for up to ``GRACE``: its answer
is then recorded, and the next runtime reads it instead of calling the function again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from mwp.agent.gateway_link import GatewaySettings
from mwp.client import connect
from mwp.contracts.coordinator import DecisionPolicy, coordinator_task_queue
from mwp.contracts.dead_runtime import DECISION_WORKFLOW_CACHE
from mwp.coordinator.decisions import CurrentLink, Handlers, TemporalDecisions
from mwp.coordinator.declaration import Coordinator
from mwp.coordinator.runtime import CoordinatorRuntime, run_coordinator
from mwp.workers.plugin import MwpPlugin
from mwp.workers.tracing import active_interceptors

# How long a stopping runtime lets its running handlers finish before cancelling them.
GRACE = timedelta(seconds=5)


def build_coordinator_worker(
    client: Client, handlers: Handlers, *, task_queue: str | None = None
) -> Worker:
    """A Worker on the Coordinator's task queue (or ``task_queue``) hosting the decision
    workflow and the activity that runs ``handlers``."""
    from mwp.activities.coordinator import CoordinatorActivities
    from mwp.workflows.coordinator_decision import CoordinatorDecisionWorkflow

    activities = CoordinatorActivities(handlers)
    return Worker(
        client,
        task_queue=task_queue or coordinator_task_queue(handlers.coordinator.agent_id),
        workflows=[CoordinatorDecisionWorkflow],
        activities=[activities.run_handler],
        graceful_shutdown_timeout=GRACE,
        # No sticky queue for a killed runtime to leave their next tasks on.
        max_cached_workflows=DECISION_WORKFLOW_CACHE,
        plugins=[MwpPlugin()],
    )


async def run_coordinator_worker(
    coordinator: Coordinator,
    settings: GatewaySettings,
    state_dir: Path,
    stop: asyncio.Event,
    *,
    address: str,
    namespace: str,
    report: Callable[[str], None] = print,
    on_ready: Callable[[CoordinatorRuntime], None] | None = None,
    policy: DecisionPolicy | None = None,
) -> None:
    """Coordinate until ``stop``, each function call a decision workflow in ``namespace``."""
    client = (await connect(address, namespace, interceptors=active_interceptors())).temporal
    current = CurrentLink()
    handlers = Handlers(coordinator, current.download)
    queue = coordinator_task_queue(coordinator.agent_id)
    async with build_coordinator_worker(client, handlers, task_queue=queue):
        await run_coordinator(
            coordinator,
            settings,
            state_dir,
            stop,
            report=report,
            on_ready=on_ready,
            decisions=TemporalDecisions(client, queue),
            current=current,
            policy=policy,
        )
