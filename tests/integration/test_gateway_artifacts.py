"""Artifacts through a real gateway (its HTTPS listener on TLS 1.3, the session's dev server,
its mirror and object store): readable only by the Group's members, one answer for a
non-member, an unknown Group and an unknown Artifact, hash-checked on the way out, uploaded only
by an active Worker, authorized only by a live session's token."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mwp.client import Identity, MwpClient, new_id, utc_now
from mwp.contracts.errors import RemoteMwpError
from mwp.core.wire.strict_json import parse_bytes
from mwp.dev.scenario import result_content, result_manifest
from mwp.gateway.artifacts import artifacts_path, group_marker
from mwp.gateway.authority import SESSION_CHECK_SECONDS, TemporalAuthority
from mwp.gateway.client import GatewayClient
from mwp.gateway.https import Response, request
from mwp.gateway.server import Gateway, GatewayOptions
from mwp.gateway.tls import (
    certificate_hash_of_file,
    client_context,
    development_certificates,
    server_context,
)
from mwp.stores.artifacts import ArtifactStore, content_key
from mwp.stores.objects import FolderObjectStore, ObjectStore, S3ObjectStore, open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, MissionRig, new_crew, new_mission

REFUSAL = 0.3
MAX_BYTES = 64 * 1024
OPTIONS = GatewayOptions(
    safety_net_seconds=60.0, refusal_seconds=REFUSAL, max_artifact_bytes=MAX_BYTES
)


@dataclass
class Running:
    uri: str
    artifacts: str  # https://HOST:PORT
    context: Any
    gateway: Gateway
    store: ObjectStore

    @asynccontextmanager
    async def client(self, agent: Identity) -> AsyncIterator[GatewayClient]:
        async with GatewayClient.connect(self.uri, self.context) as client:
            await client.hello(agent)
            yield client

    async def raw(self, method: str, path: str, token: str | None, body: bytes = b"") -> Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        port = int(self.artifacts.rsplit(":", 1)[1])
        return await request(
            "127.0.0.1",
            port,
            self.context,
            method,
            path,
            headers=headers,
            body=body,
            max_body=1024 * 1024,
        )


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=2, spares=1)


@pytest.fixture
async def rig(mwp_client: MwpClient, crew: Crew) -> MissionRig:
    rig = await new_mission(mwp_client, crew)
    await rig.coordinate(
        "membership.change", {"memberId": crew.workers[0].principal.id, "role": "worker"}
    )
    return rig


@pytest.fixture
async def gateway(mwp_client: MwpClient, crew: Crew, tmp_path: Path) -> AsyncIterator[Running]:
    paths = development_certificates(tmp_path / "tls")
    store = open_store(stack_log_location())
    authority = TemporalAuthority(
        mwp_client,
        crew.organization.organization_id,
        crew.organization.registrar,
        store,
        group_lookup_seconds=0.5,
    )
    context = server_context(paths.server_cert, paths.server_key)
    gateway = Gateway(authority, context, certificate_hash_of_file(paths.server_cert), OPTIONS)
    async with gateway.listening("127.0.0.1", 0, artifact_port=0) as server:
        port = server.sockets[0].getsockname()[1]
        assert gateway.artifact_address is not None
        yield Running(
            f"wss://127.0.0.1:{port}",
            f"https://127.0.0.1:{gateway.artifact_address[1]}",
            client_context(paths.ca_cert),
            gateway,
            store,
        )


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def masked(response: Response) -> tuple[int, dict[str, Any]]:
    """Status and error object with what must differ masked: the instant, the Group asked."""
    error = parse_bytes(response.body)
    return response.status, {**error, "occurredAt": "-", "groupId": "-"}


def tamper(store: ObjectStore, content_hash: str, data: bytes) -> None:
    """Overwrite the stored content behind the store's back (as a disk or an operator might)."""
    key = content_key(content_hash)
    if isinstance(store, FolderObjectStore):
        path = store.root.joinpath(*key.split("/"))
        path.chmod(0o644)
        path.write_bytes(data)
    else:
        assert isinstance(store, S3ObjectStore)
        store.client.put_object(Bucket=store.bucket, Key=store.prefix + key, Body=data)


