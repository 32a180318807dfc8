"""The authority worker: Group Authorities and Organization services on one task queue.

Run standalone with ``python -m workers.authority --address HOST:PORT``; ``mwp dev`` and the
test fixture run the same worker in-process (:func:`build_authority_worker`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from mwp.temporal_names import AUTHORITY_TASK_QUEUE
from workers.registry import ACTIVITIES, SANDBOX_PASSTHROUGH_MODULES, WORKFLOWS


def workflow_runner(*, sandboxed: bool = True) -> WorkflowRunner:
    """The sandbox with the protocol core and its native crypto bindings passed through, or
    no sandbox at all. The sandbox guards determinism (it refuses I/O, clocks and randomness
    in workflow code) and costs worker CPU on every workflow task; the authority workflows
    import only the pure core, so running them without it is safe and measured faster
    (``benchmarks/RESULTS.md``). Tests keep it on, so a determinism slip still fails there."""
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        *SANDBOX_PASSTHROUGH_MODULES
    )
    return SandboxedWorkflowRunner(restrictions=restrictions)


def build_authority_worker(
    client: Client,
    *,
    task_queue: str = AUTHORITY_TASK_QUEUE,
    sandboxed: bool = True,
    **options: Any,
) -> Worker:
    """A Worker hosting every registered authority workflow and activity.

    ``options`` go to :class:`temporalio.worker.Worker` (e.g. ``max_concurrent_activities``).
    """
    options.setdefault("workflow_runner", workflow_runner(sandboxed=sandboxed))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=list(ACTIVITIES),
        **options,
    )


async def run_authority_worker(address: str, namespace: str = "default") -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully."""
    client = await Client.connect(address, namespace=namespace)
    worker = build_authority_worker(client)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with worker:
        print(f"authority worker polling {AUTHORITY_TASK_QUEUE!r} on {address}", flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the MWP authority worker.")
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args(argv)
    asyncio.run(run_authority_worker(args.address, args.namespace))
    # The Temporal SDK can crash at interpreter exit after a clean shutdown (DESIGN.md §5).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
