"""`mwp registry`: development keys and the Organization's Agent Registry.

    mwp registry init [--org ID]       registry service key + the registry workflow
    mwp registry add-human NAME        a human's key, registered as a signing-key binding
    mwp registry add-agent NAME        an agent's key and Agent Card, then a new session
    mwp registry show [--json]         bindings, Agent Cards and Session Epochs
    mwp registry performance AGENT [--capability ID@VERSION] [--json]
                                       the agent's performance records, from the Group logs

Keys are JSON files under ``<state>/keys/`` (mode 0600; seeds are never printed); the
Organization's ID is remembered in ``<state>/organization.json``. Needs a running stack
(``mwp dev``, or ``--address`` of another Temporal). ``performance`` reads the Group logs in
the object store too (``--store``, as ``mwp log``): it is for the authority zone's operators,
who see every Event of the record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mwp.cli import defaults
from mwp.client.state_dir import REGISTRY_KEY_NAME
from mwp.dev.registration import (
    DEFAULT_ORGANIZATION,
    RegistrationError,
    add_agent,
    add_human,
    checked_name,
    init_organization,
)

if TYPE_CHECKING:
    from mwp.client import KeyStore, MwpClient, OrganizationRegistryClient


def register(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    common.add_argument("--namespace", default="default", help="Temporal namespace")
    common.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (default: ./.mwp)"
    )
    parser = subparsers.add_parser(
        "registry",
        help="development keys and the Organization's Agent Registry",
        description="Create development keys and register them with the Agent Registry.",
    )
    actions = parser.add_subparsers(dest="registry_command", metavar="ACTION", required=True)

    init = actions.add_parser(
        "init", parents=[common], help="create the registry service key, start the registry"
    )
    init.add_argument("--org", help=f"Organization ID (default {DEFAULT_ORGANIZATION})")
    init.set_defaults(handler=_handler(_init))

    human = actions.add_parser("add-human", parents=[common], help="create and register a human")
    human.add_argument("name", help="lower-case name, e.g. ada")
    human.set_defaults(handler=_handler(_add_human))

    agent = actions.add_parser(
        "add-agent", parents=[common], help="create and register an agent, open its session"
    )
    agent.add_argument("name", help="lower-case name, e.g. builder")
    agent.add_argument("--owner", help="owning human's name (default: the registry service)")
    agent.add_argument(
        "--capability",
        action="append",
        default=[],
        metavar="ID[@VERSION]",
        help="declared capability, e.g. acme.code.python@1.0.0 (repeatable)",
    )
    agent.set_defaults(handler=_handler(_add_agent))

    show = actions.add_parser("show", parents=[common], help="show the registry")
    show.add_argument("--json", action="store_true", help="print the full state as JSON")
    show.set_defaults(handler=_handler(_show))

    performance = actions.add_parser(
        "performance",
        parents=[common],
        help="an agent's performance records, per capability, from every Group log",
        description="Derive the agent's capability-specific performance records from the "
        "Organization's signed Group logs: per outcome, the Events that prove it.",
    )
    performance.add_argument("agent", metavar="AGENT", help="the agent's ID")
    performance.add_argument("--capability", metavar="ID@VERSION", help="only this capability")
    performance.add_argument(
        "--store",
        default=None,
        help="the Group logs' folder or s3://bucket[/prefix] (default $MWP_OBJECT_STORE, "
        "else .mwp/objects)",
    )
    performance.add_argument("--org", help="Organization ID (default: from the state folder)")
    performance.add_argument("--json", action="store_true", help="print the records as JSON")
    performance.set_defaults(handler=_handler(_performance))


def _handler(action: Any) -> Any:
    def handle(args: argparse.Namespace) -> int:
        from mwp.client import ClientError
        from mwp.core.errors import MwpError

        try:
            return int(asyncio.run(action(args)))
        except (RegistrationError, ClientError) as exc:  # a user-facing line, no traceback
            print(f"mwp registry: {exc}", file=sys.stderr)
            return 1
        except MwpError as exc:
            detail = f" ({exc.details})" if exc.details else ""
            print(
                f"mwp registry: refused: {exc.code.value}: {exc.message}{detail}", file=sys.stderr
            )
            return 1

    return handle


# --- helpers --------------------------------------------------------------------------------


def _keys(args: argparse.Namespace) -> KeyStore:
    from mwp.client import KeyStore

    return KeyStore.in_state_dir(args.state_dir)


def _organization_id(args: argparse.Namespace) -> str:
    from mwp.client.state_dir import StateDirError, organization_id_of

    try:
        return organization_id_of(args.state_dir)
    except StateDirError as exc:
        raise RegistrationError(str(exc)) from None


async def _registry(args: argparse.Namespace) -> tuple[MwpClient, OrganizationRegistryClient]:
    from mwp.client import connect

    organization_id = _organization_id(args)
    registrar = _keys(args).load(REGISTRY_KEY_NAME)
    client = await connect(args.address, args.namespace)
    return client, client.registry(organization_id, registrar)


# --- actions --------------------------------------------------------------------------------


async def _init(args: argparse.Namespace) -> int:
    from mwp.client import connect

    client = await connect(args.address, args.namespace)
    organization = await init_organization(client, args.state_dir, args.org)
    registry, keys = organization.registry, organization.keys
    print(f"Organization  {registry.organization_id}")
    print(f"Registry      workflow {registry.workflow_id} (revision {await registry.revision()})")
    print(f"Service key   {organization.registrar.key_id}")
    print(f"              {keys.path(REGISTRY_KEY_NAME)} (0600; keep it private)")
    print(f"Authority key {organization.authority.key_id}")
    print(f"              signs the Group Event log; in {organization.keyring.directory}")
    return 0


async def _add_human(args: argparse.Namespace) -> int:
    name = checked_name(args.name)
    _, registry = await _registry(args)
    keys = _keys(args)
    human = await add_human(registry, keys, name)
    print(f"Human         {human.identity.principal.id}")
    print(f"Key           {human.identity.key_id}")
    print(f"              {keys.path(f'human-{name}')}")
    print(f"Registry      revision {human.revision}")
    return 0


async def _add_agent(args: argparse.Namespace) -> int:
    name = checked_name(args.name)
    _, registry = await _registry(args)
    keys = _keys(args)
    agent = await add_agent(registry, keys, name, owner=args.owner, capabilities=args.capability)
    print(f"Agent         {agent.identity.principal.id} (Agent Card version {agent.card_version})")
    print(f"Key           {agent.identity.key_id}")
    print(f"              {keys.path(f'agent-{name}')}")
    print(f"Session Epoch {agent.session_epoch}")
    return 0


async def _show(args: argparse.Namespace) -> int:
    _, registry = await _registry(args)
    view = await registry.view()
    evidence = await registry.evidence_json()
    if args.json:
        print(json.dumps({**view, "evidence": evidence}, indent=2, sort_keys=True))
        return 0
    print(f"Organization  {view['organizationId']} (revision {view['revision']})")
    print(f"Registry      {registry.workflow_id}, service {view['registryServiceId']}")
    print("Signing-key bindings:")
    for binding in evidence["bindings"]:
        principal = binding["principal"]
        state = ""
        for status in binding["validityHistory"]:
            for member in ("validUntil", "revokedAt"):
                if member in status:
                    state += f" {member}={status[member]}"
        print(f"  {principal['type']:<8} {principal['id']:<40} {binding['keyId']}{state}")
    epochs = view["sessionEpochs"]
    cards = view["agentCards"]
    if cards or epochs:
        print("Agents:")
        for agent_id in sorted(set(cards) | set(epochs)):
            card = f"card v{cards[agent_id]}" if agent_id in cards else "no card"
            print(f"  {agent_id:<40} {card}, Session Epoch {epochs.get(agent_id, '-')}")
    return 0


async def _performance(args: argparse.Namespace) -> int:
    import os

    from mwp.cli.log import DEFAULT_STORE, STORE_ENV
    from mwp.client import connect
    from mwp.client.state_dir import StateDirError, organization_id_of
    from mwp.contracts.messages import group_authority
    from mwp.gateway.performance import RegistryPerformance
    from mwp.stores.objects import open_store

    try:
        organization_id = organization_id_of(args.state_dir, args.org)
    except StateDirError as exc:
        raise RegistrationError(str(exc)) from None
    client = await connect(args.address, args.namespace)
    location = str(args.store or os.environ.get(STORE_ENV) or DEFAULT_STORE)
    records = RegistryPerformance(
        open_store(location),
        client.registry(organization_id).evidence,
        group_authority(organization_id),
    )
    await records.refresh()
    found = records.records(args.agent, args.capability)
    if args.json:
        print(json.dumps({"agentId": args.agent, "records": [r.to_json() for r in found]}))
        return 0
    print(f"Agent         {args.agent}")
    if not found:
        print("              no performance record")
    for record in found:
        print(f"Capability    {record.capability}")
        for outcome, count in record.counts.items():
            cited = ", ".join(record.cited[outcome])
            print(f"  {outcome:<18} {count:>4}  {cited}".rstrip())
    return 0
