"""A gateway's HTTPS route that takes a request and never answers (as a gateway just restarted
did in the proof of concept's outage) holds the agent runtime no longer than
``ROUTE_ANSWER_SECONDS``: the request is made again on a new TLS connection and answered there.
The agent reaches the real gateway's Artifact listener through a forwarder that swallows the
first connections it accepts."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mwp.agent import CapabilityContext, Submission
from mwp.agent.gateway_link import ROUTE_ANSWER_SECONDS, ROUTE_TRIES, GatewayLink, GatewaySettings
from mwp.agent.offline import Disconnected
from mwp.client import MwpClient
from mwp.gateway.tls import development_certificates, server_context
from mwp.workers.agent import ensure_registered
from tests.integration.conftest import Organization
from tests.integration.gateway_agents import agent_gateway, sample_agent
from tests.integration.partition import pipe
from tests.integration.test_offline_runtime import port_of


class Swallowing:
    """Forwards ``127.0.0.1:<port>`` to ``target``, except the first ``swallow`` connections:
    those go to a listener with the gateway's certificate that completes the TLS handshake,
    reads the request and never answers."""

    def __init__(self, target: int, swallow: int, tls: ssl.SSLContext) -> None:
        self.target = target
        self.swallow = swallow
        self.tls = tls
        self.accepted = 0
        self.port = 0
        self._mute = 0
        self._held: list[asyncio.StreamWriter] = []

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        target = self._mute if self.accepted <= self.swallow else self.target
        upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(
            pipe(reader, upstream), pipe(upstream_reader, writer), return_exceptions=True
        )

    async def _never_answer(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._held.append(writer)
        while await reader.read(65536):
            pass

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Swallowing]:
        mute = await asyncio.start_server(self._never_answer, "127.0.0.1", 0, ssl=self.tls)
        self._mute = mute.sockets[0].getsockname()[1]
        server = await asyncio.start_server(self._forward, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            for writer in self._held:
                writer.transport.abort()
            for listener in (server, mute):
                listener.close()
                await listener.wait_closed()


@contextlib.asynccontextmanager
async def linked(
    mwp_client: MwpClient, organization: Organization, folder: Path, swallow: int
) -> AsyncIterator[tuple[GatewayLink, Swallowing]]:
    agent = sample_agent(organization.organization_id, "Routed")

    @agent.capability("mwp.dev.general", "1.0.0")
    async def work(ctx: CapabilityContext) -> Submission:
        raise NotImplementedError  # never offered: the card needs a capability

    await ensure_registered(organization.registry, agent)
    async with agent_gateway(mwp_client, organization, folder) as (_, direct):
        paths = development_certificates(folder)
        tls = server_context(paths.server_cert, paths.server_key)
        async with Swallowing(port_of(direct.artifacts()), swallow, tls).serving() as routes:
            settings = GatewaySettings(
                direct.url, direct.ca_file, f"https://127.0.0.1:{routes.port}"
            )
            async with GatewayLink.open(settings, agent) as link:
                yield link, routes


async def test_a_route_request_left_unanswered_is_made_again_on_a_new_connection(
    mwp_client: MwpClient, organization: Organization, tmp_path: Path
) -> None:
    async with linked(mwp_client, organization, tmp_path, swallow=1) as (link, routes):
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(ROUTE_ANSWER_SECONDS * 2.5):
            card = await link.agent_card()
        took = loop.time() - began
    assert card is not None and card["agentId"] == link.agent.agent_id
    assert routes.accepted == 2  # the swallowed request, then its second asking
    assert ROUTE_ANSWER_SECONDS <= took < ROUTE_ANSWER_SECONDS * 2


async def test_a_route_that_never_answers_is_the_gateway_unreachable(
    mwp_client: MwpClient, organization: Organization, tmp_path: Path
) -> None:
    async with linked(mwp_client, organization, tmp_path, swallow=ROUTE_TRIES) as (link, routes):
        link.client.answer_seconds = SHORT_ANSWER  # the tries are what counts here, not the wait
        with pytest.raises(Disconnected, match="TimeoutError"):
            async with asyncio.timeout(SHORT_ANSWER * ROUTE_TRIES + 5):
                await link.agent_card()
    assert routes.accepted == ROUTE_TRIES


SHORT_ANSWER = 1.0