async def test_a_worker_uploads_and_members_download_the_checked_bytes(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    group_id = rig.mission.group_id
    data = secrets.token_bytes(20_000)
    async with gateway.client(crew.workers[0]) as worker:
        digest = await worker.upload_artifact(gateway.artifacts, group_id, data)
        assert digest == sha256(data)
        assert await worker.artifact(gateway.artifacts, group_id, digest) == data
        # Uploading the same bytes again is the same Artifact.
        assert await worker.upload_artifact(gateway.artifacts, group_id, data) == digest
    assert gateway.store.exists(group_marker(group_id, digest))
    async with gateway.client(crew.coordinator) as coordinator:
        assert await coordinator.artifact(gateway.artifacts, group_id, digest) == data


async def test_a_published_artifact_is_read_by_a_member_and_by_no_other_group(
    mwp_client: MwpClient, gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    worker = crew.workers[0]
    item = await rig.authorize("Summarize the findings")
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)
    manifest = result_manifest(
        worker,
        mission_id=rig.mission.mission_id,
        group_id=rig.mission.group_id,
        work_item_id=item.work_item_id,
        text=item.contract["goal"],
        created_at=utc_now(),
        store=ArtifactStore(gateway.store),
    )
    await rig.send(
        worker,
        "artifact.publish",
        {"ownershipEpoch": epoch, "leaseId": lease["leaseId"], "manifest": manifest},
        work_item_id=item.work_item_id,
    )
    other = await new_mission(mwp_client, crew)  # the same Coordinator, another Group
    digest = manifest["contentHash"]
    async with gateway.client(crew.coordinator) as coordinator:
        data = await coordinator.artifact(gateway.artifacts, rig.mission.group_id, digest)
        assert data == result_content(item.work_item_id, item.contract["goal"])
        with pytest.raises(RemoteMwpError) as refused:
            await coordinator.artifact(gateway.artifacts, other.mission.group_id, digest)
        assert refused.value.code == "GROUP_NOT_FOUND"


async def test_a_non_member_an_unknown_group_and_an_unknown_artifact_get_one_answer(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    group_id = rig.mission.group_id
    data = b"for the Group's members only"
    elsewhere = ArtifactStore(gateway.store).put(b"stored, but not this Group's").content_hash
    async with gateway.client(crew.workers[0]) as worker:
        digest = await worker.upload_artifact(gateway.artifacts, group_id, data)
        member = worker.session_token
        async with gateway.client(crew.spares[0]) as stranger:
            asks = [
                (stranger.session_token, group_id, digest),  # a non-member, a real Artifact
                (stranger.session_token, new_id(), digest),  # a Group that does not exist
                (member, group_id, sha256(b"never stored")),  # an unknown Artifact
                (member, group_id, elsewhere),  # stored, but not the Group's
                (member, new_id(), digest),  # a member, asking under another Group ID
            ]
            answers = []
            loop = asyncio.get_running_loop()
            for token, group, content in asks:
                started = loop.time()
                response = await gateway.raw("GET", artifacts_path(group, content), token)
                assert loop.time() - started >= REFUSAL - 0.01
                assert data not in response.body
                answers.append(masked(response))
            assert all(answer == answers[0] for answer in answers), answers
            status, error = answers[0]
            assert status == 404 and error["code"] == "GROUP_NOT_FOUND"
            assert "details" not in error and "diagnostic" not in error
            with pytest.raises(RemoteMwpError):  # the client surfaces the same refusal
                await stranger.artifact(gateway.artifacts, group_id, digest)


async def test_a_tampered_stored_object_is_refused_and_never_sent(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    group_id = rig.mission.group_id
    data = b"the original findings " * 100
    forged = b"the forged findings!! " * 100
    async with gateway.client(crew.workers[0]) as worker:
        digest = await worker.upload_artifact(gateway.artifacts, group_id, data)
        tamper(gateway.store, digest, forged)
        response = await gateway.raw("GET", artifacts_path(group_id, digest), worker.session_token)
        assert response.status == 500 and forged not in response.body
        assert parse_bytes(response.body)["code"] == "INTERNAL_ERROR"
        with pytest.raises(RemoteMwpError):
            await worker.artifact(gateway.artifacts, group_id, digest)


async def test_uploads_only_by_an_active_worker_with_their_hash_and_bounded(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    group_id = rig.mission.group_id
    async with gateway.client(crew.coordinator) as coordinator:
        with pytest.raises(RemoteMwpError) as refused:
            await coordinator.upload_artifact(gateway.artifacts, group_id, b"not a worker")
        assert refused.value.code == "AUTH_FORBIDDEN"
    async with gateway.client(crew.workers[1]) as admitted_never:  # registered, not a member
        with pytest.raises(RemoteMwpError) as refused:
            await admitted_never.upload_artifact(gateway.artifacts, group_id, b"a stranger's")
        assert refused.value.code == "GROUP_NOT_FOUND"
    async with gateway.client(crew.workers[0]) as worker:
        token = worker.session_token
        declared = sha256(b"something else")
        response = await gateway.raw(
            "PUT", artifacts_path(group_id, declared), token, b"these bytes"
        )
        assert response.status == 400
        assert parse_bytes(response.body)["code"] == "PROTOCOL_VIOLATION"
        assert not ArtifactStore(gateway.store).exists(sha256(b"these bytes"))
        response = await gateway.raw(
            "POST", artifacts_path(group_id), token, b"x" * (MAX_BYTES + 1)
        )
        assert response.status == 413
        assert parse_bytes(response.body)["code"] == "PROTOCOL_VIOLATION"
        response = await gateway.raw("POST", artifacts_path(group_id), token, b"posted bytes")
        assert response.status == 201
        assert parse_bytes(response.body) == {
            "contentHash": sha256(b"posted bytes"),
            "sizeBytes": len(b"posted bytes"),
        }


async def test_the_routes_need_a_live_sessions_token(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    group_id = rig.mission.group_id
    worker = crew.workers[0]
    path = artifacts_path(group_id)
    for token in (None, "bm90LWEtdG9rZW4"):
        response = await gateway.raw("POST", path, token, b"anonymous")
        assert response.status == 401
        assert parse_bytes(response.body)["code"] == "AUTH_REQUIRED"
    async with gateway.client(worker) as client:
        token = client.session_token
        assert (await gateway.raw("POST", path, token, b"while connected")).status == 201
    # The connection closed: its session's token authorizes nothing any more.
    await asyncio.sleep(0.1)
    response = await gateway.raw("POST", path, token, b"after closing")
    assert response.status == 401
    async with gateway.client(worker) as client:
        await crew.open_session(worker)  # a newer session fences the gateway's...
        await asyncio.sleep(SESSION_CHECK_SECONDS)  # ...once its look at the Registry is due
        response = await gateway.raw("POST", path, client.session_token, b"fenced")
        assert response.status == 401
        assert parse_bytes(response.body)["code"] == "AUTH_STALE_SESSION"
    assert not ArtifactStore(gateway.store).exists(sha256(b"fenced"))
