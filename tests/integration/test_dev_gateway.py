"""`mwp dev` as a process makes the two trust zones: the authority's and the agents'
namespaces on its dev server, and the Group gateway in its process, which listens at once,
serves the Organization once it is set up in the state folder (HELLO with the CA the banner
printed, Artifacts over HTTPS) and stops with the stack."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from websockets.exceptions import ConnectionClosed

from mwp.cli.registry import REGISTRY_KEY_NAME
from mwp.client import KeyStore, connect
from mwp.client.state_dir import ORGANIZATION_FILE
from mwp.dev.stack import free_port
from mwp.gateway.client import GatewayClient, Inbox
from mwp.gateway.deferred import TRY_AGAIN_LATER
from mwp.gateway.tls import client_context
from mwp.log.keys import AuthorityKeyring
from tests.integration import conftest
from tests.integration.missions_helper import new_mission
from tests.integration.test_console import _log_in

AGENTS = "agents-zone"


async def test_mwp_dev_makes_both_zones_and_serves_hello_and_artifacts_on_its_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    # The crew's Group Authority key goes to this stack's keyring, where its mirror signs.
    monkeypatch.setitem(conftest._STACK, "keyring", AuthorityKeyring.in_state_dir(state))
    port, gateway_port, artifact_port = free_port(), free_port(), free_port()
    console_port = free_port()
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "mwp", "dev", "--state-dir", str(state), "--headless"),
        *("--port", str(port), "--agents-namespace", AGENTS),
        *("--gateway-port", str(gateway_port), "--artifact-port", str(artifact_port)),
        *("--console-port", str(console_port)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        while not lines or not lines[-1].startswith("Ready"):
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line, "\n".join(lines)
            lines.append(line.decode().strip())
        banner = "\n".join(lines)
        assert f"Gateway    wss://127.0.0.1:{gateway_port} (TLS 1.3)" in lines, banner
        assert f"Artifacts  https://127.0.0.1:{artifact_port}" in lines, banner
        assert f"agents namespace {AGENTS}" in banner
        console = f"http://127.0.0.1:{console_port}/"
        assert f"Console    {console} (human Approval; log in with a key file)" in lines, banner
        found = re.search(r"Gateway CA (\S+) \(the agents' trust anchor\)", banner)
        assert found, banner
        context = client_context(Path(found[1]))

        client = await connect(f"127.0.0.1:{port}")
        for namespace in ("default", AGENTS):
            described = await client.temporal.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace)
            )
            assert described.namespace_info.name == namespace

        # Listening already, with no Organization yet: closed with "try again later".
        uri = f"wss://127.0.0.1:{gateway_port}"
        async with GatewayClient.connect(uri, context) as early:
            with pytest.raises(ConnectionClosed) as closed:
                await early.receive()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == TRY_AGAIN_LATER

        # What `mwp registry init` leaves in the state folder, for a registered crew.
        rig = await new_mission(client, workers=1)
        worker = rig.crew.workers[0]
        await rig.coordinate(
            "membership.change", {"memberId": worker.principal.id, "role": "worker"}
        )
        organization = rig.crew.organization
        KeyStore.in_state_dir(state).save(REGISTRY_KEY_NAME, organization.registrar)
        (state / ORGANIZATION_FILE).write_text(
            json.dumps({"organizationId": organization.organization_id})
        )
        async with GatewayClient.connect(uri, context) as gateway:
            accepted = await gateway.hello(worker)
            assert accepted["sessionEpoch"] >= 2  # a new Session, after the crew's own
            await gateway.ping()
            artifacts, group_id = f"https://127.0.0.1:{artifact_port}", rig.mission.group_id
            digest = await gateway.upload_artifact(artifacts, group_id, b"the findings")
            assert await gateway.artifact(artifacts, group_id, digest) == b"the findings"
            assert (state / "objects" / "artifacts" / "sha256" / digest[7:]).exists()
            # A live Event reaches the subscriber well before the 30 s safety-net read: the
            # mirror's in-process hint woke the gateway's reader.
            inbox = Inbox()
            await gateway.subscribe([{"groupId": group_id, "afterSequence": 0}])
            await gateway.collect(inbox, lambda box: box.position(group_id) >= 1)
            posted = await rig.post(rig.crew.coordinator, "live, through the gateway")
            sequence = int(posted["events"][-1]["sequence"])
            await gateway.collect(inbox, lambda box: box.position(group_id) >= sequence)
            assert inbox.of(group_id)[-1]["sequence"] == sequence
        # The Approval console serves the same Organization: its owner logs in.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            assert (await _log_in(session, console, rig.crew.owner))[0] == 200
            async with session.get(console + "api/missions") as response:
                listed = (await response.json())["missions"]
            assert rig.mission.mission_id in [m["missionId"] for m in listed]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 30)
    assert process.stdout is not None
    rest = (await process.stdout.read()).decode()
    assert code == 0 and "Stopped." in rest, rest
    with pytest.raises(OSError):  # the gateway stopped with the stack
        await asyncio.open_connection("127.0.0.1", gateway_port)
