"""The Group gateway on a real TLS 1.3 WebSocket, against the session's real dev server and
registry: framing refusals, HELLO and its refusals, session fencing and expiry, PING, and a
COMMAND forwarded to the Group's MissionWorkflow with its signed Events coming back."""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from mwp.client import Identity, MwpClient, new_id, utc_now
from mwp.contracts.errors import RemoteMwpError
from mwp.core.models import validate_document
from mwp.core.models.websocket_frame import ErrorFrame
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import verify
from mwp.core.wire.jcs import canonicalize
from mwp.gateway.authority import SESSION_CHECK_SECONDS, TemporalAuthority
from mwp.gateway.client import GatewayClient
from mwp.gateway.frames import MAX_FRAME_BYTES, MAX_MESSAGE_BYTES, Incoming, new_frame_id
from mwp.gateway.hello import HelloPolicy, init_frame, response_frame
from mwp.gateway.server import Gateway, GatewayOptions
from mwp.gateway.tls import (
    certificate_hash_of_file,
    client_context,
    development_certificates,
    server_context,
)
from mwp.stores.objects import open_store
from tests.integration.conftest import Organization, stack_log_location
from tests.integration.missions_helper import (
    Crew,
    MissionRig,
    admit_workers,
    new_crew,
    new_mission,
)


@dataclass
class Running:
    uri: str
    context: ssl.SSLContext
    gateway: Gateway

    @asynccontextmanager
    async def client(self) -> AsyncIterator[GatewayClient]:
        async with GatewayClient.connect(self.uri, self.context) as client:
            yield client


@asynccontextmanager
async def running_gateway(
    client: MwpClient,
    organization: Organization,
    folder: Path,
    hello: HelloPolicy | None = None,
    *,
    options: GatewayOptions | None = None,
    artifact_port: int | None = None,
) -> AsyncIterator[Running]:
    paths = development_certificates(folder)
    authority = TemporalAuthority(
        client,
        organization.organization_id,
        organization.registrar,
        open_store(stack_log_location()),
        group_lookup_seconds=0.5,
    )
    gateway = Gateway(
        authority,
        server_context(paths.server_cert, paths.server_key),
        certificate_hash_of_file(paths.server_cert),
        options or GatewayOptions(hello=hello or HelloPolicy()),
    )
    async with gateway.listening("127.0.0.1", 0, artifact_port=artifact_port) as server:
        port = server.sockets[0].getsockname()[1]
        yield Running(f"wss://127.0.0.1:{port}", client_context(paths.ca_cert), gateway)


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=1, spares=2)


@pytest.fixture
async def gateway(mwp_client: MwpClient, crew: Crew, tmp_path: Path) -> AsyncIterator[Running]:
    async with running_gateway(mwp_client, crew.organization, tmp_path / "tls") as running:
        yield running


def ping_frame(**members: Any) -> dict[str, Any]:
    return {
        "protocolVersion": "0.1",
        "frameId": new_frame_id(),
        "frameType": "PING",
        "nonce": "cGluZy1ub25jZQ",
        "sentAt": utc_now(),
        **members,
    }


def error_of(incoming: Incoming) -> dict[str, Any]:
    """The error object of an ERROR frame (already schema-checked by the client)."""
    assert isinstance(incoming.frame, ErrorFrame), incoming.value
    error: dict[str, Any] = incoming.value["error"]
    validate_document("error.schema.json", error)
    return error


async def refused(call: Any) -> dict[str, Any]:
    with pytest.raises(RemoteMwpError) as caught:
        await call
    return caught.value.wire


def presence(agent: Identity, epoch: int, **members: Any) -> dict[str, Any]:
    return {
        "agentId": agent.principal.id,
        "sessionEpoch": epoch,
        "status": "online",
        "capacity": {"maxSlots": 2, "activeSlots": 0, "availableSlots": 2, "queuedItems": 0},
        "capabilityAvailability": [],
        "lastHeartbeat": utc_now(),
        "expiresAt": utc_now(),
        **members,
    }


# --- framing ---------------------------------------------------------------------------------


