"""Development keys in a state folder, registered with the Organization's Agent Registry: what
`mwp registry init`, `add-human` and `add-agent` do, as functions over one connection, so that a
program (the proof of concept) registers a whole cast without a process per principal.

Keys are JSON files under ``<state>/keys/`` (mode 0600), the Group Authority's key in the state
folder's keyring, and the Organization's ID in ``<state>/organization.json``: where the
commands put them, so that `mwp agent run` and the rest of the CLI find them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mwp.client import Identity, KeyStore, MwpClient, OrganizationRegistryClient, dev_capability
from mwp.client.state_dir import ORGANIZATION_FILE, REGISTRY_KEY_NAME
from mwp.contracts.messages import group_authority
from mwp.core.trust.registry import Principal
from mwp.log.keys import AuthorityKeyring, provision_group_authority

DEFAULT_ORGANIZATION = "urn:mwp:organization:dev"
REGISTRY_SERVICE = "urn:mwp:service:registry"
DEFAULT_CAPABILITY = "mwp.dev.general"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class RegistrationError(Exception):
    """What cannot be registered as asked (the message is a user-facing line)."""


@dataclass(frozen=True)
class Organization:
    """An Organization whose registry runs: ``registry`` signs as its registry service."""

    registry: OrganizationRegistryClient
    registrar: Identity
    authority: Identity
    keys: KeyStore
    keyring: AuthorityKeyring


@dataclass(frozen=True)
class RegisteredHuman:
    identity: Identity
    revision: int


@dataclass(frozen=True)
class RegisteredAgent:
    identity: Identity
    card_version: int
    session_epoch: int


def checked_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise RegistrationError(f"invalid name {value!r}: use a-z, 0-9 and '-', at most 63")
    return value


def load_or_create(keys: KeyStore, name: str, principal: Principal) -> Identity:
    """The existing key file ``name``, or a new identity of ``principal`` saved under it."""
    if keys.exists(name):
        identity = keys.load(name)
        if identity.principal != principal:
            raise RegistrationError(f"key file {keys.path(name)} belongs to another Principal")
        return identity
    identity = Identity.generate(principal)
    keys.save(name, identity)
    return identity


async def init_organization(
    client: MwpClient, state_dir: Path, organization_id: str | None = None
) -> Organization:
    """The registry service key, the registry workflow and the Group Authority's key binding
    (idempotent: a state folder that names an Organization keeps it)."""
    path = state_dir / ORGANIZATION_FILE
    if path.exists():
        remembered = json.loads(path.read_text())["organizationId"]
        if organization_id and organization_id != remembered:
            raise RegistrationError(f"{path} already names Organization {remembered}")
        organization_id = remembered
    organization_id = organization_id or DEFAULT_ORGANIZATION
    keys = KeyStore.in_state_dir(state_dir)
    service = Principal("service", REGISTRY_SERVICE)
    registrar = load_or_create(keys, REGISTRY_KEY_NAME, service)
    registry = await client.start_registry(organization_id, registrar)
    evidence = await registry.evidence()
    if registrar.key_id not in evidence.bindings:
        raise RegistrationError(
            f"the registry of {organization_id} already runs with another registry service key; "
            f"its key file is not in {keys.directory}"
        )
    keyring = AuthorityKeyring.in_state_dir(state_dir)
    authority = await provision_group_authority(registry, keyring, group_authority(organization_id))
    state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"organizationId": organization_id}, indent=2) + "\n")
    return Organization(registry, registrar, authority, keys, keyring)


async def add_human(
    registry: OrganizationRegistryClient, keys: KeyStore, name: str
) -> RegisteredHuman:
    """The human ``name``'s key (key file ``human-NAME``), registered as a signing-key binding."""
    principal = Principal("human", f"urn:mwp:human:{checked_name(name)}")
    human = load_or_create(keys, f"human-{name}", principal)
    result = await registry.register_binding(human)
    return RegisteredHuman(human, int(result["revision"]))


async def add_agent(
    registry: OrganizationRegistryClient,
    keys: KeyStore,
    name: str,
    *,
    owner: str | None = None,
    capabilities: Sequence[str] = (),
) -> RegisteredAgent:
    """The agent ``name``'s key (key file ``agent-NAME``) and an Agent Card declaring
    ``capabilities`` (``ID[@VERSION]``), owned by the human ``owner`` (default: the registry
    service); a card is registered only when the Registry's lacks this key. Then a new Session,
    which fences any earlier one."""
    principal = Principal("agent", f"urn:mwp:agent:{checked_name(name)}")
    agent = load_or_create(keys, f"agent-{name}", principal)
    owning = (
        Principal("human", f"urn:mwp:human:{checked_name(owner)}")
        if owner
        else Principal("service", REGISTRY_SERVICE)
    )
    declared = []
    for text in capabilities or [DEFAULT_CAPABILITY]:
        capability_id, _, capability_version = text.partition("@")
        declared.append(dev_capability(capability_id, capability_version or "1.0.0"))
    card = await registry.agent_card(principal.id)
    if card is None or agent.key_id not in {k["keyId"] for k in card["publicKeys"]}:
        version = 1 if card is None else card["cardVersion"] + 1
        result = await registry.register_agent(
            agent, owner=owning, capabilities=declared, card_version=version
        )
        card_version = int(result["cardVersion"])
    else:
        card_version = int(card["cardVersion"])
    epoch = await registry.open_session(principal.id)
    return RegisteredAgent(agent, card_version, epoch)
