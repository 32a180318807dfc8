"""`mwp gateway` as its own process: a development CA under the state folder, HELLO and PING
over TLS 1.3 against the session's dev server, a clean stop on SIGINT."""

from __future__ import annotations

import asyncio
import json
import signal
import stat
import sys
from pathlib import Path

from mwp.cli.registry import REGISTRY_KEY_NAME
from mwp.client import KeyStore, MwpClient
from mwp.client.state_dir import ORGANIZATION_FILE
from mwp.dev.stack import BackgroundStack, free_port
from mwp.gateway.client import GatewayClient
from mwp.gateway.tls import CA_KEY, SERVER_KEY, client_context
from tests.integration.missions_helper import new_crew


async def test_mwp_gateway_serves_hello_and_ping_and_stops_on_sigint(
    temporal_stack: BackgroundStack, mwp_client: MwpClient, tmp_path: Path
) -> None:
    crew = await new_crew(mwp_client, workers=1)
    organization = crew.organization
    state = tmp_path / "state"
    KeyStore.in_state_dir(state).save(REGISTRY_KEY_NAME, organization.registrar)
    (state / ORGANIZATION_FILE).write_text(
        json.dumps({"organizationId": organization.organization_id})
    )
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mwp",
        "gateway",
        "--address",
        temporal_stack.address,
        "--namespace",
        temporal_stack.namespace,
        "--state-dir",
        str(state),
        "--listen",
        f"127.0.0.1:{port}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        lines = []
        while not lines or not lines[-1].startswith("Gateway"):
            line = await asyncio.wait_for(process.stdout.readline(), 30)
            assert line, (await process.stderr.read()).decode() if process.stderr else "ended"
            lines.append(line.decode().strip())
        assert lines[-1] == f"Gateway       wss://127.0.0.1:{port} (TLS 1.3)"
        tls = state / "gateway-tls"
        for key in (tls / SERVER_KEY, tls / CA_KEY):
            assert stat.S_IMODE(key.stat().st_mode) == 0o600

        context = client_context(tls / "ca.pem")
        async with GatewayClient.connect(f"wss://127.0.0.1:{port}", context) as client:
            accepted = await client.hello(crew.workers[0])
            assert accepted["sessionEpoch"] == 2  # the crew opened the first session
            await client.ping()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 15)
    rest = (await process.stdout.read()).decode()
    assert code == 0 and "gateway stopped" in rest
