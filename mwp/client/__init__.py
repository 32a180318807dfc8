"""The MWP client SDK: connect to Temporal, sign as a human, agent or service, and talk to the
Organization's registry (later also to Missions).

>>> client = await connect("127.0.0.1:7233")
>>> registrar = Identity.generate(Principal("service", "urn:mwp:service:acme:registry"))
>>> registry = await client.start_registry("urn:mwp:organization:acme", registrar)
>>> ada = Identity.generate(Principal("human", "urn:mwp:human:ada"))
>>> await registry.register_binding(ada)
>>> evidence = await registry.evidence()          # complete RegistryEvidence for stage 4

Every Command is signed here and decided by an Authority workflow as a Temporal Update; a
rejection comes back as a typed :class:`~mwp.core.errors.MwpError` (a
:class:`~mwp.contracts.errors.RemoteMwpError` carrying the wire error object).

Extension points: Mission Commands (``create_mission``, ``send``, ``mission_view``...) belong
on :class:`MwpClient` and go through :meth:`MwpClient.send_command`, which already does the
signing-hash Update ID and the error mapping; signing is :meth:`Identity.command`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from mwp import PROTOCOL_VERSION
from mwp.contracts.errors import raising_mwp_errors
from mwp.contracts.names import AUTHORITY_TASK_QUEUE
from mwp.core.organization.service import (
    AGENT_CARD_REGISTER,
    KEY_BINDING_REGISTER,
    KEY_VALIDITY_CHANGE,
    QUERY_AGENT_CARD,
    QUERY_REGISTRY_EVIDENCE,
    QUERY_REVISION,
    QUERY_SESSION_EPOCHS,
    QUERY_VIEW,
    REGISTRY_WORKFLOW_TYPE,
    SESSION_OPEN,
    UPDATE_FOR_KIND,
    OrganizationRegistryInput,
    organization_workflow_id,
)
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.trust.signed_document import sign, signing_hash
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import b64url_decode, b64url_encode, format_utc

KEY_FILE_FORMAT = "mwp-signing-identity/1"
_KEY_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")


class ClientError(RuntimeError):
    """The client could not do what was asked (no server, no such workflow, bad key file)."""


def utc_now() -> str:
    """The current time as a protocol timestamp (whole seconds, ``Z``)."""
    return format_utc(datetime.now(UTC).replace(microsecond=0))


def new_id() -> str:
    return f"urn:uuid:{uuid.uuid4()}"


def wire_text(document: Mapping[str, Any]) -> str:
    """The exact JSON text sent for a Signed Document (its JCS form, which is strict JSON)."""
    return canonicalize(document).decode("utf-8")


# --- signing identities ---------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Identity:
    """Who signs: a Principal, one of its key IDs and the private key. Never printed."""

    principal: Principal
    key_id: str
    key: SigningKey
    valid_from: str

    @classmethod
    def generate(
        cls, principal: Principal, *, key_id: str | None = None, valid_from: str | None = None
    ) -> Identity:
        """A fresh key; its key ID is new (key IDs are never reused)."""
        name = re.sub(r"[^a-z0-9-]", "-", principal.id.rsplit(":", 1)[-1].lower())
        key_id = key_id or f"urn:mwp:key:{principal.type}:{name}:{uuid.uuid4().hex[:12]}"
        return cls(principal, key_id, SigningKey.generate(), valid_from or utc_now())

    def __repr__(self) -> str:
        return f"Identity({self.principal.type} {self.principal.id}, key {self.key_id})"

    @property
    def public_key(self) -> str:
        return b64url_encode(self.key.public_key)

    def binding(self) -> dict[str, Any]:
        """The signing-key binding to register: ``{keyId, principal, algorithm, ...}``."""
        return {
            "keyId": self.key_id,
            "principal": self.principal.to_json(),
            "algorithm": "Ed25519",
            "publicKey": self.public_key,
            "validFrom": self.valid_from,
        }

    def public_key_entry(self) -> dict[str, Any]:
        """This key as an Agent Card ``publicKeys`` entry."""
        return {k: v for k, v in self.binding().items() if k != "principal"}

    def sign(self, document: Mapping[str, Any], profile_id: str) -> dict[str, Any]:
        return sign(document, profile_id, self.key_id, self.key)

    def command(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        group_id: str | None = None,
        session_epoch: int | None = None,
        membership_epoch: int | None = None,
        coordinator_epoch: int | None = None,
        conversation_id: str | None = None,
        work_item_id: str | None = None,
        expected_revision: int | None = None,
        correlation_id: str | None = None,
        caused_by_event_id: str | None = None,
        action_id: str | None = None,
        issued_at: str | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A signed Command by this identity (absent options are omitted, never invented)."""
        optional = {
            "sessionEpoch": session_epoch,
            "membershipEpoch": membership_epoch,
            "coordinatorEpoch": coordinator_epoch,
            "groupId": group_id,
            "conversationId": conversation_id,
            "workItemId": work_item_id,
            "expectedRevision": expected_revision,
            "causedByEventId": caused_by_event_id,
            "extensions": dict(extensions) if extensions is not None else None,
        }
        command: dict[str, Any] = {
            "protocolVersion": PROTOCOL_VERSION,
            "actionId": action_id or new_id(),
            "actor": self.principal.to_json(),
            "kind": kind,
            "correlationId": correlation_id or new_id(),
            "issuedAt": issued_at or utc_now(),
            "payload": dict(payload),
            **{k: v for k, v in optional.items() if v is not None},
        }
        return self.sign(command, "command")

    # --- key files --------------------------------------------------------------------------

    def to_key_file(self) -> dict[str, Any]:
        return {
            "format": KEY_FILE_FORMAT,
            **self.binding(),
            "seed": b64url_encode(self.key.seed()),
        }

    @classmethod
    def from_key_file(cls, value: Mapping[str, Any]) -> Identity:
        if value.get("format") != KEY_FILE_FORMAT:
            raise ClientError("not an MWP signing identity file")
        key = SigningKey(b64url_decode(value["seed"]))
        if b64url_encode(key.public_key) != value["publicKey"]:
            raise ClientError("the key file's seed does not match its public key")
        return cls(Principal.from_json(value["principal"]), value["keyId"], key, value["validFrom"])

    def save(self, path: Path, *, overwrite: bool = False) -> None:
        """Write a 0600 key file (created exclusively unless ``overwrite``)."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)
            json.dump(self.to_key_file(), handle, indent=2)
            handle.write("\n")

    @classmethod
    def load(cls, path: Path) -> Identity:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise ClientError(f"no key file {path}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ClientError(f"{path} is readable by others; run: chmod 600 {path}")
        return cls.from_key_file(json.loads(path.read_text()))


class KeyStore:
    """Named key files in one folder (``.mwp/keys/<name>.json``, mode 0600)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def in_state_dir(cls, state_dir: Path) -> KeyStore:
        return cls(state_dir / "keys")

    def path(self, name: str) -> Path:
        if not _KEY_NAME.fullmatch(name):
            raise ClientError(f"invalid key name {name!r} (use a-z, 0-9, '.', '_' and '-')")
        return self.directory / f"{name}.json"

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def save(self, name: str, identity: Identity, *, overwrite: bool = False) -> Path:
        path = self.path(name)
        try:
            identity.save(path, overwrite=overwrite)
        except FileExistsError:
            raise ClientError(f"key file {path} already exists") from None
        return path

    def load(self, name: str) -> Identity:
        return Identity.load(self.path(name))

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.json"))


