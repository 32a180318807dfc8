"""One line per run of a capability, printed by the agent worker process as its outcome is known.

    writer: work item ab12cd34 of mission 9f8e7d6c submitted (3.1 s)
    writer: work item ab12cd34 of mission 9f8e7d6c failed: CAPABILITY_ERROR after 2 attempt(s)

The line is written where the run happens, by a Temporal activity interceptor around the
``run_capability`` activity: it has the run's order (Mission and WorkItem), its outcome as
returned, and its duration, with no query of the AgentWorkflow's bounded ``status``. Every
other activity (tools, acceptances, disclosures) passes silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from mwp.contracts.agent import RUN_CAPABILITY, ExecutionOrder, ExecutionOutcome


def short(identifier: str) -> str:
    """8 characters of an ID's last part (``urn:uuid:ab12cd34-…`` → ``ab12cd34``)."""
    return identifier.rsplit(":", 1)[-1][:8]


def agent_name(agent_id: str) -> str:
    """``urn:mwp:agent:writer`` → ``writer``."""
    return agent_id.rsplit(":", 1)[-1]


def outcome_line(
    name: str, order: ExecutionOrder, outcome: ExecutionOutcome, seconds: float
) -> str:
    """The line for one run of ``order`` by the agent ``name`` that ended with ``outcome``."""
    subject = f"{name}: work item {short(order.work_item_id)} of mission {short(order.mission_id)}"
    return f"{subject} {_what(outcome)} ({_cost(outcome.detail, seconds)})"


def crash_line(name: str, order: ExecutionOrder, error: BaseException, attempt: int) -> str:
    """The line for a run whose activity raised (Temporal retries it; the lease may lapse)."""
    subject = f"{name}: work item {short(order.work_item_id)} of mission {short(order.mission_id)}"
    return f"{subject} crashed (attempt {attempt}): {type(error).__name__}: {error}"[:300]


def _what(outcome: ExecutionOutcome) -> str:
    detail = outcome.detail
    refusal = detail.get("refusal") or {}
    said = f"{refusal['code']} {refusal.get('message', '')}".strip() if refusal else ""
    match outcome.status:
        case "submitted":
            return "submitted"
        case "preempted":
            return "preempted at a checkpoint"
        case "failed":
            return f"failed: {detail.get('failure')} after {detail.get('attempts')} attempt(s)"
        case "fenced":
            late = "; late result kept for audit" if detail.get("lateResult") else ""
            return f"fenced: {said or detail.get('failure') or 'lease lost'}{late}"
        case "blocked":
            return f"blocked: {detail.get('resolution')}"
        case "not_started":
            return f"not started: {said or detail.get('reason', '')}"
    return outcome.status


def _cost(detail: dict[str, Any], seconds: float) -> str:
    calls = detail.get("toolCalls")
    return f"{seconds:.1f} s" if calls is None else f"{calls} tool calls, {seconds:.1f} s"


class RunLines(Interceptor):
    """Prints :func:`outcome_line` (or :func:`crash_line`) through ``emit`` for each run."""

    def __init__(self, name: str, emit: Callable[[str], None]) -> None:
        self.name = name
        self.emit = emit

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RunLinesInbound(next, self)


class _RunLinesInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, lines: RunLines) -> None:
        super().__init__(next)
        self.lines = lines

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if activity.info().activity_type != RUN_CAPABILITY:
            return await self.next.execute_activity(input)
        (order,) = input.args
        started = time.monotonic()
        try:
            outcome = await self.next.execute_activity(input)
        except Exception as error:
            self.lines.emit(crash_line(self.lines.name, order, error, activity.info().attempt))
            raise
        self.lines.emit(outcome_line(self.lines.name, order, outcome, time.monotonic() - started))
        return outcome
