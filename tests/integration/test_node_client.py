"""A Node.js Agent through a real gateway (TLS 1.3, the session's dev server): the binding is
language-neutral. The Python side authorizes a WorkItem and offers it to the Node Agent;
``clients/node/offer-agent.mjs`` does HELLO, SUBSCRIBE, receives the offer and sends its own
signed Commands (accept, start, a manifest it signed, submit). One of its Commands is sent
first with a corrupted signature, and must come back as a typed ERROR that changed nothing."""

from __future__ import annotations

import asyncio
import json
import shutil
from asyncio.subprocess import Process
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mwp.client import MwpClient
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import PROFILES, verify_value
from mwp.gateway.tls import development_certificates
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, admit_workers, new_crew, new_mission
from tests.integration.test_gateway import Running, running_gateway
from tests.integration.test_gateway_subscribe import OPTIONS

NODE = shutil.which("node")
CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node"
AGENT_SECONDS = 25.0
# The agent gives up a little sooner, so a stuck agent reports its own timeout (exit 2).
AGENT_TIMEOUT = "20"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=1)


@pytest.fixture
def node_client() -> Path:
    if not (CLIENT / "node_modules" / "ws").is_dir():
        pytest.fail("the Node client's dependencies are missing: run `npm ci` in clients/node")
    return CLIENT


@asynccontextmanager
async def node_agent(
    client: Path, gateway: Running, tls: Path, key_file: Path, group_id: str, *flags: str
) -> AsyncIterator[Process]:
    """``offer-agent.mjs`` for ``group_id``, killed on the way out if it is still running."""
    assert NODE is not None
    process = await asyncio.create_subprocess_exec(
        NODE,
        str(client / "offer-agent.mjs"),
        "--gateway",
        gateway.uri,
        "--ca",
        str(development_certificates(tls).ca_cert),
        "--key",
        str(key_file),
        "--group",
        group_id,
        "--timeout",
        AGENT_TIMEOUT,
        *flags,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def read_until(process: Process, step: str, lines: list[dict[str, Any]]) -> None:
    """Read the agent's JSON lines into ``lines`` until one reports ``step``."""
    assert process.stdout is not None and process.stderr is not None
    while True:
        raw = await process.stdout.readline()
        if not raw:
            errors = (await process.stderr.read()).decode()
            pytest.fail(f"the Node agent ended before {step!r}: {lines} {errors}")
        lines.append(json.loads(raw))
        if lines[-1]["step"] == step:
            return


async def finish(process: Process) -> tuple[list[dict[str, Any]], str]:
    """The rest of the agent's JSON lines and its stderr, once it exits."""
    async with asyncio.timeout(AGENT_SECONDS):
        out, errors = await process.communicate()
    return [json.loads(line) for line in out.splitlines()], errors.decode()


async def test_a_node_agent_takes_an_offer_to_submission_through_the_gateway(
    mwp_client: MwpClient, crew: Crew, node_client: Path, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client, crew)
    agent = crew.workers[0]
    # Admitted before the WorkItem is authorized: a Worker sees the Group from its admission
    # on, and the agent reads the acceptance criteria from the work.authorized Event.
    await admit_workers(rig)
    item = await rig.authorize()
    key_file = tmp_path / "agent-key.json"
    agent.save(key_file)
    tls = tmp_path / "tls"
    lines: list[dict[str, Any]] = []

    async with running_gateway(mwp_client, crew.organization, tls, options=OPTIONS) as gateway:
        group_id = rig.mission.group_id
        async with node_agent(
            node_client, gateway, tls, key_file, group_id, "--tamper"
        ) as agent_process:
            async with asyncio.timeout(AGENT_SECONDS):
                await read_until(agent_process, "subscribed", lines)
            # Offered after the agent's replay: it arrives by live delivery, pushed.
            await rig.offer(item, agent)
            rest, errors = await finish(agent_process)
    lines += rest
    assert agent_process.returncode == 0, (lines, errors)
    steps = {line["step"]: line for line in lines}
    assert steps["offered"]["sequence"] > steps["subscribed"]["replayedThrough"]

    # HELLO opened the agent's Session through the gateway, and its Commands carried it.
    assert (
        steps["hello"]["sessionEpoch"]
        == (await crew.organization.registry.session_epochs())[agent.principal.id]
    )

    # The corrupted copy was refused, typed, and is nowhere in the Group.
    refusal = steps["tampered-refused"]
    assert refusal["error"]["code"] == "AUTH_INVALID_SIGNATURE"
    assert refusal["error"]["relatedFrameId"] == refusal["frameId"]
    events = await rig.mission.events_this_run()
    assert refusal["actionId"] not in {e["cause"].get("id") for e in events}

    work_item = await rig.mission.work_item(item.work_item_id)
    assert work_item["state"] == "submitted"
    assert work_item["owner"]["agentId"] == agent.principal.id
    content_hash = steps["submitted"]["contentHash"]
    assert work_item["submission"]["artifactHashes"] == [content_hash]
    covered = {c for e in work_item["submissionEvidence"] for c in e["criterionIds"]}
    assert covered == {c["criterionId"] for c in item.contract["acceptanceCriteria"]}

    # Its ACK is the Agent's Cursor, kept on the authority side.
    cursors = ObjectCursorStore(open_store(stack_log_location()))
    stored = await asyncio.to_thread(cursors.load, rig.mission.group_id, agent.principal.id)
    assert stored is not None and stored.sequence == steps["submitted"]["acknowledged"]
    assert stored.sequence >= steps["offered"]["sequence"]

    # The Artifact's manifest was signed by the Node agent's own key.
    (published,) = [e for e in events if e["kind"] == "artifact.published"]
    manifest = published["payload"]["manifest"]
    verified = verify_value(
        manifest, PROFILES["artifact"], await crew.organization.registry.evidence()
    )
    assert verified.key_id == agent.key_id
    assert verified.principal == Principal("agent", agent.principal.id)
    assert manifest["contentHash"] == content_hash


async def test_a_node_agent_outside_the_group_gets_the_typed_refusal(
    mwp_client: MwpClient, crew: Crew, node_client: Path, tmp_path: Path
) -> None:
    """Never admitted: SUBSCRIBE is refused with GROUP_NOT_FOUND, and the agent exits 1."""
    rig = await new_mission(mwp_client, crew)
    key_file = tmp_path / "agent-key.json"
    crew.workers[0].save(key_file)
    tls = tmp_path / "tls"
    async with (
        running_gateway(mwp_client, crew.organization, tls, options=OPTIONS) as gateway,
        node_agent(node_client, gateway, tls, key_file, rig.mission.group_id) as agent,
    ):
        lines, errors = await finish(agent)
    assert agent.returncode == 1, (lines, errors)
    assert lines[-1]["step"] == "failed" and lines[-1]["error"]["code"] == "GROUP_NOT_FOUND"
