"""`mwp agent run MODULE:ATTR`: run an Agent's worker process.

    mwp agent run myagents.writer:agent [--address HOST:PORT] [--state-dir .mwp] [--org ID]

Imports the Agent declaration, registers its Agent Card with the Organization's registry if
the registered one differs, opens a new Session (printing its Session Epoch) and serves the
agent's tools on its own task queue until SIGINT or SIGTERM. The registry service key comes
from ``<state>/keys/`` as `mwp registry init` left it; the tool ledger lives in
``<state>/objects`` unless ``--tool-store`` names a folder or ``s3://bucket/prefix``.
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
        "--tool-store", help="tool ledger: a folder or s3://bucket/prefix (default STATE/objects)"
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
                tool_store=args.tool_store,
                on_ready=ready,
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
