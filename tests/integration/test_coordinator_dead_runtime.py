"""A Coordinator runtime killed (SIGKILL) while a decision's handler runs: the next runtime,
asking for the same decision, attaches to it and gets an answer within seconds, its own
worker running the handler's next attempt (``mwp.contracts.dead_runtime``). The proof of
concept's restarted Coordinator once idled 30 s so, every Group it coordinates with it."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import uuid
from typing import Any

from mwp.client import MwpClient, connect
from mwp.contracts.coordinator import PLAN, CoordinatorDecision, coordinator_task_queue
from mwp.coordinator.decisions import TemporalDecisions
from mwp.dev.stack import ensure_namespace
from mwp.workers.coordinator import build_coordinator_worker
from tests.integration.conftest import stack_address
from tests.integration.gateway_agents import AGENTS_NAMESPACE

# The runtime that dies: the Coordinator's worker, whose handler says it runs and never ends.
DYING = """
import asyncio, sys
from mwp.client import connect
from mwp.workers.coordinator import build_coordinator_worker

class Declared:
    agent_id = sys.argv[3]

class Hanging:
    coordinator = Declared()

    async def run(self, decision):
        print("running", flush=True)
        await asyncio.Event().wait()

async def main():
    client = (await connect(sys.argv[1], sys.argv[2])).temporal
    async with build_coordinator_worker(client, Hanging(), task_queue=sys.argv[4]):
        await asyncio.Event().wait()

asyncio.run(main())
"""


class Declared:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id


class Answering:
    """The restarted runtime's handlers: they answer at once."""

    def __init__(self, agent_id: str) -> None:
        self.coordinator = Declared(agent_id)
        self.calls = 0

    async def run(self, decision: CoordinatorDecision) -> dict[str, Any]:
        self.calls += 1
        return {"answeredBy": "the restarted runtime"}


async def test_a_decision_whose_runtime_was_killed_mid_handler_is_answered_within_seconds(
    mwp_client: MwpClient,
) -> None:
    agents = (await connect(stack_address(), AGENTS_NAMESPACE)).temporal
    await ensure_namespace(agents.service_client, AGENTS_NAMESPACE)
    agent_id = f"urn:mwp:agent:killed-{uuid.uuid4().hex[:8]}"
    queue = coordinator_task_queue(agent_id)
    decision = CoordinatorDecision(f"urn:uuid:{uuid.uuid4()}", agent_id, 1, PLAN, "mission", {})
    argv = [sys.executable, "-c", DYING, stack_address(), AGENTS_NAMESPACE, agent_id, queue]
    dying = subprocess.Popen(argv, stdout=subprocess.PIPE)
    asked = asyncio.create_task(TemporalDecisions(agents, queue).decide(decision))
    try:
        assert dying.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(dying.stdout.readline), 60)
        assert line.strip() == b"running"
    finally:
        dying.kill()
        dying.wait()
    killed_at = time.monotonic()
    asked.cancel()  # the dead runtime's wait ended with it
    with contextlib.suppress(asyncio.CancelledError):
        await asked
    handlers = Answering(agent_id)
    async with build_coordinator_worker(agents, handlers, task_queue=queue):  # type: ignore[arg-type]
        answer = await asyncio.wait_for(TemporalDecisions(agents, queue).decide(decision), 60)
    waited = time.monotonic() - killed_at
    assert answer == {"answeredBy": "the restarted runtime"}
    assert handlers.calls == 1
    # The heartbeat timeout, the first retry interval and the tasks' round trips; 31 s with
    # the heartbeat timeout of before, 2 s more with a sticky queue left behind.
    assert waited < 8.0, f"the restarted runtime waited {waited:.1f} s"