async def test_bad_frames_get_typed_errors_and_the_connection_carries_on(
    gateway: Running, crew: Crew
) -> None:
    async with gateway.client() as client:
        await client.send_raw(json.dumps(ping_frame()).encode())  # binary
        binary = error_of(await client.receive())
        assert binary["code"] == "PROTOCOL_VIOLATION" and "relatedFrameId" not in binary

        valid = json.dumps(ping_frame())
        await client.send_raw(valid + " " * (MAX_FRAME_BYTES + 1 - len(valid)))
        assert error_of(await client.receive())["code"] == "PROTOCOL_VIOLATION"

        duplicated = ping_frame()
        text = json.dumps(duplicated)[:-1] + ', "frameType": "PING"}'
        await client.send_raw(text)
        assert error_of(await client.receive())["code"] == "PROTOCOL_VIOLATION"

        invalid = ping_frame(sentAt="yesterday")
        await client.send(invalid)
        schema = error_of(await client.receive())
        assert schema["code"] == "SCHEMA_VALIDATION_FAILED"
        assert schema["relatedFrameId"] == invalid["frameId"]

        early = ping_frame()
        await client.send(early)
        unauthenticated = error_of(await client.receive())
        assert unauthenticated["code"] == "AUTH_REQUIRED"
        assert unauthenticated["relatedFrameId"] == early["frameId"]

        # The same connection still authenticates and is served.
        await client.hello(crew.workers[0])
        reply = await client.ping()
        assert reply["frameType"] == "PING"


async def test_a_message_past_the_websocket_bound_closes_the_connection(gateway: Running) -> None:
    """Past MAX_MESSAGE_BYTES the WebSocket layer refuses to buffer it: close code 1009."""
    async with gateway.client() as client:
        await client.send_raw(" " * (MAX_MESSAGE_BYTES + 1))
        with pytest.raises(ConnectionClosed) as closed:
            await client.receive()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    async with gateway.client() as again:  # the server itself carries on
        await again.send(ping_frame())
        assert error_of(await again.receive())["code"] == "AUTH_REQUIRED"


# --- HELLO -----------------------------------------------------------------------------------


async def test_hello_opens_a_new_session_epoch_in_the_registry(
    gateway: Running, crew: Crew
) -> None:
    worker = crew.workers[0]
    registry = crew.organization.registry
    before = (await registry.session_epochs())[worker.principal.id]
    async with gateway.client() as client:
        accepted = await client.hello(worker)
    assert accepted["sessionEpoch"] == before + 1
    assert (await registry.session_epochs())[worker.principal.id] == before + 1
    validate_document("websocket-frame.schema.json", accepted)


async def handshake_until_response(
    client: GatewayClient, agent_id: str, key_id: str, signer: Identity
) -> dict[str, Any]:
    """client_init, then a response signed by ``signer``: the response frame sent."""
    init = init_frame(agent_id, key_id, secrets.token_bytes(32), new_frame_id())
    await client.send(init)
    challenge = (await client.answer(init["frameId"])).value
    response = response_frame(
        init, challenge, signer.key, client.server_certificate, new_frame_id()
    )
    await client.send(response)
    return response


async def test_forged_replayed_unknown_and_revoked_hellos_are_refused(
    gateway: Running, crew: Crew
) -> None:
    worker, spare, revoked = crew.workers[0], crew.spares[0], crew.spares[1]
    registry = crew.organization.registry
    epochs = await registry.session_epochs()
    mallory = Identity.generate(Principal("agent", "urn:mwp:agent:mallory"))

    async with gateway.client() as client:
        # Forged: the worker's name and key ID, another key's signature.
        forged = await handshake_until_response(client, worker.principal.id, worker.key_id, spare)
        error = error_of(await client.receive())
        assert error["code"] == "AUTH_INVALID_SIGNATURE"
        assert error["relatedFrameId"] == forged["frameId"]
        # Unknown key: an agent the Registry never heard of.
        await handshake_until_response(client, mallory.principal.id, mallory.key_id, mallory)
        assert error_of(await client.receive())["code"] == "AUTH_INVALID_SIGNATURE"

        genuine = await handshake_until_response(client, worker.principal.id, worker.key_id, worker)
        assert (await client.receive()).value["phase"] == "server_accept"
        # Replayed on the connection it was made for: that challenge is spent.
        await client.send({**genuine, "frameId": new_frame_id()})
        assert error_of(await client.receive())["code"] == "AUTH_INVALID_SIGNATURE"

    async with gateway.client() as other:
        # Replayed on another connection, after a fresh client_init of its own.
        init = init_frame(worker.principal.id, worker.key_id, secrets.token_bytes(32), "urn:x:1")
        await other.send(init)
        await other.answer(init["frameId"])
        await other.send({**genuine, "frameId": new_frame_id()})
        assert error_of(await other.receive())["code"] == "AUTH_INVALID_SIGNATURE"

        # Revoked: the key's binding was revoked in the Registry.
        await registry.change_key_validity(revoked.key_id, revoked_at=utc_now())
        await asyncio.sleep(1.1)  # past the revocation instant (whole seconds)
        await handshake_until_response(other, revoked.principal.id, revoked.key_id, revoked)
        assert error_of(await other.receive())["code"] == "AUTH_INVALID_SIGNATURE"

    after = await registry.session_epochs()
    # Only the genuine HELLO opened a session.
    assert after[worker.principal.id] == epochs[worker.principal.id] + 1
    assert after[revoked.principal.id] == epochs[revoked.principal.id]
    assert after[spare.principal.id] == epochs[spare.principal.id]


