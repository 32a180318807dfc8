"""The authority worker: Group Authorities and Organization services on one task queue.

Run standalone with ``python -m mwp.workers.authority --address HOST:PORT``; ``mwp dev`` and the
test fixture run the same worker in-process (:func:`build_authority_worker`). With
``--metrics-port`` the worker serves Prometheus metrics (Temporal's and the product's,
``mwp.contracts.metrics``) on ``http://HOST:PORT/metrics``; ``--log-format json`` logs one JSON
object per line and ``--otel-endpoint`` traces it (:mod:`mwp.workers.observability`,
docs/operations.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from mwp.activities.mirror import Mirror
from mwp.activities.seal import ServiceSealer
from mwp.contracts.metrics import DEFAULT_METRICS_PORT
from mwp.contracts.names import AUTHORITY_TASK_QUEUE
from mwp.log.keys import AuthorityKeyring
from mwp.workers.log_format import core_logging
from mwp.workers.observability import (
    TracingUnavailableError,
    add_observability_args,
    configure_observability,
)
from mwp.workers.plugin import MwpPlugin
from mwp.workers.registry import ACTIVITIES, WORKFLOWS

SERVICE_NAME = "mwp-authority-worker"  # OpenTelemetry's service.name of its spans

log = logging.getLogger("mwp.workers.authority")  # also when run as __main__


def build_authority_worker(
    client: Client,
    *,
    task_queue: str = AUTHORITY_TASK_QUEUE,
    sandboxed: bool = True,
    mirror: Mirror | None = None,
    keyring: AuthorityKeyring | None = None,
    **options: Any,
) -> Worker:
    """A Worker hosting every registered authority workflow and activity.

    ``mirror`` writes the Group Event log; without it the Missions' mirror calls wait for a
    worker that has one. The workflows' messages are sealed with keys from ``keyring`` (by
    default the mirror's): a worker without either cannot run the authority workflows.
    ``options`` go to :class:`temporalio.worker.Worker`. ``sandboxed=False``
    is for benchmarks that measure what the sandbox costs, never for a running Group.
    """
    if not sandboxed:
        options.setdefault("workflow_runner", UnsandboxedWorkflowRunner())
    keyring = keyring or (mirror.keyring if mirror is not None else None)
    if keyring is None:
        raise ValueError("an authority worker needs a keyring (or a mirror) to seal messages")
    activities = [*ACTIVITIES, *ServiceSealer(keyring).activities]
    if mirror is not None:
        activities += [mirror.mirror_events, mirror.archive_group]
        # The mirror does blocking file or S3 I/O: it runs in threads, never on the loop.
        options.setdefault("activity_executor", ThreadPoolExecutor(max_workers=4))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=activities,
        plugins=[MwpPlugin()],
        **options,
    )


def metrics_runtime(port: int, host: str = "127.0.0.1") -> Runtime:
    """A Temporal runtime serving Prometheus metrics on ``http://host:port/metrics``.

    A worker exports its workflows' metrics through the runtime of the client it was built
    with, so that client must be connected with ``runtime=`` this. Raises ``ValueError`` if
    the port is taken. Each runtime has its own threads: make one per process.
    """
    # Counters end in _total and durations are in seconds, as Prometheus names them.
    config = PrometheusConfig(
        bind_address=f"{host}:{port}", counters_total_suffix=True, durations_as_seconds=True
    )
    return Runtime(telemetry=TelemetryConfig(metrics=config, logging=core_logging()))


async def run_authority_worker(
    address: str,
    namespace: str = "default",
    *,
    state_dir: Path,
    log_store: str | None = None,
    runtime: Runtime | None = None,
    interceptors: Sequence[Any] = (),
) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully. ``runtime`` (default: the
    SDK's) is the one a :func:`metrics_runtime` gives, to serve metrics; ``interceptors`` go
    to the client (the tracing one, from :func:`configure_observability`)."""
    client = await Client.connect(
        address, namespace=namespace, runtime=runtime, interceptors=interceptors
    )
    mirror = Mirror.open(log_store or state_dir / "objects", state_dir)
    worker = build_authority_worker(client, mirror=mirror)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with worker:
        log.info("authority worker polling %r on %s", AUTHORITY_TASK_QUEUE, address)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the MWP authority worker.")
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--namespace", default="default")
    parser.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="holds authority-keys/ (and objects/)"
    )
    parser.add_argument(
        "--log-store",
        help="the Group Event log: a folder or s3://bucket/prefix (default: STATE/objects)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        nargs="?",
        const=DEFAULT_METRICS_PORT,
        metavar="PORT",
        help=f"serve Prometheus metrics on PORT (alone: {DEFAULT_METRICS_PORT}; 0 or absent: off)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address the metrics endpoint binds (0.0.0.0 in a container)",
    )
    add_observability_args(parser)
    args = parser.parse_args(argv)
    try:
        observability = configure_observability(args, service_name=SERVICE_NAME)
    except TracingUnavailableError as exc:
        parser.exit(2, f"authority worker: {exc}\n")
    if observability.otel_endpoint:
        log.info("tracing to %s", observability.otel_endpoint)
    runtime = None
    if args.metrics_port:
        try:
            runtime = metrics_runtime(args.metrics_port, args.metrics_host)
        except ValueError as exc:  # the port is taken
            parser.exit(1, f"authority worker: {exc}\n")
        log.info("metrics on http://%s:%s/metrics", args.metrics_host, args.metrics_port)
    try:
        asyncio.run(
            run_authority_worker(
                args.address,
                args.namespace,
                state_dir=args.state_dir,
                log_store=args.log_store,
                runtime=runtime,
                interceptors=observability.interceptors,
            )
        )
    finally:
        observability.shutdown()  # exports the last spans: os._exit below skips atexit
    # The Temporal SDK can crash at interpreter exit after a clean shutdown (DESIGN.md §5).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
