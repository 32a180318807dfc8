"""A workflow that calls agent tools in order, for the tool-call tests (sandboxed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mwp.contracts.agent import ToolCall
    from mwp.workflows.tool_calls import call_tool


@dataclass
class ToolCallsInput:
    agent_task_queue: str
    calls: list[ToolCall] = field(default_factory=list)
    heartbeat_seconds: float = 30.0


@workflow.defn
class ToolCallsProbe:
    @workflow.run
    async def run(self, request: ToolCallsInput) -> list[Any]:
        results = []
        for call in request.calls:
            results.append(
                await call_tool(
                    request.agent_task_queue,
                    call,
                    heartbeat_timeout=timedelta(seconds=request.heartbeat_seconds),
                )
            )
        return results
