"""What a dead runtime held of its AgentWorkflow, given back at once (:func:`release_held_work`,
called by a starting runtime before its worker polls).

A runtime SIGKILLed while its worker held one of the AgentWorkflow's workflow tasks tells
Temporal nothing: the task stays started until its timeout (Temporal's 10 s; a cold replay of a
long AgentWorkflow takes seconds, so it cannot be much shorter), and the restarted runtime idles
that long (the demo's tester, in about one run in six). A runtime starts only when no other
serves the agent (or with ``--replace``, which fences it), so a task started when it starts is
held by a process that is gone or about to be fenced. The workflow is reset to its last
completed task: a new run, the same state, every signal received since applied again
(Temporal's reset), the held task's work done over by the new worker, and its activities
scheduled anew. Whatever the lost task had begun is safe to do again: an acceptance is
answered once, a run of the old Session does not start, and deliveries apply only where they
follow the Cursor.

So with the workflow's activity tasks: an attempt such a process had taken (a run of a
capability, an owner Command) stays started until its heartbeat or start-to-close timeout, a
run's as long as its Execution Lease (60 s by default; in one demo run the tester's queued test
waited that long after its restart). Each such attempt is failed, so Temporal makes the next
one at once, in the new process: a run signed under the old Session does not start there and
its item is queued again, and an owner Command is answered once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState, PendingWorkflowTaskState
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import (
    ResetWorkflowExecutionRequest,
    RespondActivityTaskFailedByIdRequest,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from mwp.contracts.agent import agent_workflow_id

log = logging.getLogger(__name__)


async def release_held_work(client: Client, agent_id: str) -> None:
    """Give back what a runtime that is gone held of the agent's AgentWorkflow: a started
    workflow task (the workflow is reset), else started activity attempts (each failed). Call
    it before this process's worker polls."""
    workflow_id = agent_workflow_id(agent_id)
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:  # its first start
            return
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return
    raw = described.raw_description
    if (
        raw.HasField("pending_workflow_task")
        and raw.pending_workflow_task.state
        == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED
        and await _reset(client, agent_id, described.run_id or "")
    ):
        return
    await _fail_started_attempts(client, agent_id, described.run_id or "", raw.pending_activities)


async def _reset(client: Client, agent_id: str, run_id: str) -> bool:
    """Reset the run to its last completed workflow task; False if it has none (the held task
    is the run's first: it can only time out)."""
    workflow_id = agent_workflow_id(agent_id)
    completed = [
        event.event_id
        async for event in client.get_workflow_handle(
            workflow_id, run_id=run_id
        ).fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]
    if not completed:
        return False
    answer = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            reason="a workflow task held by a runtime that is gone",
            workflow_task_finish_event_id=completed[-1],
            request_id=str(uuid.uuid4()),
        )
    )
    log.warning(
        "%s: its AgentWorkflow's task was held by a runtime that is gone; reset to event %d "
        "(run %s)",
        agent_id,
        completed[-1],
        answer.run_id,
    )
    return True


HELD_BY_THE_GONE = "an attempt held by a runtime that is gone"


async def _fail_started_attempts(
    client: Client, agent_id: str, run_id: str, pending: Iterable[PendingActivityInfo]
) -> None:
    workflow_id = agent_workflow_id(agent_id)
    released = []
    for activity in pending:
        if activity.state != PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
            continue
        try:
            await client.workflow_service.respond_activity_task_failed_by_id(
                RespondActivityTaskFailedByIdRequest(
                    namespace=client.namespace,
                    workflow_id=workflow_id,
                    run_id=run_id,
                    activity_id=activity.activity_id,
                    failure=Failure(
                        message=HELD_BY_THE_GONE,
                        application_failure_info=ApplicationFailureInfo(type="HeldByTheGone"),
                    ),
                    identity=client.identity,
                )
            )
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:  # it ended meanwhile
                continue
            raise
        released.append(activity.activity_id)
    if released:
        log.warning(
            "%s: %d activity attempts were held by a runtime that is gone; failed, to be "
            "made again here (%s)",
            agent_id,
            len(released),
            ", ".join(released),
        )