async def test_a_newer_session_fences_the_older_one(gateway: Running, crew: Crew) -> None:
    worker = crew.workers[0]
    async with gateway.client() as first, gateway.client() as second:
        fenced = (await first.hello(worker))["sessionEpoch"]
        current = (await second.hello(worker))["sessionEpoch"]  # a second runtime of the Agent
        # Told at once, before it sends anything: its session is fenced, by which epoch.
        error = error_of(await first.receive())
        assert error["code"] == "AUTH_STALE_SESSION" and error["fatal"] is True
        assert error["details"] == {"currentSessionEpoch": current} and current > fenced
        assert "relatedFrameId" not in error
        # The fenced session is gone: only a new HELLO continues on that connection.
        assert (await refused(first.ping()))["code"] == "AUTH_REQUIRED"
        await second.ping()
        # A session opened elsewhere (another gateway, the SDK) fences this one too, once the
        # gateway looks at the Session Epochs again (at most SESSION_CHECK_SECONDS later).
        await crew.organization.registry.open_session(worker.principal.id)
        await asyncio.sleep(SESSION_CHECK_SECONDS)
        assert (await refused(second.ping()))["code"] == "AUTH_STALE_SESSION"


async def test_the_session_lasts_while_its_agent_pings_and_expires_after(
    mwp_client: MwpClient, crew: Crew, tmp_path: Path
) -> None:
    short = HelloPolicy(session_seconds=1)
    async with (
        running_gateway(mwp_client, crew.organization, tmp_path, short) as running,
        running.client() as client,
    ):
        accepted = await client.hello(crew.workers[0])
        for _ in range(3):  # each PING proves the Agent alive: the session lasts on
            await asyncio.sleep(0.6)
            await client.ping()
        await asyncio.sleep(1.2)  # silent for longer than the session's lifetime
        error = await refused(client.ping())
        assert error["code"] == "AUTH_REQUIRED"
        again = await client.hello(crew.workers[0])
        assert again["sessionEpoch"] == accepted["sessionEpoch"] + 1
        await client.ping()
        # One connection, one Agent: another Agent needs its own connection.
        assert (await refused(client.hello(crew.spares[0])))["code"] == "AUTH_FORBIDDEN"
        await client.ping()  # the session in place is untouched


async def test_an_unreachable_registry_is_a_retryable_internal_error(
    mwp_client: MwpClient, crew: Crew, tmp_path: Path
) -> None:
    """A gateway for an Organization whose registry never ran: HELLO cannot be decided."""
    missing = Organization(
        f"{crew.organization.organization_id}-missing",
        crew.organization.registrar,
        crew.organization.registry,
    )
    async with (
        running_gateway(mwp_client, missing, tmp_path) as running,
        running.client() as client,
    ):
        error = await refused(client.hello(crew.workers[0]))
        assert error["code"] == "INTERNAL_ERROR" and error["retryable"] is True
        assert (await refused(client.ping()))["code"] == "AUTH_REQUIRED"  # still serving


# --- PING ------------------------------------------------------------------------------------


