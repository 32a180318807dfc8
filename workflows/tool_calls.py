"""Workflow-side tool calls: schedule a registered tool on its agent's task queue.

Import this from workflow code (it does no I/O). ``await call_tool(queue, call)`` runs the
``run_tool`` activity of the agent worker on ``queue``; the worker derives the idempotency key
from the call's Mission, WorkItem, Ownership Epoch and op ID and returns the recorded result
if there is one, so retrying, re-running after a crash or calling again with the same op ID
returns the same result without a second effect.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from mwp.contracts.agent import NON_RETRYABLE_TOOL_ERRORS, RUN_TOOL, ToolCall

# Retries with exponential backoff; a call that cannot succeed (unknown tool, invalid call,
# a result that is not JSON) fails at once. Callers bound the whole call with
# ``schedule_to_close_timeout`` (for example the Work Contract's deadline).
DEFAULT_TOOL_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=10,
    non_retryable_error_types=list(NON_RETRYABLE_TOOL_ERRORS),
)
DEFAULT_START_TO_CLOSE = timedelta(minutes=10)
# The worker heartbeats while the tool runs: a killed worker is noticed within this.
DEFAULT_HEARTBEAT = timedelta(seconds=30)


async def call_tool(
    agent_task_queue: str,
    call: ToolCall,
    *,
    start_to_close_timeout: timedelta = DEFAULT_START_TO_CLOSE,
    heartbeat_timeout: timedelta | None = DEFAULT_HEARTBEAT,
    schedule_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
) -> Any:
    """Run ``call`` on the agent worker of ``agent_task_queue``; its JSON result."""
    return await workflow.execute_activity(
        RUN_TOOL,
        call,
        task_queue=agent_task_queue,
        start_to_close_timeout=start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        schedule_to_close_timeout=schedule_to_close_timeout,
        retry_policy=retry_policy or DEFAULT_TOOL_RETRY_POLICY,
        summary=f"{call.tool} {call.op_id}",
    )