# --- Agent Cards ----------------------------------------------------------------------------

_ANY_OBJECT_SCHEMA = {"type": "object"}


def dev_capability(capability_id: str, version: str = "1.0.0") -> dict[str, Any]:
    """A capability declaration accepting and returning any JSON object (development only)."""
    schema_hash = sha256_ref(canonicalize(_ANY_OBJECT_SCHEMA))
    return {
        "id": capability_id,
        "version": version,
        "inputSchema": "urn:mwp:schema:any-object",
        "inputSchemaHash": schema_hash,
        "outputSchema": "urn:mwp:schema:any-object",
        "outputSchemaHash": schema_hash,
        "constraints": {},
        "verifiedEvidence": ["urn:mwp:evidence:development-registration"],
    }


def agent_card(
    agent: Identity,
    *,
    organization_id: str,
    owner: Principal,
    display_name: str,
    capabilities: Sequence[Mapping[str, Any]],
    card_version: int = 1,
    max_concurrency: int = 1,
    endpoint: str | None = None,
    issued_at: str | None = None,
) -> dict[str, Any]:
    """An unsigned Agent Card for ``agent`` (the Organization's registry service signs it)."""
    name = agent.principal.id.rsplit(":", 1)[-1]
    return {
        "agentId": agent.principal.id,
        "organizationId": organization_id,
        "cardVersion": card_version,
        "displayName": display_name,
        "owner": owner.to_json(),
        "status": "active",
        "protocolVersions": [PROTOCOL_VERSION],
        "endpoints": [{"transport": "wss", "uri": endpoint or f"wss://{name}.agents.invalid/mwp"}],
        "publicKeys": [agent.public_key_entry()],
        "capabilities": [dict(c) for c in capabilities],
        "maxConcurrency": max_concurrency,
        "issuedAt": issued_at or utc_now(),
    }


