"""`mwp agent run MODULE:ATTR`: run an Agent's worker process; inspect and steer its Scheduler.

    mwp agent run myagents.writer:agent [--address HOST:PORT] [--state-dir .mwp] [--org ID]
    mwp agent status AGENT_ID [--json]          slots, queues, decisions, run outcomes
    mwp agent preempt AGENT_ID GROUP WORK_ITEM   stop that run at its next checkpoint
    mwp agent weight AGENT_ID GROUP WEIGHT [--quota N]   a Group's share of this agent

Imports the Agent declaration and runs the agent's runtime on its own task queue until SIGINT
or SIGTERM: its AgentWorkflow (the Worker Scheduler) accepts the offers it admits and runs its
capabilities under Execution Leases; its tools run once per idempotency key.

By default the runtime is outside the authority zone: it reaches its Groups only through the
Group gateway (``--gateway``, `mwp dev`'s on 127.0.0.1 unless told otherwise, trusted by
``<state>/gateway-tls/ca.pem`` when that exists), whose HELLO opens the agent's Session; its
own workflow and activities live in the agents' namespace, its tool records and journal in
``--store`` (``<state>/agent-ledger``). Its Agent Card must be registered first
(`mwp registry add-agent`). ``--direct`` is the operators' mode: the runtime registers the
card itself with the registry service key of ``<state>/keys/``, reads every Group log of the
object store ``--store`` (``<state>/objects``, or ``s3://bucket/prefix``) and uses the
authority namespace.

``preempt`` and ``weight`` signal the AgentWorkflow, which acts only on messages sealed with
the agent's own key: they use the agent's key file in ``<state>/keys/`` (``--key-name``, or
the one whose principal is AGENT_ID, as `mwp registry add-agent` saved it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mwp.agent.offline import DEFAULT_GRACE_SECONDS
from mwp.cli import defaults
from mwp.contracts.agent import QUERY_STATUS, PolicyChange, PreemptionRequest
from mwp.core.group.offline_execution import MAX_GRACE_SECONDS
from mwp.workers.observability import add_observability_args

if TYPE_CHECKING:
    from mwp.client import Identity


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "agent",
        help="run an agent's worker process",
        description="Run the worker process of an Agent declared with mwp.agent.Agent.",
    )
    actions = parser.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="register the agent, open a session, serve its tools")
    run.add_argument("target", metavar="MODULE:ATTR", help="the Agent, e.g. myagents.writer:agent")
    run.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    run.add_argument(
        "--namespace",
        help="Temporal namespace of the agent's own workflow and activities (default: the "
        f"agents' namespace, {defaults.agents_namespace()}; with --direct: default)",
    )
    run.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (default: ./.mwp)"
    )
    run.add_argument("--org", help="Organization ID (default: the one in STATE/organization.json)")
    run.add_argument(
        "--store",
        "--tool-store",
        dest="store",
        help="the agent's own folder for its tool records and journal (default "
        "STATE/agent-ledger); with --direct the object store with the Group logs, a folder or "
        "s3://bucket/prefix (default STATE/objects)",
    )
    run.add_argument(
        "--lease-seconds",
        type=int,
        default=60,
        help="Execution Lease length requested at start, renewed every third (default 60)",
    )
    run.add_argument(
        "--replace",
        action="store_true",
        help="start even if another runtime of this agent is serving: its Session is fenced",
    )
    run.add_argument(
        "--gateway",
        metavar="WSS_URL",
        default=defaults.gateway_url(),
        help=f"the Group gateway, the agent's only door to its Groups (default "
        f"{defaults.gateway_url()}; ${defaults.GATEWAY_PORT_ENV} sets its port)",
    )
    run.add_argument(
        "--gateway-ca",
        type=Path,
        help="the gateway's trust anchor, a CA file (default: STATE/gateway-tls/ca.pem when it "
        "exists, `mwp dev`'s development CA; else the system's trust store)",
    )
    run.add_argument(
        "--gateway-artifacts",
        metavar="HTTPS_URL",
        help="the gateway's Artifact address (default: the next port of --gateway)",
    )
    run.add_argument(
        "--offline-grace",
        metavar="SECONDS",
        type=_grace,
        default=DEFAULT_GRACE_SECONDS,
        help="how long a run that lost the gateway may go on with reversible work, buffering "
        f"its checkpoints (0 to {MAX_GRACE_SECONDS}, never past its lease; default "
        f"{DEFAULT_GRACE_SECONDS})",
    )
    run.add_argument(
        "--direct",
        action="store_true",
        help="operators only: bypass the gateway, reading the Group logs from --store and "
        "using the authority namespace (needs the registry service key in STATE/keys)",
    )
    add_observability_args(run, log_level="WARNING")  # its own output: one line per run
    run.set_defaults(handler=_run)

    def scheduler_command(
        name: str, help_text: str, *, signs: bool = False
    ) -> argparse.ArgumentParser:
        command: argparse.ArgumentParser = actions.add_parser(
            name, help=help_text, description=help_text
        )
        command.add_argument("agent_id", metavar="AGENT_ID", help="the agent's ID (a URI)")
        command.add_argument("--address", default=defaults.address(), help=defaults.address_help())
        command.add_argument(
            "--namespace",
            default=defaults.agents_namespace(),
            help=f"the agent's Temporal namespace (default {defaults.agents_namespace()})",
        )
        if signs:
            command.add_argument(
                "--state-dir",
                type=Path,
                default=Path(".mwp"),
                help="state folder with the agent's key in keys/ (default: ./.mwp)",
            )
            command.add_argument(
                "--key-name",
                help="the agent's key file in STATE/keys (default: the one of AGENT_ID)",
            )
        return command

    status = scheduler_command("status", "show an agent's Scheduler: slots, queues, decisions")
    status.add_argument("--json", action="store_true", help="print the whole status as JSON")
    status.set_defaults(handler=_scheduler(_status))
    preempt = scheduler_command(
        "preempt", "ask a running WorkItem to stop at its next checkpoint", signs=True
    )
    preempt.add_argument("group_id", metavar="GROUP")
    preempt.add_argument("work_item_id", metavar="WORK_ITEM")
    preempt.set_defaults(handler=_scheduler(_preempt))
    weight = scheduler_command(
        "weight", "set a Group's weight (and quota) for this agent", signs=True
    )
    weight.add_argument("group_id", metavar="GROUP")
    weight.add_argument("weight", metavar="WEIGHT", type=int)
    weight.add_argument("--quota", type=int, help="most slots the Group may hold at once")
    weight.set_defaults(handler=_scheduler(_weight))


def _scheduler(action: Any) -> Any:
    """Run ``action(handle, args)`` against the agent's AgentWorkflow; exit 1 when it is not
    running."""

    def handler(args: argparse.Namespace) -> int:
        from temporalio.service import RPCError

        from mwp.client import ClientError, connect
        from mwp.contracts.agent import agent_workflow_id

        async def go() -> int:
            client = await connect(args.address, args.namespace)
            handle = client.temporal.get_workflow_handle(agent_workflow_id(args.agent_id))
            return int(await action(handle, args))

        try:
            return asyncio.run(go())
        except AgentKeyError as exc:
            print(f"mwp agent: {exc}", file=sys.stderr)
            return 1
        except (RPCError, ClientError) as exc:
            print(
                f"mwp agent: no Scheduler for {args.agent_id} (is `mwp agent run` serving it?): "
                f"{exc}",
                file=sys.stderr,
            )
            return 1

    return handler


async def _status(handle: Any, args: argparse.Namespace) -> int:
    status = await handle.query(QUERY_STATUS)
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    print(f"Agent         {status['agentId']} (Session Epoch {status['sessionEpoch']})")
    running, slots, queued = status["running"], status["slots"], status["queued"]
    print(f"Slots         {running} of {slots} running, {queued} queued")
    disclosures = status["scheduleDisclosures"]
    print(f"Groups        {status['groups']}; schedule disclosures sent {disclosures}")
    refused = status.get("refusedSignals", {})
    if refused.get("total"):
        counts = ", ".join(f"{k} {n}" for k, n in sorted(refused["counts"].items()))
        print(f"Refused       {refused['total']} signals ({counts})")
    for group, count in sorted(status["served"].items()):
        print(f"  served {count:>5}  {group}")
    for decision in status["decisions"][-5:]:
        reason = decision.get("reason") or decision.get("ownershipEpoch", "")
        print(f"  {decision['decision']:<9} {decision['workItemId']} {reason}")
    for outcome in status["outcomes"][-5:]:
        print(f"  {outcome['status']:<9} {outcome['workItemId']}")
    return 0


class AgentKeyError(Exception):
    """The agent's key file is missing or is another principal's."""


def agent_key(state_dir: Path, agent_id: str, key_name: str | None = None) -> Identity:
    """The agent's own key from ``state_dir``/keys: ``key_name``, else ``agent-<name>`` (as
    `mwp registry add-agent` names it) or any key file whose principal is the agent."""
    from mwp.client import ClientError, KeyStore
    from mwp.core.trust.registry import Principal

    keys = KeyStore.in_state_dir(state_dir)
    wanted = Principal("agent", agent_id)
    tail = agent_id.rsplit(":", 1)[-1]
    names = [key_name] if key_name else sorted(keys.names(), key=lambda n: n != f"agent-{tail}")
    for name in names:
        try:
            identity = keys.load(name)
        except (ClientError, OSError, ValueError, KeyError) as exc:
            if key_name:
                raise AgentKeyError(f"cannot use key {key_name!r}: {exc}") from None
            continue
        if identity.principal == wanted:
            return identity
    if key_name:
        raise AgentKeyError(f"key {key_name!r} is not {agent_id}'s")
    raise AgentKeyError(
        f"no key of {agent_id} in {keys.directory}: its Scheduler acts only on signals sealed "
        "with the agent's own key (give --state-dir or --key-name)"
    )


async def _signal(handle: Any, args: argparse.Namespace, message: Any) -> None:
    from mwp.agent.signals import SchedulerSignals

    identity = agent_key(args.state_dir, args.agent_id, args.key_name)
    await handle.signal(*SchedulerSignals(identity).signal(message))


async def _preempt(handle: Any, args: argparse.Namespace) -> int:
    await _signal(handle, args, PreemptionRequest(args.group_id, args.work_item_id))
    print(f"preemption requested: {args.work_item_id} stops at its next checkpoint")
    return 0


async def _weight(handle: Any, args: argparse.Namespace) -> int:
    if args.weight < 1 or (args.quota is not None and args.quota < 0):
        print("mwp agent: WEIGHT must be 1 or more and --quota 0 or more", file=sys.stderr)
        return 2
    await _signal(handle, args, PolicyChange(args.group_id, args.weight, args.quota))
    quota = "all slots" if args.quota is None else f"at most {args.quota} slots"
    print(f"{args.group_id}: weight {args.weight}, {quota}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from mwp.workers.observability import TracingUnavailableError, configure_observability

    try:
        observability = configure_observability(args, service_name="mwp-agent")
    except TracingUnavailableError as exc:
        print(f"mwp agent: {exc}", file=sys.stderr)
        return 2
    try:
        return _serve(args)
    finally:
        observability.shutdown()


def _serve(args: argparse.Namespace) -> int:
    from mwp.agent.gateway_link import GatewayUnavailableError
    from mwp.client import ClientError
    from mwp.core.errors import MwpError
    from mwp.workers.agent import AgentSession, AgentWorkerError, load_agent, run_agent_worker

    def ready(session: AgentSession) -> None:
        print(f"Organization  {session.organization_id}")
        print(f"Agent         {agent.agent_id} (Agent Card version {session.card_version})")
        print(f"Session Epoch {session.session_epoch}")
        if not args.direct:
            print(f"Gateway       {args.gateway} (its only door to its Groups)")
        where = f"{args.address}, namespace {_namespace(args)}"
        print(f"Task queue    {session.task_queue} on {where}", flush=True)

    try:
        agent = load_agent(args.target)
        if not args.replace:
            asyncio.run(_refuse_if_running(args, agent.agent_id))
        gateway = None if args.direct else _gateway_settings(args)
        session = asyncio.run(
            run_agent_worker(
                agent,
                address=args.address,
                namespace=_namespace(args),
                state_dir=args.state_dir,
                organization_id=args.org,
                tool_store=args.store,
                on_ready=ready,
                scheduler_options={"lease_seconds": args.lease_seconds},
                gateway=gateway,
            )
        )
    except (AgentWorkerError, ClientError, AgentRunningError, GatewayUnavailableError) as exc:
        print(f"mwp agent: {exc}", file=sys.stderr)
        return 1
    except MwpError as exc:
        print(f"mwp agent: refused: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 1
    if session.replaced_by is not None:
        print(f"agent worker stopped: Session Epoch {session.replaced_by} replaced this runtime")
        return REPLACED_STATUS
    print("agent worker stopped")
    return 0


def _grace(text: str) -> int:
    """``--offline-grace``: whole seconds within the Organization policy's bound, refused at
    parse time (before anything connects)."""
    try:
        seconds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if not 0 <= seconds <= MAX_GRACE_SECONDS:
        raise argparse.ArgumentTypeError(f"{seconds} is not within 0 to {MAX_GRACE_SECONDS} s")
    return seconds


def _namespace(args: argparse.Namespace) -> str:
    if args.namespace:
        return str(args.namespace)
    return "default" if args.direct else defaults.agents_namespace()


def _gateway_settings(args: argparse.Namespace) -> Any:
    return gateway_settings(args, offline_grace_seconds=args.offline_grace)


def gateway_settings(args: argparse.Namespace, **options: Any) -> Any:
    """The GatewaySettings of ``--gateway``, ``--gateway-ca`` and ``--gateway-artifacts``
    (shared by `mwp agent run` and `mwp coordinator run`): `mwp dev`'s CA and Artifact
    address when those are not given."""
    from mwp.agent.gateway_link import GatewaySettings

    ca = args.gateway_ca
    if ca is None and (args.state_dir / DEV_CA).is_file():
        ca = args.state_dir / DEV_CA
    artifacts = args.gateway_artifacts
    if artifacts is None and args.gateway == defaults.gateway_url():
        artifacts = defaults.gateway_artifacts_url()  # `mwp dev`'s, wherever its port is
    return GatewaySettings(args.gateway, ca, artifacts, **options)


# Where `mwp dev` keeps its gateway's development CA, inside its state folder.
DEV_CA = Path("gateway-tls") / "ca.pem"

# The exit status of a runtime that stopped because another took its agent over.
REPLACED_STATUS = 3


class AgentRunningError(Exception):
    """Another runtime serves this agent: starting would fence it (MWP-IDN-008)."""


async def _refuse_if_running(args: argparse.Namespace, agent_id: str) -> None:
    from temporalio.client import Client

    from mwp.client.running_agent import live_pollers

    try:
        client = await Client.connect(args.address, namespace=_namespace(args))
    except RuntimeError:
        return  # unreachable: starting the runtime reports it, after its own checks
    pollers = await live_pollers(client, agent_id)
    if pollers:
        seen = ", ".join(f"{p.identity} ({p.seconds_ago:.0f} s ago)" for p in pollers)
        raise AgentRunningError(
            f"{agent_id} is already running (worker {seen}). Two runtimes must not serve one "
            "agent: starting this one would open a new Session and fence the running one's "
            "work. Stop it first, or pass --replace to take over from it."
        )
