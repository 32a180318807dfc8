"""The Group Event log mirror on a real dev server: every accepted Event of a Group, signed by
its Group Authority and hash-chained, in the stack's log store (and in a real S3 server); a
mirror worker killed between acceptance and mirroring loses nothing, unconfirmed Events survive
continue-as-new, and the log rebuilt from workflow history is byte-identical."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mwp.client import MwpClient
from mwp.contracts.messages import group_authority
from mwp.dev.seaweed import SeaweedS3Server
from mwp.dev.stack import BackgroundStack
from mwp.log.group_log import GroupEventLog
from mwp.log.rebuild import compare, rebuild
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_keyring, stack_log_location
from tests.integration.missions_helper import (
    MissionRig,
    admit_workers,
    assert_contiguous,
    eventually,
    new_mission,
)
from tests.integration.s3_fixture import TEST_BUCKET, seaweed

__all__ = ["seaweed"]  # the session S3 server fixture, used by a test below


async def _mirrored(rig: MissionRig, *, timeout: float = 20) -> GroupEventLog:
    """Wait until the Mission reports its whole Group in the log; that log."""

    async def caught_up() -> bool:
        return await _through(rig) == await rig.mission.sequence()

    await eventually(caught_up, timeout=timeout)
    return GroupEventLog(open_store(stack_log_location()), rig.mission.group_id)


async def test_every_accepted_event_is_signed_chained_and_stored(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    item = await rig.authorize()
    await rig.complete(item, rig.crew.workers[0])

    log = await _mirrored(rig)

    entries = log.read(0, limit=10_000)
    assert_contiguous([e.event for e in entries])
    assert [e.event["eventId"] for e in entries] == [e["eventId"] for e in rig.log]
    # The stored Events are the accepted ones, plus the Authority's signature and chain link.
    for entry, accepted in zip(entries, rig.log, strict=True):
        assert {k: v for k, v in entry.event.items() if k not in ("signature", "extensions")} == {
            k: v for k, v in accepted.items() if k != "extensions"
        }
    evidence = await rig.crew.organization.registry.evidence()
    verdict = log.verify_all(evidence)
    assert verdict.ok, verdict.fault
    assert verdict.last_sequence == await rig.mission.sequence()


async def test_a_mirror_worker_killed_between_acceptance_and_mirroring_loses_nothing(
    mwp_client: MwpClient, temporal_stack: BackgroundStack
) -> None:
    queue = f"mwp-test-mirror-{uuid.uuid4().hex[:8]}"
    rig = await new_mission(mwp_client, mirror_task_queue=queue)
    await admit_workers(rig)
    item = await rig.authorize()
    # Accepted, and no mirror worker is running: nothing is in the log yet.
    assert await _through(rig) == 0

    with mirror_worker(temporal_stack.address, queue):  # SIGKILLed on leaving
        await eventually(lambda: _through_above(rig, 0), timeout=30)
    offer = await rig.offer(item, rig.crew.workers[0])
    await rig.accept(rig.crew.workers[0], item, offer["offers"][0]["offerId"])
    assert await _through(rig) < await rig.mission.sequence()

    with mirror_worker(temporal_stack.address, queue):
        log = await _mirrored(rig, timeout=60)
    entries = log.read(0, limit=10_000)
    assert [e.event["eventId"] for e in entries] == [e["eventId"] for e in rig.log]
    verdict = log.verify_all(await rig.crew.organization.registry.evidence())
    assert verdict.ok, verdict.fault
    assert verdict.last_sequence == await rig.mission.sequence()


async def test_unconfirmed_events_travel_across_continue_as_new(
    mwp_client: MwpClient, temporal_stack: BackgroundStack
) -> None:
    queue = f"mwp-test-mirror-{uuid.uuid4().hex[:8]}"
    rig = await new_mission(mwp_client, mirror_task_queue=queue, updates_per_run=3)
    await admit_workers(rig)
    for _ in range(3):
        await rig.authorize()
    assert await rig.client.query(rig.workflow_id, "run_number") >= 2
    assert await _through(rig) == 0  # every Event so far waits in the outbox

    with mirror_worker(temporal_stack.address, queue):
        log = await _mirrored(rig, timeout=60)
    assert [e.event["eventId"] for e in log.read(0, limit=10_000)] == [
        e["eventId"] for e in rig.log
    ]
    assert log.verify_all(await rig.crew.organization.registry.evidence()).ok


async def test_the_mirror_writes_the_log_to_s3(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, seaweed: SeaweedS3Server
) -> None:
    queue = f"mwp-test-mirror-{uuid.uuid4().hex[:8]}"
    prefix = f"mirror-{uuid.uuid4().hex[:8]}"
    rig = await new_mission(mwp_client, mirror_task_queue=queue)
    await admit_workers(rig)
    await rig.authorize()
    location = f"s3://{TEST_BUCKET}/{prefix}"
    with mirror_worker(temporal_stack.address, queue, location, seaweed.environment()):
        await eventually(lambda: _through_equals(rig), timeout=60)
    log = GroupEventLog(seaweed.object_store(TEST_BUCKET, prefix), rig.mission.group_id)
    assert [e.event["eventId"] for e in log.read(0, limit=10_000)] == [
        e["eventId"] for e in rig.log
    ]
    assert log.verify_all(await rig.crew.organization.registry.evidence()).ok


async def _through_equals(rig: MissionRig) -> bool:
    return await _through(rig) == await rig.mission.sequence()


async def _through(rig: MissionRig) -> int:
    value: int = await rig.client.query(rig.workflow_id, "mirrored_through")
    return value


async def _through_above(rig: MissionRig, sequence: int) -> bool:
    return await _through(rig) > sequence


@contextmanager
def mirror_worker(
    address: str, queue: str, log_store: str | None = None, env: dict[str, str] | None = None
) -> Iterator[None]:
    """A mirror worker process on ``queue``, killed with SIGKILL (no shutdown) on leaving:
    a write may be half done, as when a worker dies."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.mirror_worker",
            "--address",
            address,
            "--task-queue",
            queue,
            "--keyring",
            str(stack_keyring().directory),
            "--log-store",
            log_store or stack_log_location(),
        ],
        stdout=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        yield
    finally:
        process.kill()
        process.wait(timeout=10)


