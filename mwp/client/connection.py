"""A connection to the runtime's Temporal namespace (Commands as Updates, queries, typed errors)
and the Organization registry workflow seen through it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from temporalio.client import Client, Interceptor, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from mwp.client.identity import ClientError, Identity, agent_card, dev_capability
from mwp.client.limits import command_wire, server_limits_as_mwp_errors
from mwp.contracts.errors import raising_mwp_errors
from mwp.contracts.names import AUTHORITY_TASK_QUEUE
from mwp.contracts.organization import (
    QUERY_AGENT_CARD,
    QUERY_REGISTRY_EVIDENCE,
    QUERY_REVISION,
    QUERY_SESSION_EPOCHS,
    QUERY_VIEW,
    REGISTRY_WORKFLOW_TYPE,
    UPDATE_FOR_KIND,
    OrganizationRegistryInput,
    organization_workflow_id,
)
from mwp.core.organization.service import (
    AGENT_CARD_REGISTER,
    KEY_BINDING_REGISTER,
    KEY_VALIDITY_CHANGE,
    SESSION_OPEN,
)
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.trust.signed_document import signing_hash

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
        within a run, and the Authority's ``(actor, actionId)`` table does beyond it. A
        Command over ``MAX_COMMAND_BYTES`` is refused here, unsent (``PROTOCOL_VIOLATION``).
        """
        text = command_wire(command)
        handle = self.temporal.get_workflow_handle(workflow_id)
        with _not_found_as(workflow_id), raising_mwp_errors(), server_limits_as_mwp_errors():
            result: dict[str, Any] = await handle.execute_update(
                update, text, id=signing_hash(command), result_type=dict
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
    address: str = "127.0.0.1:7233",
    namespace: str = "default",
    *,
    timeout: float = 10.0,
    interceptors: Sequence[Interceptor] = (),
) -> MwpClient:
    """Connect to the runtime's Temporal; a :class:`ClientError` if nothing answers.
    ``interceptors``: client interceptors, e.g. the tracing one (docs/operations.md)."""
    try:
        temporal = await asyncio.wait_for(
            Client.connect(address, namespace=namespace, interceptors=interceptors), timeout
        )
    except Exception as exc:
        raise ClientError(
            f"cannot reach Temporal at {address} (namespace {namespace}): {exc}. "
            "Start the embedded stack with `mwp dev`, or pass --address."
        ) from exc
    return MwpClient(temporal)
