"""The Worker's Scheduler on Temporal is blind to Mission content (MWP-WRK-028): an agent
runtime served through a real gateway takes an item of a Mission whose goal is confidential to
submission, and nothing its AgentWorkflow answers (queues, status with its admission
decisions and run outcomes, Cursors) or was handed (its history: every delivered batch)
holds the goal or any other text of the contract."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from temporalio.client import WorkflowHistory

from mwp.client import MwpClient, connect
from mwp.contracts.agent import QUERY_CURSORS, QUERY_QUEUES, QUERY_STATUS
from mwp.core.scheduler.model import TERMS_MEMBERS
from mwp.dev.stack import BackgroundStack
from tests.integration.gateway_agents import AGENTS_NAMESPACE, scheduler_of
from tests.integration.test_agent_gateway import effects as effects  # the runtime's tool folder
from tests.integration.test_agent_gateway import reached, served_by_gateway_agent


async def test_the_agent_workflow_holds_no_text_of_a_confidential_contract(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    goal = f"Confidential: the merger terms {uuid.uuid4().hex}"
    async with served_by_gateway_agent(mwp_client, temporal_stack, tmp_path) as served:
        rig, agent = served.rig, served.agent
        item = await rig.authorize(goal)
        await rig.offer(item, agent.identity)
        await reached(rig, item, "submitted")
        scheduler = scheduler_of(
            await connect(temporal_stack.address, AGENTS_NAMESPACE), agent.agent_id
        )
        answers = {
            query: await scheduler.query(query)
            for query in (QUERY_QUEUES, QUERY_STATUS, QUERY_CURSORS)
        }
        history = _payload_text(await scheduler.fetch_history())

    # The contract's own text: every string member but the terms a Scheduler reads.
    texts = {
        k: v for k, v in item.contract.items() if isinstance(v, str) and k not in TERMS_MEMBERS
    }
    assert goal in texts.values()
    status = answers[QUERY_STATUS]
    assert "admitted" in [d.get("decision") for d in status["decisions"]]
    assert {o["status"] for o in status["outcomes"]} == {"submitted"}
    seen = json.dumps(answers)
    assert item.work_item_id in seen  # it did hold the item
    assert item.work_item_id in history
    for name, text in texts.items():
        assert text not in seen, name
        assert text not in history, name


def _payload_text(history: WorkflowHistory) -> str:
    """Every payload the workflow was signalled with, decoded: what it was handed."""
    texts = []
    for event in history.events:
        if event.HasField("workflow_execution_signaled_event_attributes"):
            payloads = event.workflow_execution_signaled_event_attributes.input.payloads
            texts += [p.data.decode("utf-8") for p in payloads]
    return "\n".join(texts)
