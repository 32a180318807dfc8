"""The Coordinator's handler activity, hosted by the ``mwp coordinator run`` process.

``run_handler`` calls one of the Coordinator's functions for a ``CoordinatorDecisionWorkflow``
and returns its answer as JSON. It runs in the runtime's own process, on purpose: a review
reads the submitted Artifacts through the runtime's live gateway link (``CurrentLink``), the
Coordinator's only door to its Groups; nothing here reaches the store or the authority
namespace. It heartbeats while the function runs, so an attempt whose process died is tried
again (by the restarted runtime) once the heartbeat timeout passes. An answer of the wrong
type, or a decision for a function the Coordinator does not declare, fails at once
(``InvalidDecision``, not retried); any other error is retried as the decision's policy says.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mwp.contracts.coordinator import INVALID_DECISION, RUN_HANDLER, CoordinatorDecision
from mwp.coordinator.codec import InvalidAnswerError
from mwp.coordinator.decisions import Handlers, NoHandlerError

Json = dict[str, Any]


class CoordinatorActivities:
    """``run_handler`` for one Coordinator."""

    def __init__(self, handlers: Handlers) -> None:
        self.handlers = handlers

    @activity.defn(name=RUN_HANDLER)
    async def run_handler(self, decision: CoordinatorDecision) -> Json:
        if decision.coordinator_id != self.handlers.coordinator.agent_id:
            # Another Coordinator's decision on this queue: a misconfiguration, retried
            # until the right runtime serves it rather than answered with this one's functions.
            raise ApplicationError(f"this runtime runs {self.handlers.coordinator.agent_id}")
        beating = asyncio.create_task(_beat(decision.policy.heartbeat_seconds / 3))
        try:
            return await self.handlers.run(decision)
        except (InvalidAnswerError, NoHandlerError) as error:
            raise ApplicationError(str(error), type=INVALID_DECISION, non_retryable=True) from None
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating


async def _beat(every: float) -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)
