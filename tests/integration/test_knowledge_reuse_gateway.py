"""An imported Artifact read through a real gateway (MWP-WRK-028): the receiving Group's members
read its bytes only once the Coordinator's approved import is in the Group's log; before it,
and for anyone outside the receiving Group (a member of the source Group included), the answer
is the one for an Artifact that does not exist."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mwp.client import Identity, MwpClient, utc_now
from mwp.client.knowledge import import_payload, reuse_approval
from mwp.core.group.knowledge import IMPORT_KIND
from mwp.dev.scenario import result_manifest
from mwp.gateway.artifacts import artifacts_path
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, MissionRig, event_of, eventually, new_crew
from tests.integration.missions_helper import new_mission as mission_of
from tests.integration.test_gateway import running_gateway
from tests.integration.test_gateway_artifacts import OPTIONS, Running, masked, sha256
from tests.integration.test_group_archive import authority_identity


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=2, spares=1)


@pytest.fixture
async def served(mwp_client: MwpClient, crew: Crew, tmp_path: Path) -> AsyncIterator[Running]:
    async with running_gateway(
        mwp_client, crew.organization, tmp_path / "tls", options=OPTIONS, artifact_port=0
    ) as running:
        address = running.gateway.artifact_address
        assert address is not None
        yield Running(
            running.uri,
            f"https://127.0.0.1:{address[1]}",
            running.context,
            running.gateway,
            open_store(stack_log_location()),
        )


async def _published(rig: MissionRig, worker: Identity, store: ArtifactStore) -> dict[str, Any]:
    """A Worker's result Artifact, its bytes stored where the gateway reads them; its manifest."""
    item = await rig.authorize("Write the design notes")
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
        store=store,
    )
    published = await rig.send(
        worker,
        "artifact.publish",
        {"ownershipEpoch": epoch, "leaseId": lease["leaseId"], "manifest": manifest},
        work_item_id=item.work_item_id,
    )
    assert event_of(published, "artifact.published")["payload"]["manifest"] == manifest
    return manifest


async def test_an_imported_artifact_is_read_by_the_receiving_group_only_after_the_import(
    mwp_client: MwpClient, served: Running, crew: Crew
) -> None:
    source_worker, reader = crew.workers
    stranger = crew.spares[0]
    source = await mission_of(mwp_client, crew)
    manifest = await _published(source, source_worker, ArtifactStore(served.store))
    digest = manifest["contentHash"]
    data = ArtifactStore(served.store).get(digest)
    target = await mission_of(mwp_client, crew)
    await target.coordinate(
        "membership.change", {"memberId": reader.principal.id, "role": "worker"}
    )
    path = artifacts_path(target.mission.group_id, digest)
    unknown = artifacts_path(target.mission.group_id, sha256(b"never stored anywhere"))

    async with (
        served.client(source_worker) as producer,
        served.client(reader) as member,
        served.client(stranger) as outsider,
    ):
        # The source Group holds the bytes; the gateway knows the reader's Membership of the
        # target (an upload, which needs an active Worker, goes through).
        assert await producer.artifact(served.artifacts, source.mission.group_id, digest) == data
        until_known = b"the reader is a Worker of the target Group"

        async def membership_known() -> bool:
            response = await served.raw(
                "POST", artifacts_path(target.mission.group_id), member.session_token, until_known
            )
            return response.status == 201

        await eventually(membership_known)
        as_absent = masked(await served.raw("GET", unknown, member.session_token))
        assert as_absent[0] == 404 and as_absent[1]["code"] == "GROUP_NOT_FOUND"
        # Before the import: the receiving Group's member is answered as for no such Artifact.
        before = await served.raw("GET", path, member.session_token)
        assert data not in before.body and masked(before) == as_absent

        approval = reuse_approval(
            authority_identity(target),
            manifest,
            target_mission_id=target.mission.mission_id,
            target_group_id=target.mission.group_id,
        )
        await target.coordinate(IMPORT_KIND, import_payload(manifest, approval))

        async def readable() -> bool:
            response = await served.raw("GET", path, member.session_token)
            return response.status == 200

        await eventually(readable)
        assert await member.artifact(served.artifacts, target.mission.group_id, digest) == data
        # After it: a non-member of the receiving Group, and a member of the source Group
        # only, get the same answer as for an Artifact that does not exist.
        for token in (outsider.session_token, producer.session_token):
            refused = await served.raw("GET", path, token)
            assert data not in refused.body and masked(refused) == as_absent
        # The source's member still reads it where it was published.
        assert await producer.artifact(served.artifacts, source.mission.group_id, digest) == data