# --- the client -----------------------------------------------------------------------------


class MwpClient:
    """A connection to the runtime's Temporal namespace."""

    def __init__(self, temporal: Client, *, task_queue: str = AUTHORITY_TASK_QUEUE) -> None:
        self.temporal = temporal
        self.task_queue = task_queue

    @property
    def namespace(self) -> str:
        return self.temporal.namespace

    async def send_command(
        self, workflow_id: str, update: str, command: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Send one signed Command to an Authority workflow; its result or a typed MwpError.

        The Update ID is the Command's signing hash: Temporal deduplicates a byte-equal retry
        within a run, and the Authority's ``(actor, actionId)`` table does beyond it.
        """
        handle = self.temporal.get_workflow_handle(workflow_id)
        with _not_found_as(workflow_id), raising_mwp_errors():
            result: dict[str, Any] = await handle.execute_update(
                update, wire_text(command), id=signing_hash(command), result_type=dict
            )
        return result

    async def query(self, workflow_id: str, query: str, *args: Any) -> Any:
        handle = self.temporal.get_workflow_handle(workflow_id)
        with _not_found_as(workflow_id):
            return await handle.query(query, *args) if args else await handle.query(query)

    async def workflow_result(self, workflow_id: str) -> Any:
        """What a workflow returned (waiting for it to end)."""
        handle = self.temporal.get_workflow_handle(workflow_id)
        with _not_found_as(workflow_id):
            return await handle.result()

    def registry(
        self, organization_id: str, registrar: Identity | None = None
    ) -> OrganizationRegistryClient:
        """The Organization's registry; ``registrar`` signs its changes (the registry service)."""
        return OrganizationRegistryClient(self, organization_id, registrar)

    async def start_registry(
        self,
        organization_id: str,
        registrar: Identity,
        *,
        session_authorities: Sequence[str] = (),
        continue_as_new_after_events: int | None = None,
    ) -> OrganizationRegistryClient:
        """Ensure the registry workflow runs, with ``registrar``'s key as its trust root.

        Idempotent: an already running registry is reused as it is (its trust root is not
        changed by a later call).
        """
        if registrar.principal.type != "service":
            raise ClientError("the registry service must be a service Principal")
        start = OrganizationRegistryInput(
            organization_id=organization_id,
            registry_service_binding=registrar.binding(),
            session_authorities=list(session_authorities),
            continue_as_new_after_events=continue_as_new_after_events,
        )
        await self.temporal.start_workflow(
            REGISTRY_WORKFLOW_TYPE,
            start,
            id=organization_workflow_id(organization_id),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"Agent Registry and Session Epochs of {organization_id}",
        )
        return self.registry(organization_id, registrar)


class OrganizationRegistryClient:
    """Commands and queries of one Organization's ``OrganizationRegistryWorkflow``."""

    def __init__(self, client: MwpClient, organization_id: str, registrar: Identity | None) -> None:
        self.client = client
        self.organization_id = organization_id
        self.workflow_id = organization_workflow_id(organization_id)
        self.registrar = registrar

    def handle(self) -> WorkflowHandle[Any, Any]:
        return self.client.temporal.get_workflow_handle(self.workflow_id)

    async def submit(
        self, kind: str, payload: Mapping[str, Any], *, expected_revision: int | None = None
    ) -> dict[str, Any]:
        """Sign a registry Command as the registrar and send it."""
        if self.registrar is None:
            raise ClientError("registry changes need the registry service identity")
        command = self.registrar.command(kind, payload, expected_revision=expected_revision)
        return await self.client.send_command(self.workflow_id, UPDATE_FOR_KIND[kind], command)

    async def register_binding(
        self, binding: Identity | Mapping[str, Any], *, expected_revision: int | None = None
    ) -> dict[str, Any]:
        """Register a signing-key binding (agent, human or service)."""
        body = binding.binding() if isinstance(binding, Identity) else dict(binding)
        return await self.submit(
            KEY_BINDING_REGISTER, {"binding": body}, expected_revision=expected_revision
        )

    async def change_key_validity(
        self, key_id: str, *, valid_until: str | None = None, revoked_at: str | None = None
    ) -> dict[str, Any]:
        """Add or move earlier a key's ``validUntil`` / ``revokedAt`` (never later)."""
        boundaries = {"validUntil": valid_until, "revokedAt": revoked_at}
        payload = {"keyId": key_id, **{k: v for k, v in boundaries.items() if v is not None}}
        return await self.submit(KEY_VALIDITY_CHANGE, payload)

    async def register_agent_card(self, card: Mapping[str, Any]) -> dict[str, Any]:
        """Register an Agent Card; an unsigned card is signed by the registrar first."""
        if self.registrar is None:
            raise ClientError("registering an Agent Card needs the registry service identity")
        signed = dict(card) if "signature" in card else self.registrar.sign(card, "agent-card")
        return await self.submit(AGENT_CARD_REGISTER, {"agentCard": signed})

    async def register_agent(
        self,
        agent: Identity,
        *,
        owner: Principal,
        display_name: str | None = None,
        capabilities: Sequence[Mapping[str, Any]] = (),
        card_version: int = 1,
    ) -> dict[str, Any]:
        """Issue and register a development Agent Card for ``agent`` (binds its key too)."""
        card = agent_card(
            agent,
            organization_id=self.organization_id,
            owner=owner,
            display_name=display_name or agent.principal.id.rsplit(":", 1)[-1],
            capabilities=list(capabilities) or [dev_capability("mwp.dev.general")],
            card_version=card_version,
        )
        return await self.register_agent_card(card)

    async def open_session(self, agent_id: str) -> int:
        """Open a new session for ``agent_id``: its new Session Epoch fences all older ones."""
        result = await self.submit(SESSION_OPEN, {"agentId": agent_id})
        epoch: int = result["sessionEpoch"]
        return epoch

    async def evidence_json(self) -> dict[str, Any]:
        value: dict[str, Any] = await self.client.query(self.workflow_id, QUERY_REGISTRY_EVIDENCE)
        return value

    async def evidence(self) -> RegistryEvidence:
        """The complete, validated Registry evidence of the current revision."""
        return RegistryEvidence.from_json(await self.evidence_json())

    async def session_epochs(self) -> dict[str, int]:
        value: dict[str, int] = await self.client.query(self.workflow_id, QUERY_SESSION_EPOCHS)
        return value

    async def revision(self) -> int:
        value: int = await self.client.query(self.workflow_id, QUERY_REVISION)
        return value

    async def agent_card(self, agent_id: str) -> dict[str, Any] | None:
        value: dict[str, Any] | None = await self.client.query(
            self.workflow_id, QUERY_AGENT_CARD, agent_id
        )
        return value

    async def view(self) -> dict[str, Any]:
        value: dict[str, Any] = await self.client.query(self.workflow_id, QUERY_VIEW)
        return value


@contextmanager
def _not_found_as(workflow_id: str) -> Iterator[None]:
    """Turn Temporal's NOT_FOUND for a workflow into a :class:`ClientError` naming it."""
    try:
        yield
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ClientError(f"no running workflow {workflow_id}: {exc.message}") from exc
        raise


async def connect(
    address: str = "127.0.0.1:7233", namespace: str = "default", *, timeout: float = 10.0
) -> MwpClient:
    """Connect to the runtime's Temporal; a :class:`ClientError` if nothing answers."""
    try:
        temporal = await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout)
    except Exception as exc:
        raise ClientError(
            f"cannot reach Temporal at {address} (namespace {namespace}): {exc}. "
            "Start the embedded stack with `mwp dev`, or pass --address."
        ) from exc
    return MwpClient(temporal)
