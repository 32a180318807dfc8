"""The tool activity: runs an Agent's registered tool once per idempotency key (MWP-WRK-031).

``ToolActivities(agent, ledger).run_tool(call)`` derives the key from the call's Mission,
WorkItem, Ownership Epoch and op ID (:meth:`mwp.contracts.agent.ToolCall.key`), never from the
activity ID or attempt, and runs the tool through :meth:`ToolLedger.run_once`: a recorded
result comes back without calling the tool; otherwise the tool runs (receiving the key as
``idempotency_key=`` when it accepts one) and its JSON result is recorded write-once.

While the tool runs, the activity heartbeats (when the caller set a heartbeat timeout), so a
worker that dies is noticed within that timeout and the call is retried on another worker.
A tool that raises is retried by Temporal under the caller's retry policy; a retry finds no
record and calls the tool again. Calls that cannot succeed fail as non-retryable.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mwp.agent.actions import accepts_idempotency_key
from mwp.agent.declaration import Agent
from mwp.agent.ledger import ToolLedger, ToolLedgerError
from mwp.contracts.agent import (
    INVALID_TOOL_CALL,
    RUN_TOOL,
    TOOL_RESULT_NOT_JSON,
    UNKNOWN_TOOL,
    ToolCall,
)


class ToolActivities:
    """The ``run_tool`` activity, bound to one Agent declaration and its tool ledger."""

    def __init__(self, agent: Agent, ledger: ToolLedger) -> None:
        self.agent = agent
        self.ledger = ledger

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, call: ToolCall) -> Any:
        """The tool's JSON result, recorded once under the call's idempotency key."""
        spec = self.agent.tools.get(call.tool)
        if spec is None:
            raise ApplicationError(
                f"no tool {call.tool!r} is declared by {self.agent.agent_id}",
                type=UNKNOWN_TOOL,
                non_retryable=True,
            )
        try:
            key = call.key()
        except ValueError as exc:
            raise ApplicationError(str(exc), type=INVALID_TOOL_CALL, non_retryable=True) from exc
        if not isinstance(call.args, list) or not isinstance(call.kwargs, dict):
            raise ApplicationError(
                "args must be a list and kwargs an object",
                type=INVALID_TOOL_CALL,
                non_retryable=True,
            )
        if "idempotency_key" in call.kwargs:
            raise ApplicationError(
                "kwargs may not name idempotency_key: the runtime derives it",
                type=INVALID_TOOL_CALL,
                non_retryable=True,
            )
        heartbeats = _start_heartbeats()
        try:
            return await self.ledger.run_once(
                key,
                spec.fn,
                *call.args,
                pass_key=accepts_idempotency_key(spec.fn),
                **call.kwargs,
            )
        except ToolLedgerError as exc:
            raise ApplicationError(str(exc), type=TOOL_RESULT_NOT_JSON, non_retryable=True) from exc
        finally:
            if heartbeats is not None:
                heartbeats.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeats


def _start_heartbeats() -> asyncio.Task[None] | None:
    """Heartbeat at a third of the heartbeat timeout while the tool runs (None: no timeout)."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return None
    interval = max(0.2, timeout.total_seconds() / 3)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    return asyncio.create_task(beat())
