"""WorkItemWorkflow with one behaviour change (a short timer before its loop), made with and
without its patch, to show what the replay gate catches. Kept apart from the test modules so
the sandbox imports nothing but this file and the workflow."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from mwp.contracts.work_item import WorkItemInput
from mwp.workflows.work_item import WorkItemWorkflow

DEMO_PATCH = "test-only-timer-before-the-loop"


@workflow.defn(name="WorkItemWorkflow")
class ChangedWithoutPatch(WorkItemWorkflow):
    @workflow.run
    async def run(self, input: WorkItemInput) -> dict[str, Any]:
        await workflow.sleep(timedelta(milliseconds=1))  # a new command, unguarded
        return await super().run(input)


@workflow.defn(name="WorkItemWorkflow")
class ChangedBehindPatch(WorkItemWorkflow):
    @workflow.run
    async def run(self, input: WorkItemInput) -> dict[str, Any]:
        if workflow.patched(DEMO_PATCH):  # old histories take the old path
            await workflow.sleep(timedelta(milliseconds=1))
        return await super().run(input)
