"""The Coordinator side's contract: one decision of a Coordinator's handler, the workflow that
takes it and the activity that runs the handler (pure: shared with workflow code).

A :class:`CoordinatorDecision` names one call of one of the Coordinator's functions (``plan``,
``review``, ``on_proposal``, ``on_message``, ``on_changes_requested``, ``reuse``) by what makes
it that call and no other: the Group, the Coordinator, the Coordinator Epoch it is taken under,
the handler and the step's own idempotency key (the Mission for ``plan`` and ``reuse``; the
changes-request Approval, the proposal, the submission, the Message for the others). Its
workflow ID derives from those five, so asking for the same decision again (a restarted
runtime) reaches the same workflow and its result, never a second call; a new Coordinator
Epoch is a new decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from mwp.contracts.agent import agent_task_queue
from mwp.contracts.dead_runtime import DECISION_HEARTBEAT_SECONDS
from mwp.core.group.ids import derive_id

Json = dict[str, Any]

DECISION_WORKFLOW_TYPE: Final = "CoordinatorDecisionWorkflow"
# The activity that runs one handler, on the Coordinator's own task queue.
RUN_HANDLER: Final = "mwp.coordinator.run_handler"
COORDINATOR_TASK_QUEUE_PREFIX: Final = "mwp-coordinator/"
DECISION_WORKFLOW_PREFIX: Final = "mwp-coordinator-decision/"

# The handlers, by the names of the decorators that register them.
PLAN: Final = "plan"
REVIEW: Final = "review"
ON_PROPOSAL: Final = "on_proposal"
ON_MESSAGE: Final = "on_message"
ON_CHANGES_REQUESTED: Final = "on_changes_requested"
REUSE: Final = "reuse"
HANDLERS: Final = frozenset({PLAN, REVIEW, ON_PROPOSAL, ON_MESSAGE, ON_CHANGES_REQUESTED, REUSE})

# A handler's answer that no retry can fix (not the type its decorator promises): the
# activity fails with this type, which the retry policy does not retry.
INVALID_DECISION: Final = "InvalidDecision"


def coordinator_task_queue(agent_id: str) -> str:
    """The task queue of a Coordinator's decisions: ``mwp-coordinator/<agent id>``."""
    return agent_task_queue(agent_id, COORDINATOR_TASK_QUEUE_PREFIX)


@dataclass
class DecisionPolicy:
    """How a decision's handler is run: attempts (the first included), the wait before the
    first retry (doubling up to a minute), each attempt's time limit, and the heartbeat
    timeout after which an attempt whose process died is tried again (short: a restarted
    runtime waits for it, see :mod:`mwp.contracts.dead_runtime`)."""

    attempts: int = 3
    first_retry_seconds: float = 1.0
    attempt_seconds: float = 600.0
    heartbeat_seconds: float = DECISION_HEARTBEAT_SECONDS


@dataclass
class CoordinatorDecision:
    """One handler call (the decision workflow's and the handler activity's input).
    ``context`` is what the handler sees, as JSON (``mwp.coordinator.codec``)."""

    group_id: str
    coordinator_id: str
    coordinator_epoch: int
    handler: str
    key: str
    context: Json
    policy: DecisionPolicy = field(default_factory=DecisionPolicy)

    def __post_init__(self) -> None:
        if self.handler not in HANDLERS:
            raise ValueError(f"no Coordinator handler is named {self.handler!r}")

    @property
    def workflow_id(self) -> str:
        return decision_workflow_id(
            self.group_id, self.coordinator_id, self.coordinator_epoch, self.handler, self.key
        )


def decision_workflow_id(
    group_id: str, coordinator_id: str, coordinator_epoch: int, handler: str, key: str
) -> str:
    """``mwp-coordinator-decision/<handler>/<a UUID derived from all five>``."""
    derived = derive_id(
        group_id, "coordinator-decision", coordinator_id, coordinator_epoch, handler, key
    )
    return f"{DECISION_WORKFLOW_PREFIX}{handler}/{derived}"
