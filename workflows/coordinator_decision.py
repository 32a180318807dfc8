"""CoordinatorDecisionWorkflow: one decision of a Coordinator, one call of one of its handlers.

The Coordinator runtime starts it in the agents' namespace on the Coordinator's own task queue
(``mwp.contracts.coordinator``), under a workflow ID derived from the decision's Group,
Coordinator, Coordinator Epoch, handler and idempotency key. It runs the handler once as the
``run_handler`` activity (hosted by the runtime's process), retried by the decision's policy,
and completes with the handler's answer as JSON. A runtime that asks for the same decision
again (restarted while the handler ran, or before it applied the answer) reaches this
workflow and reads its result instead of calling the handler a second time.

Deterministic: it only schedules the activity; the answer is never interpreted here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from mwp.contracts.coordinator import (
    DECISION_WORKFLOW_TYPE,
    INVALID_DECISION,
    RUN_HANDLER,
    CoordinatorDecision,
)

Json = dict[str, Any]

MAXIMUM_RETRY_INTERVAL = timedelta(minutes=1)


@workflow.defn(name=DECISION_WORKFLOW_TYPE)
class CoordinatorDecisionWorkflow:
    @workflow.run
    async def run(self, decision: CoordinatorDecision) -> Json:
        policy = decision.policy
        answer: Json = await workflow.execute_activity(
            RUN_HANDLER,
            decision,
            result_type=dict,
            task_queue=workflow.info().task_queue,
            start_to_close_timeout=timedelta(seconds=policy.attempt_seconds),
            heartbeat_timeout=timedelta(seconds=policy.heartbeat_seconds),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=policy.first_retry_seconds),
                backoff_coefficient=2.0,
                maximum_interval=MAXIMUM_RETRY_INTERVAL,
                maximum_attempts=policy.attempts,
                non_retryable_error_types=[INVALID_DECISION],
            ),
            summary=f"{decision.handler} {decision.key}",
        )
        return answer
