"""The floor under offer -> accepted: the Temporal hops and durable writes an offer takes in
this design, with no protocol work at all.

Run: ``.venv/bin/python -m benchmarks.offer_floor`` (about half a minute). It starts the
embedded stack (the dev server, the authority and agents namespaces) and sends ``--offers``
offers one at a time, each through the same hops as a real offer, each hop doing nothing else:

1. an ``offer`` Update to a ``BenchGroupWorkflow`` (the MissionWorkflow's place), answered at
   once; beside the handler, its outbox loop runs a ``mirror`` activity on the authority task
   queue, which writes one object to a folder store (as the mirror appends a log entry) and
   hands the offer to the "gateway" (an in-process queue: the mirror's hint);
2. the "gateway and inbox" write one journal object (as the agent's inbox journals an Event
   before it signals) and signal the agent's ``BenchAgentWorkflow`` (the AgentWorkflow's
   place) in the agents namespace;
3. its signal handler records the offer and its loop runs an ``accept`` activity on the agent's
   task queue, which sends the ``accept`` Update to the Group workflow.

"offer -> accepted" is measured as the Mission measures it: from the workflow time of the
``offer`` Update's handler to that of the ``accept`` handler. ``--no-writes`` leaves out the
two folder writes (the durable log entry and journal entry the design makes on this path).
If its median exceeds a target, no implementation of this design reaches that target on this
machine, whatever its protocol code costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from benchmarks.agent_runtime import percentile
from mwp.dev.stack import DevStack, ensure_namespace, free_port, stack_config
from mwp.stores.objects import FolderObjectStore

GROUP_TASK_QUEUE = "mwp-bench-offer-group"
AGENT_TASK_QUEUE = "mwp-bench-offer-agent"
AGENTS_NAMESPACE = "mwp-bench-agents"


@workflow.defn(name="BenchGroupWorkflow")
class BenchGroupWorkflow:
    """Answers ``offer`` at once and mirrors it beside the handler; records ``accept``."""

    def __init__(self) -> None:
        self._outbox: list[str] = []
        self._offered: dict[str, float] = {}
        self._accepted: dict[str, float] = {}
        self._finished = False

    @workflow.run
    async def run(self) -> dict[str, list[float]]:
        while not self._finished:
            await workflow.wait_condition(lambda: bool(self._outbox) or self._finished)
            if self._outbox:
                batch, self._outbox = self._outbox, []
                await workflow.execute_activity(
                    "mirror", batch, start_to_close_timeout=timedelta(seconds=20)
                )
        await workflow.wait_condition(workflow.all_handlers_finished)
        return {k: [self._offered[k], self._accepted[k]] for k in self._accepted}

    @workflow.update
    def offer(self, item: str) -> None:
        self._offered[item] = workflow.now().timestamp()
        self._outbox.append(item)

    @workflow.update
    def accept(self, item: str) -> None:
        self._accepted[item] = workflow.now().timestamp()

    @workflow.signal
    def finish(self) -> None:
        self._finished = True


@workflow.defn(name="BenchAgentWorkflow")
class BenchAgentWorkflow:
    """Accepts every offer it is signalled, by an activity, one after another."""

    def __init__(self) -> None:
        self._offers: list[str] = []

    @workflow.run
    async def run(self, group_id: str) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self._offers))
            item = self._offers.pop(0)
            await workflow.execute_activity(
                "accept", args=[group_id, item], start_to_close_timeout=timedelta(seconds=20)
            )

    @workflow.signal
    def deliver(self, item: str) -> None:
        self._offers.append(item)


@dataclass
class Hops:
    """Wall-clock marks of this process, per offer."""

    mirrored: dict[str, float] = field(default_factory=dict)
    signalled: dict[str, float] = field(default_factory=dict)
    accepting: dict[str, float] = field(default_factory=dict)
    answered: dict[str, float] = field(default_factory=dict)
    done: dict[str, asyncio.Event] = field(default_factory=dict)


class Floor:
    def __init__(self, authority: Client, folder: Path | None) -> None:
        self.authority = authority
        self.store = FolderObjectStore(folder) if folder is not None else None
        self.hints: asyncio.Queue[str] = asyncio.Queue()
        self.hops = Hops()

    @activity.defn(name="mirror")
    async def mirror(self, batch: list[str]) -> None:
        for item in batch:
            if self.store is not None:
                await asyncio.to_thread(self.store.put_if_absent, f"log/{item}", b"{}" * 512)
            self.hops.mirrored[item] = time.time()
            self.hints.put_nowait(item)

    @activity.defn(name="accept")
    async def accept(self, group_id: str, item: str) -> None:
        self.hops.accepting[item] = time.time()
        handle = self.authority.get_workflow_handle(group_id)
        await handle.execute_update(BenchGroupWorkflow.accept, item)
        self.hops.answered[item] = time.time()
        self.hops.done[item].set()

    async def inbox(self, agents: Client, agent_id: str) -> None:
        agent = agents.get_workflow_handle(agent_id)
        while True:
            item = await self.hints.get()
            if self.store is not None:
                await asyncio.to_thread(self.store.put_if_absent, f"journal/{item}", b"{}" * 512)
            await agent.signal(BenchAgentWorkflow.deliver, item)
            self.hops.signalled[item] = time.time()


async def run(args: argparse.Namespace, state_dir: Path) -> dict[str, list[float]]:
    config = stack_config(state_dir, port=free_port(), headless=True)
    async with DevStack(config) as stack:
        await ensure_namespace(stack.client.service_client, AGENTS_NAMESPACE)
        agents = await Client.connect(stack.address, namespace=AGENTS_NAMESPACE)
        floor = Floor(stack.client, None if args.no_writes else state_dir / "objects")
        group_id, agent_id = f"bench-group/{uuid.uuid4()}", f"bench-agent/{uuid.uuid4()}"
        async with (
            Worker(
                stack.client,
                task_queue=GROUP_TASK_QUEUE,
                workflows=[BenchGroupWorkflow],
                activities=[floor.mirror],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ),
            Worker(
                agents,
                task_queue=AGENT_TASK_QUEUE,
                workflows=[BenchAgentWorkflow],
                activities=[floor.accept],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ),
        ):
            group = await stack.client.start_workflow(
                BenchGroupWorkflow.run, id=group_id, task_queue=GROUP_TASK_QUEUE
            )
            await agents.start_workflow(
                BenchAgentWorkflow.run, group_id, id=agent_id, task_queue=AGENT_TASK_QUEUE
            )
            inbox = asyncio.create_task(floor.inbox(agents, agent_id))
            sent: dict[str, float] = {}
            for n in range(args.warmup + args.offers):
                item = f"item-{n}"
                floor.hops.done[item] = asyncio.Event()
                sent[item] = time.time()
                await group.execute_update(BenchGroupWorkflow.offer, item)
                await floor.hops.done[item].wait()
            inbox.cancel()
            await group.signal(BenchGroupWorkflow.finish)
            times = await group.result()
    hops = floor.hops
    measured = [f"item-{n}" for n in range(args.warmup, args.warmup + args.offers)]
    return {
        "offer -> accepted (workflow times)": [times[i][1] - times[i][0] for i in measured],
        "  mirror (offer -> written, hinted)": [hops.mirrored[i] - times[i][0] for i in measured],
        "  gateway, inbox (-> journaled, signalled)": [
            hops.signalled[i] - hops.mirrored[i] for i in measured
        ],
        "  Scheduler (-> accept activity running)": [
            hops.accepting[i] - hops.signalled[i] for i in measured
        ],
        "  accept (-> accept Update handled)": [times[i][1] - hops.accepting[i] for i in measured],
        "wall clock: offer sent -> accept answered": [hops.answered[i] - sent[i] for i in measured],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--offers", type=int, default=100, help="offers, one at a time")
    parser.add_argument("--warmup", type=int, default=5, help="untimed offers first")
    parser.add_argument(
        "--no-writes", action="store_true", help="no folder writes (log entry, journal entry)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mwp-bench-offer-floor-") as state_dir:
        stages = asyncio.run(run(args, Path(state_dir)))
    writes = "without" if args.no_writes else "with"
    print(f"{args.offers} offers one at a time, {writes} the two folder writes")
    print(f"{'ms':<44} {'p50':>7} {'p95':>7} {'max':>7}")
    for name, values in stages.items():
        ms = [1000 * v for v in values]
        print(
            f"{name:<44} {percentile(ms, 0.5):>7.1f} {percentile(ms, 0.95):>7.1f} {max(ms):>7.1f}"
        )
    sys.stdout.flush()
    os._exit(0)  # the Temporal SDK can crash at interpreter exit (DESIGN.md §5)


if __name__ == "__main__":
    main()
