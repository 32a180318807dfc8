"""`mwp agent run MODULE:ATTR`: run an Agent's worker process.

    mwp agent run myagents.writer:agent [--address HOST:PORT] [--state-dir .mwp] [--org ID]

Imports the Agent declaration, registers its Agent Card with the Organization's registry if
the registered one differs, opens a new Session (printing its Session Epoch) and runs the
agent's runtime on its own task queue until SIGINT or SIGTERM: its AgentWorkflow (the Worker
Scheduler), fed by the Group logs, accepts the offers it admits and runs its capabilities
under Execution Leases; its tools run once per idempotency key. The registry service key comes
from ``<state>/keys/`` as `mwp registry init` left it. ``--store`` is the Organization's object
store the Group logs are mirrored to (also holding Artifacts, checkpoints and the tool ledger):
``<state>/objects`` unless it names a folder or ``s3://bucket/prefix``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "agent",
        help="run an agent's worker process",
        description="Run the worker process of an Agent declared with mwp.agent.Agent.",
    )
    actions = parser.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="register the agent, open a session, serve its tools")
    run.add_argument("target", metavar="MODULE:ATTR", help="the Agent, e.g. myagents.writer:agent")
    run.add_argument(
        "--address", default="127.0.0.1:7233", help="Temporal address (default 127.0.0.1:7233)"
    )
    run.add_argument("--namespace", default="default", help="Temporal namespace")
    run.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (default: ./.mwp)"
    )
    run.add_argument("--org", help="Organization ID (default: the one in STATE/organization.json)")
    run.add_argument(
        "--store",
        "--tool-store",
        dest="store",
        help="object store with the Group logs: a folder or s3://bucket/prefix "
        "(default STATE/objects)",
    )
    run.add_argument(
        "--lease-seconds",
        type=int,
        default=60,
        help="Execution Lease length requested at start, renewed every third (default 60)",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from mwp.agent.worker import AgentSession, AgentWorkerError, load_agent, run_agent_worker
    from mwp.client import ClientError
    from mwp.core.errors import MwpError

    def ready(session: AgentSession) -> None:
        print(f"Organization  {session.organization_id}")
        print(f"Agent         {agent.agent_id} (Agent Card version {session.card_version})")
        print(f"Session Epoch {session.session_epoch}")
        print(f"Task queue    {session.task_queue} on {args.address}", flush=True)

    try:
        agent = load_agent(args.target)
        asyncio.run(
            run_agent_worker(
                agent,
                address=args.address,
                namespace=args.namespace,
                state_dir=args.state_dir,
                organization_id=args.org,
                tool_store=args.store,
                on_ready=ready,
                scheduler_options={"lease_seconds": args.lease_seconds},
            )
        )
    except (AgentWorkerError, ClientError) as exc:
        print(f"mwp agent: {exc}", file=sys.stderr)
        return 1
    except MwpError as exc:
        print(f"mwp agent: refused: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 1
    print("agent worker stopped", flush=True)
    sys.stderr.flush()
    # The Temporal SDK can crash at interpreter exit after a clean shutdown (DESIGN.md §5).
    os._exit(0)
