"""`mwp dev`: run the embedded stack (Temporal dev server + authority worker + the Group
gateway) until Ctrl-C.

Two namespaces make the two trust zones: the authority's (``--namespace``: Missions,
WorkItems, the registry) and the agents' (``--agents-namespace``). The gateway, in this
process so the mirror's hints reach it directly, serves ``wss://`` on ``--gateway-port`` and
Artifacts on ``--artifact-port``, with a development CA under the state folder
(``gateway-tls/ca.pem``, the agents' trust anchor), for the Organization of `mwp registry init`.

The Temporal state is a SQLite file under the state folder (default ``./.mwp``), so a later
``mwp dev`` in the same folder finds the workflows of the earlier one. ``--log-format`` and
``--otel-endpoint`` configure its logs and tracing (:mod:`mwp.workers.observability`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from mwp.cli import defaults
from mwp.contracts.metrics import DEFAULT_METRICS_PORT
from mwp.dev.stack import (
    DEFAULT_AGENTS_NAMESPACE,
    DEFAULT_ARTIFACT_PORT,
    DEFAULT_CONSOLE_PORT,
    DEFAULT_GATEWAY_PORT,
)
from mwp.workers.observability import add_observability_args

SERVICE_NAME = "mwp-dev"  # OpenTelemetry's service.name of the embedded worker's spans


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dev",
        help="run the embedded stack: Temporal dev server and the authority worker",
        description=(
            "Start the Temporal dev server (SQLite under the state folder, web UI on "
            "127.0.0.1) with the authority's and the agents' namespaces, the authority worker "
            "and the Group gateway; Ctrl-C stops them cleanly."
        ),
    )
    parser.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (default: ./.mwp)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=defaults.port(),
        help=f"Temporal gRPC port ({defaults.port()}; the port of ${defaults.ADDRESS_ENV})",
    )
    parser.add_argument(
        "--ui-port",
        type=int,
        default=defaults.ui_port(),
        help=f"web UI port ({defaults.ui_port()}; ${defaults.UI_PORT_ENV} sets it)",
    )
    parser.add_argument("--headless", action="store_true", help="run without the web UI")
    parser.add_argument(
        "--namespace", default="default", help="the authority's Temporal namespace (default)"
    )
    parser.add_argument(
        "--agents-namespace",
        default=DEFAULT_AGENTS_NAMESPACE,
        help=f"the agents' Temporal namespace ({DEFAULT_AGENTS_NAMESPACE})",
    )
    parser.add_argument(
        "--gateway-port",
        type=int,
        default=defaults.port_from(defaults.GATEWAY_PORT_ENV, DEFAULT_GATEWAY_PORT),
        help=f"the gateway's wss:// port ({DEFAULT_GATEWAY_PORT}, or "
        f"${defaults.GATEWAY_PORT_ENV}; 0: any free port)",
    )
    parser.add_argument(
        "--artifact-port",
        type=int,
        default=defaults.port_from(defaults.ARTIFACT_PORT_ENV, DEFAULT_ARTIFACT_PORT),
        help=f"the gateway's https:// port for Artifacts ({DEFAULT_ARTIFACT_PORT}, or "
        f"${defaults.ARTIFACT_PORT_ENV}; 0: any)",
    )
    parser.add_argument("--no-gateway", action="store_true", help="do not start the gateway")
    parser.add_argument(
        "--console-port",
        type=int,
        default=defaults.port_from(defaults.CONSOLE_PORT_ENV, DEFAULT_CONSOLE_PORT),
        help=f"the human Approval console's http:// port ({DEFAULT_CONSOLE_PORT}, or "
        f"${defaults.CONSOLE_PORT_ENV}; 0: any free port)",
    )
    parser.add_argument("--no-console", action="store_true", help="do not start the console")
    parser.add_argument(
        "--temporal-address",
        metavar="HOST:PORT",
        help="use this existing Temporal cluster; start no server",
    )
    parser.add_argument(
        "--dynamic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra dynamic config for the dev server (repeatable; VALUE is JSON)",
    )
    parser.add_argument(
        "--in-memory",
        action="store_true",
        help="keep the dev server's state in memory: nothing survives a stop (a stack thrown "
        "away after use, as the demo's)",
    )
    parser.add_argument(
        "--server-stop-seconds",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long the dev server may take to stop before it is killed (default 10; it "
        "takes about 1.2 s; a stack thrown away after use, as the demo's, need not wait)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        nargs="?",
        const=DEFAULT_METRICS_PORT,
        metavar="PORT",
        help=(
            "serve the worker's Prometheus metrics on 127.0.0.1:PORT/metrics "
            f"(alone: {DEFAULT_METRICS_PORT}; 0 or absent: off)"
        ),
    )
    add_observability_args(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mwp.workers.observability import TracingUnavailableError, configure_observability

    try:
        # Before the stack starts: its worker takes the tracing interceptor from MwpPlugin.
        observability = configure_observability(args, service_name=SERVICE_NAME)
    except TracingUnavailableError as exc:
        print(f"mwp dev: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args, observability.otel_endpoint))
    finally:
        observability.shutdown()


async def _serve(args: argparse.Namespace, otel_endpoint: str | None = None) -> int:
    from mwp.dev.stack import DevStack, StackError, stack_config

    try:
        config = stack_config(
            args.state_dir,
            port=args.port,
            ui_port=args.ui_port,
            headless=args.headless,
            temporal_address=args.temporal_address,
            namespace=args.namespace,
            extra=args.dynamic_config,
            metrics_port=args.metrics_port,
            agents_namespace=args.agents_namespace,
            gateway_port=None if args.no_gateway else args.gateway_port,
            artifact_port=args.artifact_port,
            console_port=None if args.no_console else args.console_port,
            server_stop_seconds=args.server_stop_seconds,
            in_memory=args.in_memory,
        )
    except StackError as exc:
        print(f"mwp dev: {exc}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    stack = DevStack(config)
    print("mwp dev: starting the embedded stack...", flush=True)
    try:
        await stack.start()
    except StackError as exc:
        print(f"mwp dev: {exc}", file=sys.stderr)
        return 1
    for line in stack.describe():
        print(f"  {line}")
    if otel_endpoint:
        print(f"  Tracing    OTLP to {otel_endpoint}")
    started = f" in {stack.startup_seconds:.1f} s" if stack.startup_seconds is not None else ""
    print(f"Ready{started}. Press Ctrl-C to stop.", flush=True)

    stopping = asyncio.create_task(stop.wait())
    watched: set[asyncio.Future[Any]] = {stopping}
    if stack.worker_task is not None:
        watched.add(stack.worker_task)
    done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if stopping not in done:
        stopping.cancel()
        print("mwp dev: the authority worker stopped unexpectedly", file=sys.stderr)
        code = 1
    print("Stopping...", flush=True)
    await stack.stop()
    killed = stack.server_stopped == "killed"
    said = f" (the dev server killed after {config.stop_timeout:g} s)" if killed else ""
    print(f"Stopped{said}.", flush=True)
    return code
