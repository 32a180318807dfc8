"""A query that reaches a workflow while one of its workflow tasks runs waits in the server's
buffer for the task's end. The stack's server buffers more than one such query per workflow
(``history.MaxBufferedQueryCount``): at Temporal's default of one, the next query is refused
(``RESOURCE_EXHAUSTED``, "consistent query buffer is full"), and the client asks it again
only about a second later, which every HELLO to a busy Registry paid in the demo."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    PollWorkflowTaskQueueRequest,
    QueryWorkflowRequest,
    ResetStickyTaskQueueRequest,
)
from temporalio.service import RPCError, RPCStatusCode

from mwp.client import MwpClient
from tests.integration.conftest import authority_worker_on
from tests.integration.probe_workflows import QueryBufferProbe

QUERIES = 3  # asked together while the task is held


async def test_queries_asked_while_a_workflow_task_runs_wait_rather_than_being_refused(
    mwp_client: MwpClient,
) -> None:
    temporal = mwp_client.temporal
    workflow_id = f"query-buffer-{uuid.uuid4().hex[:8]}"
    async with authority_worker_on(mwp_client, [QueryBufferProbe]) as queue:
        handle = await temporal.start_workflow(
            QueryBufferProbe.run, id=workflow_id, task_queue=queue
        )
        assert await handle.query(QueryBufferProbe.pokes) == 0  # its first task is done
    execution = WorkflowExecution(workflow_id=workflow_id, run_id=handle.result_run_id or "")
    # The stopped worker's sticky queue released, the next task goes to the shared queue,
    # where it is taken here and held (started, never answered).
    await temporal.workflow_service.reset_sticky_task_queue(
        ResetStickyTaskQueueRequest(namespace=temporal.namespace, execution=execution)
    )
    await handle.signal(QueryBufferProbe.poke)
    held = await temporal.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(
            namespace=temporal.namespace, task_queue=TaskQueue(name=queue), identity="holder"
        )
    )
    assert held.task_token and held.workflow_execution.workflow_id == workflow_id
    request = QueryWorkflowRequest(
        namespace=temporal.namespace,
        execution=execution,
        query=WorkflowQuery(query_type="pokes"),
    )
    asked = [
        asyncio.create_task(
            temporal.workflow_service.query_workflow(
                request, retry=False, timeout=timedelta(seconds=30)
            )
        )
        for _ in range(QUERIES)
    ]
    try:
        # A refusal comes at once; buffered queries wait for the held task (they are not
        # answered while it is held).
        answered, waiting = await asyncio.wait(asked, timeout=2)
        errors = [task.exception() for task in answered]
        refused = [
            e
            for e in errors
            if isinstance(e, RPCError) and e.status is RPCStatusCode.RESOURCE_EXHAUSTED
        ]
        assert refused == []
        assert len(waiting) == QUERIES
    finally:
        for task in asked:
            task.cancel()
        await asyncio.gather(*asked, return_exceptions=True)
        await handle.terminate("the test is done")
