"""The floor under a Group's Command rate: what the server and the SDK cost for the Temporal
work issue 3's design prescribes per Command, with no protocol work at all.

Run: ``make bench-floor`` (or ``.venv/bin/python -m benchmarks.group_floor``); about a minute.
It starts the embedded stack as ``benchmarks/group_commands.py`` does and measures, with
``--in-flight`` Updates outstanding:

1. **raw**: the no-op Update of ``group_commands`` (the issue's reference rate).
2. **floor**: 7-Update "lifecycles" into one ``BenchRelayWorkflow``, as the Group runs its
   WorkItem lifecycles. Each Update returns its argument at once, like the no-op, and then,
   beside the handler, does only what the MissionWorkflow must do for a Command: the first
   Update of a lifecycle starts a child ``BenchItemWorkflow`` (the WorkItemWorkflow's place),
   each Update after it signals that child (one transition, as the Mission does), and the child
   upserts one search attribute per signal and ends at the seventh. No signing, verification,
   decision, Event log or snapshot.

If the floor's share of the raw rate is below the issue's 60%, no implementation of the
prescribed design (a child workflow per WorkItem, signalled on each transition) reaches the
target on this machine, whatever its protocol code costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from benchmarks.group_commands import (
    METER,
    NOOP_TASK_QUEUE,
    STEPS,
    BenchNoopWorkflow,
    Phase,
    _lanes,
    raw_update_rate,
)
from mwp.dev.stack import DevStack, free_port, stack_config

FLOOR_TASK_QUEUE = "mwp-bench-floor"
ITEM_STATE = SearchAttributeKey.for_keyword("WorkItemState")


@workflow.defn(name="BenchItemWorkflow")
class BenchItemWorkflow:
    """Holds one item's state as a search attribute; ends at its last transition."""

    def __init__(self) -> None:
        self._step = 0

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._step >= STEPS - 1)
        return self._step

    @workflow.signal
    def transition(self, step: int) -> None:
        self._step = step
        workflow.upsert_search_attributes([ITEM_STATE.value_set(f"step-{step}")])


@workflow.defn(name="BenchRelayWorkflow")
class BenchRelayWorkflow:
    """Answers ``relay`` Updates at once; starts or signals the item's child beside them."""

    def __init__(self) -> None:
        self._count = 0
        self._finished = False
        self._chains: dict[str, asyncio.Task[None]] = {}

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._finished)
        await workflow.wait_condition(workflow.all_handlers_finished)
        await asyncio.gather(*self._chains.values())
        return self._count

    @workflow.update
    def relay(self, item: str, step: int) -> int:
        self._count += 1
        previous = self._chains.get(item)
        self._chains[item] = asyncio.create_task(self._follow(previous, item, step))
        return step

    async def _follow(self, previous: asyncio.Task[None] | None, item: str, step: int) -> None:
        if previous is not None:
            await previous  # one item's starts and signals in order, as the Mission sends them
        child_id = f"{workflow.info().workflow_id}/{item}"
        if step == 0:
            await workflow.start_child_workflow(
                BenchItemWorkflow.run,
                id=child_id,
                task_queue=FLOOR_TASK_QUEUE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
        else:
            await workflow.get_external_workflow_handle(child_id).signal(
                BenchItemWorkflow.transition, step
            )
        if step == STEPS - 1:
            del self._chains[item]

    @workflow.signal
    def finish(self) -> None:
        self._finished = True


async def floor_rate(client: Client, updates: int, in_flight: int) -> Phase:
    phase = Phase("floor")
    handle = await client.start_workflow(
        BenchRelayWorkflow.run, id=f"mwp-bench-floor/{uuid.uuid4()}", task_queue=FLOOR_TASK_QUEUE
    )
    lifecycles = updates // STEPS // in_flight

    async def lane(index: int) -> None:
        for n in range(lifecycles):
            item = f"{index}-{n}"
            for step in range(STEPS):
                await handle.execute_update(BenchRelayWorkflow.relay, args=[item, step])
                phase.accepted += 1

    await _lanes(phase, in_flight, lane, lifecycles * STEPS * in_flight)
    await handle.signal(BenchRelayWorkflow.finish)
    answered = await handle.result()
    if answered != phase.accepted:
        raise RuntimeError(f"the relay answered {answered} Updates, not {phase.accepted}")
    return phase


def _line(label: str, phase: Phase) -> str:
    process, server = (1000 * cpu / phase.accepted for cpu in (phase.process_cpu, phase.server_cpu))
    return (
        f"{label:<44} {phase.accepted:>6,} {phase.seconds:>7.1f} {phase.rate:>8.1f}"
        f" {process:>8.1f} {server:>7.1f}"
    )


async def run(args: argparse.Namespace, state_dir: Path) -> None:
    config = stack_config(state_dir, port=free_port(), headless=True)
    async with DevStack(config) as stack:
        METER.server_pid = stack.server_pid
        async with (
            Worker(
                stack.client,
                task_queue=NOOP_TASK_QUEUE,
                workflows=[BenchNoopWorkflow],
                workflow_runner=UnsandboxedWorkflowRunner(),
                graceful_shutdown_timeout=timedelta(seconds=2),
            ),
            Worker(
                stack.client,
                task_queue=FLOOR_TASK_QUEUE,
                workflows=[BenchRelayWorkflow, BenchItemWorkflow],
                workflow_runner=UnsandboxedWorkflowRunner(),
                graceful_shutdown_timeout=timedelta(seconds=2),
            ),
        ):
            raw = await raw_update_rate(stack.client, args.updates, args.in_flight)
            floor = await floor_rate(stack.client, args.updates, args.in_flight)
            raw_after = await raw_update_rate(stack.client, args.updates, args.in_flight)
    print(f"{args.in_flight} in flight; CPU columns: ms per Update of this process / the server")
    print(
        f"{'measurement':<44} {'count':>6} {'seconds':>7} {'per s':>8} {'process':>8} {'server':>7}"
    )
    print(_line("raw no-op Updates (before)", raw))
    print(_line("floor: Update + child start or signal + upsert", floor))
    print(_line("raw no-op Updates (after)", raw_after))
    share = floor.rate / ((raw.rate + raw_after.rate) / 2)
    print(f"floor / raw (mean of before and after): {share:.2f} (the issue's target: 0.60)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--updates", type=int, default=1_890, help="Updates per measurement (under 2,000 a run)"
    )
    parser.add_argument("--in-flight", type=int, default=10, help="Updates in flight")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mwp-bench-floor-") as state_dir:
        asyncio.run(run(args, Path(state_dir)))
    sys.stdout.flush()
    os._exit(0)  # the Temporal SDK can crash at interpreter exit (DESIGN.md §5)


if __name__ == "__main__":
    main()
