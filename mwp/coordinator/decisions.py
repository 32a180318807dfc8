"""How the Coordinator runtime gets a decision: one call of one of the Coordinator's handlers.

:class:`TemporalDecisions` (what ``mwp coordinator run`` uses) runs each decision as a
``CoordinatorDecisionWorkflow`` in the agents' namespace, on the Coordinator's own task queue,
whose workflow ID derives from the decision (``mwp.contracts.coordinator``). Starting it again
reaches the same workflow: a running one is attached to (ID conflict policy ``USE_EXISTING``)
and a completed one's result is read (reuse policy ``ALLOW_DUPLICATE_FAILED_ONLY`` refuses a
second run of it), so a runtime restarted while a handler ran, or before it applied the
answer, gets the first answer back and the handler is not called a second time. Only a
decision that failed (every attempt its policy allows), was terminated or timed out is run
again, as a new run of the same workflow, when the runtime next asks for it.

:class:`InProcessDecisions` calls the handler in the runtime's own task, nothing durable: for
tests of the runtime's steps against the pure Group Authority.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError

from mwp.agent.gateway_link import GatewayLink
from mwp.contracts.coordinator import DECISION_WORKFLOW_TYPE, CoordinatorDecision
from mwp.contracts.dead_runtime import DECISION_TASK_TIMEOUT
from mwp.coordinator import codec
from mwp.coordinator.declaration import Coordinator

Json = dict[str, Any]


class CurrentLink:
    """The runtime's live gateway link (replaced on every reconnection), through which a
    handler reads Artifacts (``ReviewContext.artifact``)."""

    def __init__(self) -> None:
        self.link: GatewayLink | None = None

    async def download(self, group_id: str, digest: str) -> bytes:
        link = self.link
        if link is None or link.closed.is_set():
            # Raised inside the handler: the attempt fails and is retried once reconnected.
            raise ConnectionError("the gateway link is down; the Artifact cannot be read now")
        return await link.download(group_id, digest)


class NoHandlerError(LookupError):
    """The decision names a function the Coordinator does not declare."""


class Handlers:
    """Runs one decision's handler of ``coordinator``: its context built from JSON, its
    answer checked and turned into JSON (:mod:`mwp.coordinator.codec`)."""

    def __init__(
        self, coordinator: Coordinator, download: Callable[[str, str], Awaitable[bytes]]
    ) -> None:
        self.coordinator = coordinator
        self._download = download

    def function(self, handler: str) -> Callable[[Any], Awaitable[Any]]:
        c = self.coordinator
        functions: dict[str, Callable[[Any], Awaitable[Any]] | None] = {
            "plan": c.planner,
            "review": c.reviewer,
            "on_proposal": c.proposals,
            "on_message": c.answerer,
            "on_changes_requested": c.replanner,
            "reuse": c.reuser,
        }
        fn = functions.get(handler)
        if fn is None:
            raise NoHandlerError(f"{c.agent_id} declares no {handler} function")
        return fn

    async def run(self, decision: CoordinatorDecision) -> Json:
        fn = self.function(decision.handler)

        async def artifact(digest: str) -> bytes:
            return await self._download(decision.group_id, digest)

        context = codec.context_of(decision.handler, decision.context, artifact)
        return codec.answer_json(decision.handler, await fn(context))


class DecisionFailedError(Exception):
    """Every attempt at a decision failed (or it was terminated): nothing of it is applied."""

    def __init__(self, decision: CoordinatorDecision, cause: str) -> None:
        super().__init__(f"{decision.handler} failed: {cause}")
        self.decision = decision
        self.cause = cause


class Decisions(Protocol):
    async def decide(self, decision: CoordinatorDecision) -> Json:
        """The handler's answer (JSON) for ``decision``, or :class:`DecisionFailedError`."""
        ...


class InProcessDecisions:
    """Calls the handler at once in the caller's task (tests of the runtime's steps)."""

    def __init__(self, handlers: Handlers) -> None:
        self.handlers = handlers

    async def decide(self, decision: CoordinatorDecision) -> Json:
        try:
            return await self.handlers.run(decision)
        except Exception as error:
            raise DecisionFailedError(decision, f"{type(error).__name__}: {error}") from error


class TemporalDecisions:
    """Each decision a ``CoordinatorDecisionWorkflow`` on ``task_queue`` of ``client``'s
    namespace (the agents'), started or attached to by its derived ID."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    async def decide(self, decision: CoordinatorDecision) -> Json:
        try:
            handle = await self.client.start_workflow(
                DECISION_WORKFLOW_TYPE,
                decision,
                id=decision.workflow_id,
                task_queue=self.task_queue,
                result_type=dict,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"{decision.handler} ({decision.key})",
                task_timeout=DECISION_TASK_TIMEOUT,  # a task a dead runtime took: not 10 s
            )
        except WorkflowAlreadyStartedError:
            # Completed before: its answer stands (the latest run of the ID is that one).
            handle = self.client.get_workflow_handle(decision.workflow_id, result_type=dict)
        try:
            answer: Json = await handle.result()
        except WorkflowFailureError as failure:
            raise DecisionFailedError(decision, _cause(failure)) from failure
        return answer


def _cause(failure: WorkflowFailureError) -> str:
    """The handler's own error, under the workflow's and the activity's wrappers."""
    error: BaseException | None = failure.cause
    while isinstance(error, ActivityError) and error.cause is not None:
        error = error.cause
    if isinstance(error, ApplicationError):
        return f"{error.type or 'Error'}: {error.message}"
    return str(error) if error is not None else "failed"
