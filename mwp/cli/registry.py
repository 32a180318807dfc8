"""`mwp registry`: development keys and the Organization's Agent Registry.

    mwp registry init [--org ID]       registry service key + the registry workflow
    mwp registry add-human NAME        a human's key, registered as a signing-key binding
    mwp registry add-agent NAME        an agent's key and Agent Card, then a new session
    mwp registry show [--json]         bindings, Agent Cards and Session Epochs

Keys are JSON files under ``<state>/keys/`` (mode 0600; seeds are never printed); the
Organization's ID is remembered in ``<state>/organization.json``. Needs a running stack
(``mwp dev``, or ``--address`` of another Temporal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mwp.cli import defaults
from mwp.client.state_dir import ORGANIZATION_FILE, REGISTRY_KEY_NAME

if TYPE_CHECKING:
    from mwp.client import Identity, KeyStore, MwpClient, OrganizationRegistryClient

DEFAULT_ORGANIZATION = "urn:mwp:organization:dev"
REGISTRY_SERVICE = "urn:mwp:service:registry"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class RegistryCliError(Exception):
    """A user-facing failure: printed without a traceback."""


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


def _handler(action: Any) -> Any:
    def handle(args: argparse.Namespace) -> int:
        from mwp.client import ClientError
        from mwp.core.errors import MwpError

        try:
            return int(asyncio.run(action(args)))
        except (RegistryCliError, ClientError) as exc:
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
        raise RegistryCliError(str(exc)) from None


def _name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise RegistryCliError(f"invalid name {value!r}: use a-z, 0-9 and '-', at most 63")
    return value


async def _registry(args: argparse.Namespace) -> tuple[MwpClient, OrganizationRegistryClient]:
    from mwp.client import connect

    organization_id = _organization_id(args)
    registrar = _keys(args).load(REGISTRY_KEY_NAME)
    client = await connect(args.address, args.namespace)
    return client, client.registry(organization_id, registrar)


def _load_or_create(keys: KeyStore, name: str, principal_type: str, principal_id: str) -> Identity:
    """The existing key file for ``name``, or a new identity saved under it."""
    from mwp.client import Identity
    from mwp.core.trust.registry import Principal

    if keys.exists(name):
        identity = keys.load(name)
        if identity.principal != Principal(principal_type, principal_id):
            raise RegistryCliError(f"key file {keys.path(name)} belongs to another Principal")
        return identity
    identity = Identity.generate(Principal(principal_type, principal_id))
    keys.save(name, identity)
    return identity


# --- actions --------------------------------------------------------------------------------


async def _init(args: argparse.Namespace) -> int:
    from mwp.client import connect

    path = args.state_dir / ORGANIZATION_FILE
    if path.exists():
        organization_id = json.loads(path.read_text())["organizationId"]
        if args.org and args.org != organization_id:
            raise RegistryCliError(f"{path} already names Organization {organization_id}")
    else:
        organization_id = args.org or DEFAULT_ORGANIZATION
    keys = _keys(args)
    registrar = _load_or_create(keys, REGISTRY_KEY_NAME, "service", REGISTRY_SERVICE)
    client = await connect(args.address, args.namespace)
    registry = await client.start_registry(organization_id, registrar)
    evidence = await registry.evidence()
    if registrar.key_id not in evidence.bindings:
        raise RegistryCliError(
            f"the registry of {organization_id} already runs with another registry service key; "
            f"its key file is not in {keys.directory}"
        )
    from mwp.contracts.messages import group_authority
    from mwp.log.keys import AuthorityKeyring, provision_group_authority

    keyring = AuthorityKeyring.in_state_dir(args.state_dir)
    authority = await provision_group_authority(registry, keyring, group_authority(organization_id))
    args.state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"organizationId": organization_id}, indent=2) + "\n")
    print(f"Organization  {organization_id}")
    print(f"Registry      workflow {registry.workflow_id} (revision {await registry.revision()})")
    print(f"Service key   {registrar.key_id}")
    print(f"              {keys.path(REGISTRY_KEY_NAME)} (0600; keep it private)")
    print(f"Authority key {authority.key_id}")
    print(f"              signs the Group Event log; in {keyring.directory}")
    return 0


async def _add_human(args: argparse.Namespace) -> int:
    name = _name(args.name)
    _, registry = await _registry(args)
    keys = _keys(args)
    human = _load_or_create(keys, f"human-{name}", "human", f"urn:mwp:human:{name}")
    result = await registry.register_binding(human)
    print(f"Human         {human.principal.id}")
    print(f"Key           {human.key_id}")
    print(f"              {keys.path(f'human-{name}')}")
    print(f"Registry      revision {result['revision']}")
    return 0


async def _add_agent(args: argparse.Namespace) -> int:
    from mwp.client import dev_capability
    from mwp.core.trust.registry import Principal

    name = _name(args.name)
    _, registry = await _registry(args)
    keys = _keys(args)
    agent = _load_or_create(keys, f"agent-{name}", "agent", f"urn:mwp:agent:{name}")
    owner = (
        Principal("human", f"urn:mwp:human:{_name(args.owner)}")
        if args.owner
        else Principal("service", REGISTRY_SERVICE)
    )
    capabilities = []
    for declared in args.capability or ["mwp.dev.general"]:
        capability_id, _, version = declared.partition("@")
        capabilities.append(dev_capability(capability_id, version or "1.0.0"))
    card = await registry.agent_card(agent.principal.id)
    if card is None or agent.key_id not in {k["keyId"] for k in card["publicKeys"]}:
        version = 1 if card is None else card["cardVersion"] + 1
        result = await registry.register_agent(
            agent, owner=owner, capabilities=capabilities, card_version=version
        )
        card_version = result["cardVersion"]
    else:
        card_version = card["cardVersion"]
    epoch = await registry.open_session(agent.principal.id)
    print(f"Agent         {agent.principal.id} (Agent Card version {card_version})")
    print(f"Key           {agent.key_id}")
    print(f"              {keys.path(f'agent-{name}')}")
    print(f"Session Epoch {epoch}")
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