async def test_ping_echoes_its_nonce_and_checks_the_presence_record(
    gateway: Running, crew: Crew
) -> None:
    worker, other = crew.workers[0], crew.spares[0]
    async with gateway.client() as client:
        epoch = int((await client.hello(worker))["sessionEpoch"])
        reply = await client.ping(presence(worker, epoch))
        validate_document("websocket-frame.schema.json", reply)
        assert (await refused(client.ping(presence(other, epoch))))["code"] == "AUTH_FORBIDDEN"
        stale = await refused(client.ping(presence(worker, epoch - 1)))
        assert stale["code"] == "AUTH_STALE_SESSION"
        broken = presence(worker, epoch)
        del broken["capacity"]
        assert (await refused(client.ping(broken)))["code"] == "SCHEMA_VALIDATION_FAILED"


# --- COMMAND ---------------------------------------------------------------------------------


async def authenticated_worker(rig: MissionRig, client: GatewayClient, worker: Identity) -> int:
    """HELLO as ``worker``; once the Group has learned of its new Session Epoch, that epoch.

    Registry notices reach a Group asynchronously: until this one arrives, a Command under the
    new epoch is AUTH_STALE_SESSION. The probe can never be applied (impossible revision)."""
    epoch = int((await client.hello(worker))["sessionEpoch"])
    rig.crew.sessions[worker.principal.id] = epoch
    for _ in range(100):
        probe = await rig.command(
            worker,
            "message.post",
            {"content": [{"type": "text", "text": "probe"}]},
            expected_revision=2**40,
        )
        error = await refused(client.command(probe))
        if error["code"] != "AUTH_STALE_SESSION":
            assert error["code"] == "REVISION_CONFLICT", error  # every other check passed
            return epoch
        await asyncio.sleep(0.1)
    pytest.fail("the Group never learned of the new session")


async def test_a_command_comes_back_as_its_signed_events(
    mwp_client: MwpClient, crew: Crew, gateway: Running
) -> None:
    rig = await new_mission(mwp_client, crew)
    worker = crew.workers[0]
    item = await rig.authorize()
    offer = await rig.offer(item, worker)
    async with gateway.client() as client:
        await authenticated_worker(rig, client, worker)
        accept = await rig.command(
            worker,
            "work.accept_offer",
            {"offerId": offer["offers"][0]["offerId"], "contractVersion": 1},
            work_item_id=item.work_item_id,
        )
        events = await client.command(accept)
        assert "work.offer.accepted" in [e["kind"] for e in events]
        evidence = await crew.organization.registry.evidence()
        for event in events:
            verified = verify(canonicalize(event), "event", evidence)
            assert verified.document["groupId"] == rig.mission.group_id
        sequences = [e["sequence"] for e in events]
        assert sequences == list(range(sequences[0], sequences[-1] + 1))
        assert await rig.mission.sequence() == sequences[-1]

        # At least once: the same Command again is the same receipt and the same Events.
        assert await client.command(accept) == events
        assert await rig.mission.sequence() == sequences[-1]

        # A refusal by the Authority names the frame and the Action ID; nothing changes.
        conflict = await rig.command(
            worker,
            "message.post",
            {"content": [{"type": "text", "text": "x"}]},
            expected_revision=2**40,
        )
        error = await refused(client.command(conflict))
        assert error["relatedActionId"] == conflict["actionId"]
        assert error["code"] == "REVISION_CONFLICT"
        assert await rig.mission.sequence() == sequences[-1]


async def test_a_connection_carries_only_its_own_agents_current_commands(
    mwp_client: MwpClient, crew: Crew, gateway: Running
) -> None:
    rig = await new_mission(mwp_client, crew)
    await admit_workers(rig)
    worker = crew.workers[0]
    post = {"content": [{"type": "text", "text": "hello"}]}
    async with gateway.client() as client:
        epoch = await authenticated_worker(rig, client, worker)
        before = await rig.mission.sequence()

        others = await rig.command(crew.coordinator, "message.post", post)
        error = await refused(client.command(others))
        assert error["code"] == "AUTH_FORBIDDEN" and error["relatedActionId"] == others["actionId"]

        old = await rig.command(worker, "message.post", post, session_epoch=epoch - 1)
        assert (await refused(client.command(old)))["code"] == "AUTH_STALE_SESSION"

        nowhere = worker.command(
            "message.post", post, group_id=new_id(), session_epoch=epoch, membership_epoch=1
        )
        assert (await refused(client.command(nowhere)))["code"] == "GROUP_NOT_FOUND"
        assert await rig.mission.sequence() == before