async def test_the_log_rebuilt_from_workflow_history_is_byte_identical(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client, updates_per_run=3)  # several runs of history
    await admit_workers(rig)
    item = await rig.authorize()
    offer = await rig.offer(item, rig.crew.workers[0])
    await rig.accept(rig.crew.workers[0], item, offer["offers"][0]["offerId"])
    await rig.authorize()
    assert await rig.client.query(rig.workflow_id, "run_number") >= 3
    mirrored = await _mirrored(rig)

    authority = stack_keyring().get(group_authority(rig.crew.organization.organization_id).id)
    assert authority is not None
    destination = open_store(tmp_path / "rebuilt")
    rebuilt = await rebuild(mwp_client.temporal, rig.mission.group_id, destination, authority)

    assert rebuilt.events == await rig.mission.sequence() and rebuilt.runs >= 3
    copy = GroupEventLog(destination, rig.mission.group_id)
    assert compare(mirrored, copy).identical
    assert copy.verify_all(await rig.crew.organization.registry.evidence()).ok
    # A difference is found: one entry stored differently in the copy.
    tampered = open_store(tmp_path / "tampered")
    changed = [dict(e) for e in rig.log]
    changed[-1]["correlationId"] = "urn:mwp:correlation:other"
    GroupEventLog(tampered, rig.mission.group_id).seal_and_append(
        changed, authority.key_id, authority.key
    )
    assert compare(mirrored, GroupEventLog(tampered, rig.mission.group_id)).first_difference == len(
        changed
    )


async def test_mwp_log_rebuild_reports_identical_and_different_logs(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    await rig.authorize()
    await _mirrored(rig)
    group = rig.mission.group_id
    common = [
        "--address",
        temporal_stack.address,
        "--state-dir",
        str(stack_keyring().directory.parent),
        "--org",
        rig.crew.organization.organization_id,
    ]

    def rebuild_cli(store: str, into: Path) -> tuple[int, str]:
        argv = ["log", "rebuild", group, "--into", str(into), "--store", store, *common]
        completed = subprocess.run(
            [sys.executable, "-m", "mwp", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return completed.returncode, completed.stdout + completed.stderr

    code, out = rebuild_cli(stack_log_location(), tmp_path / "one")
    assert code == 0, out
    assert "byte-identical" in out

    # A copy of the mirrored log with its last entry signed over other content differs there.
    copy = open_store(tmp_path / "copy")
    source = GroupEventLog(open_store(stack_log_location()), group)
    entries = source.read(0, limit=10_000)
    authority = stack_keyring().get(group_authority(rig.crew.organization.organization_id).id)
    assert authority is not None
    changed = [dict(e.event) for e in entries]
    for event in changed:
        event.pop("signature", None)
        event.pop("extensions", None)
    changed[-1]["correlationId"] = "urn:mwp:correlation:other"
    GroupEventLog(copy, group).seal_and_append(changed, authority.key_id, authority.key)
    code, out = rebuild_cli(str(tmp_path / "copy"), tmp_path / "two")
    assert code == 1, out
    assert f"first differ at sequence {len(changed)}" in out


async def test_large_events_reach_the_log_in_batches_under_the_payload_limit(
    mwp_client: MwpClient, temporal_stack: BackgroundStack
) -> None:
    """Six Commands of 400 KB wait for the mirror together (2.4 MB of Events): it takes them in
    batches of at most 1 MiB, so no activity input reaches Temporal's 2 MiB limit."""
    queue = f"mwp-test-mirror-{uuid.uuid4().hex[:8]}"
    rig = await new_mission(mwp_client, mirror_task_queue=queue)
    content = [{"type": "text", "text": "x" * 100_000} for _ in range(4)]  # 100,000 at most each
    for _ in range(6):
        await rig.send(rig.crew.owner, "message.post", {"content": content})
    assert await _through(rig) == 0  # all of it waits in the outbox

    with mirror_worker(temporal_stack.address, queue):
        log = await _mirrored(rig, timeout=60)
    assert [e.event["eventId"] for e in log.read(0, limit=100)] == [e["eventId"] for e in rig.log]
    history = await mwp_client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    batches = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].ByteSize()
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "mirror_events"
    ]
    assert len(batches) >= 3 and max(batches) < 1_200_000, batches
    failed = [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
    assert not failed
