"""`mwp coordinator run MODULE:ATTR`: run a Coordinator declared with mwp.coordinator.

The Coordinator reaches its Groups through the Group gateway only, like an agent: HELLO with
its own key (registered with `mwp registry add-agent NAME --owner HUMAN --capability
mwp.coordination@1.0.0`), then it plans, offers, reviews and submits every Mission it
coordinates, printing one line per decision, until Ctrl-C. Its plans are journaled under
``STATE/coordinator/``.

Each call of one of its functions (plan, review, on_proposal, on_message,
on_changes_requested) runs as a Temporal activity of a small decision workflow in the agents'
namespace (``--address``, ``--namespace``), on the Coordinator's own task queue, hosted by
this process: the link it prints lists them in the Temporal UI. A restarted runtime reads a
decision it already took instead of calling the function again.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from mwp.cli import defaults
from mwp.cli.ui_links import decisions_url
from mwp.contracts.coordinator import coordinator_task_queue


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "coordinator",
        help="run a Coordinator (plan, offer, review, submit) through the gateway",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="coordinator_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="coordinate the Coordinator's Missions until Ctrl-C")
    run.add_argument("target", metavar="MODULE:ATTR", help="e.g. examples.planner:coordinator")
    run.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (default: ./.mwp)"
    )
    run.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    run.add_argument(
        "--namespace",
        default=defaults.agents_namespace(),
        help="Temporal namespace of the Coordinator's decisions (default: the agents' "
        f"namespace, {defaults.agents_namespace()})",
    )
    run.add_argument(
        "--ui-url",
        default=defaults.ui_url(),
        help="the Temporal UI, for the link to the decisions (default: `mwp dev`'s)",
    )
    run.add_argument(
        "--gateway",
        metavar="WSS_URL",
        default=defaults.gateway_url(),
        help=f"the Group gateway (default {defaults.gateway_url()})",
    )
    run.add_argument(
        "--gateway-ca",
        type=Path,
        help="the gateway's trust anchor (default: STATE/gateway-tls/ca.pem when it exists)",
    )
    run.add_argument(
        "--gateway-artifacts",
        metavar="HTTPS_URL",
        help="the gateway's Artifact address (default: the next port of --gateway)",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from mwp.agent.gateway_link import GatewayUnavailableError
    from mwp.cli.agent import gateway_settings
    from mwp.client import ClientError
    from mwp.coordinator import Coordinator
    from mwp.coordinator.runtime import CoordinatorRuntime
    from mwp.workers.agent import AgentWorkerError, load_declaration
    from mwp.workers.coordinator import run_coordinator_worker

    try:
        coordinator = load_declaration(
            args.target, Coordinator, "an mwp.coordinator.Coordinator declaration"
        )
    except AgentWorkerError as exc:
        print(f"mwp coordinator: {exc}", file=sys.stderr)
        return 1
    settings = gateway_settings(args)

    def ready(runtime: CoordinatorRuntime) -> None:
        print(f"Coordinator   {coordinator.agent_id}")
        print(f"Session Epoch {runtime.link.session_epoch}")
        queue = coordinator_task_queue(coordinator.agent_id)
        print(f"Decisions     task queue {queue} on {args.address}, namespace {args.namespace}")
        print(f"Temporal UI   {decisions_url(args.ui_url, args.namespace, queue)}")
        print(f"Gateway       {args.gateway}", flush=True)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await run_coordinator_worker(
            coordinator,
            settings,
            args.state_dir,
            stop,
            address=args.address,
            namespace=args.namespace,
            report=lambda line: print(line, flush=True),
            on_ready=ready,
        )

    try:
        asyncio.run(serve())
    except (GatewayUnavailableError, ClientError) as exc:
        print(f"mwp coordinator: {exc}", file=sys.stderr)
        return 1
    print("coordinator stopped")
    return 0
