"""A Worker configured by the plugin completes its workflow tasks under the product's build ID
(`mwp.workers.build_id`), which the workflow's history records."""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType

from mwp.client import MwpClient
from mwp.workers.build_id import build_id
from tests.integration.conftest import authority_worker_on
from tests.integration.tool_workflows import ToolCallsInput, ToolCallsProbe


async def test_the_history_names_the_build_id_the_plugin_gave(mwp_client: MwpClient) -> None:
    async with authority_worker_on(mwp_client, [ToolCallsProbe]) as queue:
        handle = await mwp_client.temporal.start_workflow(
            ToolCallsProbe.run,
            ToolCallsInput(agent_task_queue=queue),
            id=f"build-id-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
        assert await handle.result() == []
    history = await handle.fetch_history()
    completed = [
        str(event.workflow_task_completed_event_attributes)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]
    assert completed
    assert all(build_id() in attributes for attributes in completed), completed
