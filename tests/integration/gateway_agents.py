"""Agents as `mwp agent run` serves them by default, for the integration tests: through a real
gateway of the test's Organization (TLS 1.3, in this process), in the agents' namespace of the
session's dev server, with only the gateway's addresses, its CA and the agent's own ledger
folder: no Group log store, no authority namespace."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from mwp.agent import Agent, CapabilityContext, CardInfo, EvidenceItem, Submission
from mwp.agent.gateway_link import GatewaySettings
from mwp.client import Identity, MwpClient, connect
from mwp.contracts.agent import agent_workflow_id
from mwp.core.trust.registry import Principal
from mwp.dev.stack import ensure_namespace
from mwp.gateway.server import Gateway
from mwp.gateway.tls import development_certificates
from mwp.workers.agent import AgentSession, ensure_registered, run_agent_worker
from tests.integration.conftest import Organization
from tests.integration.test_gateway import running_gateway
from tests.integration.test_gateway_subscribe import OPTIONS

AGENTS_NAMESPACE = "mwp-agents-test"


def address_of(client: MwpClient) -> str:
    """The Temporal address ``client`` is connected to (the session's dev server)."""
    return str(client.temporal.service_client.config.target_host)


@asynccontextmanager
async def agent_gateway(
    client: MwpClient, organization: Organization, folder: Path
) -> AsyncIterator[tuple[Gateway, GatewaySettings]]:
    """A real gateway (WebSocket and Artifact listeners) of ``organization``, and the settings
    an agent needs to reach it: its two addresses and its CA, nothing else."""
    async with running_gateway(
        client, organization, folder, options=OPTIONS, artifact_port=0
    ) as running:
        address = running.gateway.artifact_address
        assert address is not None
        settings = GatewaySettings(
            running.uri,
            development_certificates(folder).ca_cert,  # the CA the gateway was given
            artifacts_url=f"https://127.0.0.1:{address[1]}",
        )
        yield running.gateway, settings


@asynccontextmanager
async def gateway_with_artifacts(
    client: MwpClient, organization: Organization, folder: Path
) -> AsyncIterator[GatewaySettings]:
    """:func:`agent_gateway`'s settings."""
    async with agent_gateway(client, organization, folder) as (_, settings):
        yield settings


async def agents_client(address: str) -> MwpClient:
    """A client of the agents' namespace (created once on the dev server)."""
    client = await connect(address, AGENTS_NAMESPACE)
    await ensure_namespace(client.temporal.service_client, AGENTS_NAMESPACE)
    return client


def scheduler_of(agents: MwpClient, agent_id: str) -> WorkflowHandle[Any, Any]:
    """The agent's AgentWorkflow, in the agents' namespace."""
    return agents.temporal.get_workflow_handle(agent_workflow_id(agent_id))


@asynccontextmanager
async def gateway_runtime(
    agent: Agent,
    settings: GatewaySettings,
    address: str,
    ledger: Path,
    *,
    report: Callable[[str], None] = lambda line: None,
    **scheduler_options: Any,
) -> AsyncIterator[AgentSession]:
    """``run_agent_worker`` in gateway mode, in the agents' namespace, until the block ends
    (``report`` gets its lines); the AgentWorkflow is terminated afterwards."""
    stop = asyncio.Event()
    ready: asyncio.Future[AgentSession] = asyncio.get_running_loop().create_future()
    scheduler_options.setdefault("lease_seconds", 6)
    running = asyncio.create_task(
        run_agent_worker(
            agent,
            address=address,
            namespace=AGENTS_NAMESPACE,
            state_dir=ledger / "no-state",  # never read in gateway mode
            tool_store=str(ledger),
            gateway=settings,
            scheduler_options=scheduler_options,
            on_ready=ready.set_result,
            stop=stop,
            report=report,
        )
    )
    try:
        async with asyncio.timeout(30):
            done, _ = await asyncio.wait({running, ready}, return_when=asyncio.FIRST_COMPLETED)
        if running in done:
            running.result()  # raises what stopped it
        yield ready.result()
    finally:
        stop.set()
        await running
        agents = await connect(address, AGENTS_NAMESPACE)
        with contextlib.suppress(RPCError):  # a later runtime of the agent ended it already
            await scheduler_of(agents, agent.agent_id).terminate("test over")


def sample_agent(organization_id: str, name: str) -> Agent:
    """A new Agent of the Organization, with its own key, named ``name`` (its card's too)."""
    agent_id = f"urn:mwp:agent:{name.lower()}-{uuid.uuid4().hex[:8]}"
    return Agent(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo(organization_id, Principal("human", "urn:mwp:human:tester"), name),
    )


async def covering_submission(ctx: CapabilityContext, data: bytes) -> Submission:
    """``data`` published as the run's Artifact, with one Evidence item per acceptance
    criterion of its contract."""
    content = await ctx.publish(data, media_type="text/plain", schema_uri="urn:mwp:schema:text")
    evidence = [
        EvidenceItem(f"{ctx.work_item_id}:evidence:{c['criterionId']}", [c["criterionId"]])
        for c in ctx.contract["acceptanceCriteria"]
    ]
    return Submission([content], evidence)


@asynccontextmanager
async def served_agent(
    client: MwpClient, organization: Organization, agent: Agent, address: str, folder: Path
) -> AsyncIterator[Gateway]:
    """``agent`` registered with ``organization`` and run by :func:`gateway_runtime` behind
    that Organization's gateway (:func:`agent_gateway`), until the block ends; the gateway."""
    await ensure_registered(organization.registry, agent)
    await ensure_namespace(client.temporal.service_client, AGENTS_NAMESPACE)
    async with (
        agent_gateway(client, organization, folder / "tls") as (gateway, settings),
        gateway_runtime(agent, settings, address, folder / "ledger"),
    ):
        yield gateway
