"""Group archival on Temporal (spec 7.4, 15.2): `mwp log archive` writes a closed Group's
signed final snapshot and sends the archive Command; the MissionWorkflow verifies the snapshot's
signature, records `group.snapshot.created` and `group.archived` (mirrored, signed, verified in
the Group Event log), ends its retention window and completes; afterwards every Command is
refused with a typed error. A snapshot whose signature does not verify is refused first."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from mwp.cli import main
from mwp.client import MwpClient
from mwp.client.identity import Identity
from mwp.client.missions import MissionClient
from mwp.contracts import command_size
from mwp.contracts.messages import group_authority
from mwp.contracts.mission import QUERY_MIRRORED_THROUGH
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.archive import GROUP_ARCHIVE_KIND
from mwp.core.group.archive import compact_snapshot as compact
from mwp.core.trust.registry import RegistryEvidence
from mwp.dev.stack import BackgroundStack
from mwp.log.compaction import archive_group, final_snapshot, latest_snapshot
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import open_store
from mwp.workflows import patches
from tests.histories import needs_patch
from tests.integration.conftest import stack_keyring, stack_log_location
from tests.integration.missions_helper import (
    MissionRig,
    admit_workers,
    create_command,
    new_crew,
)

# Long enough that only archival, not the window running out, ends the workflow in time.
RETENTION = 120


async def closed_rig(client: MwpClient, retention: int = RETENTION) -> MissionRig:
    crew = await new_crew(client, workers=1)
    missions = MissionClient(
        client, crew.organization.organization_id, closed_retention_seconds=retention
    )
    command = create_command(crew)
    created = await missions.create_signed(command)
    mission = missions.mission(command["payload"]["missionId"], command["groupId"])
    rig = MissionRig(crew, missions, mission, created, command)
    await admit_workers(rig)
    await rig.authorize("Index the archive")
    await rig.send(rig.crew.owner, "mission.cancel", {"reason": "replanned"})
    sequence = await rig.mission.sequence()
    for _ in range(200):  # the final snapshot covers the mirrored log
        if await client.query(rig.workflow_id, QUERY_MIRRORED_THROUGH) >= sequence:
            break
        await asyncio.sleep(0.05)
    return rig


async def workflow_result(rig: MissionRig) -> dict[str, Any]:
    result: dict[str, Any] = await rig.client.temporal.get_workflow_handle(rig.workflow_id).result()
    return result


def authority_identity(rig: MissionRig) -> Identity:
    identity = stack_keyring().get(group_authority(rig.crew.organization.organization_id).id)
    assert identity is not None
    return identity


def cli_options(rig: MissionRig, stack: BackgroundStack) -> list[str]:
    return [
        "--store",
        stack_log_location(),
        "--state-dir",
        str(stack.stack.config.state_dir),
        "--org",
        rig.crew.organization.organization_id,
        "--address",
        stack.address,
        "--namespace",
        stack.namespace,
    ]


async def archive_with_cli(
    rig: MissionRig, stack: BackgroundStack, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    argv = ["log", "archive", rig.mission.group_id, "--json", *cli_options(rig, stack)]
    code = await asyncio.to_thread(main, argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_the_cli_archives_a_closed_group_and_the_group_then_refuses_commands(
    mwp_client: MwpClient,
    temporal_stack: BackgroundStack,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rig = await closed_rig(mwp_client)
    group_id = rig.mission.group_id
    through = await rig.mission.sequence()
    evidence = RegistryEvidence.from_json(await rig.crew.organization.registry.evidence_json())
    log = GroupEventLog(open_store(stack_log_location()), group_id)
    authority = authority_identity(rig)

    # A final snapshot whose signature no longer covers its content is refused by the shell.
    reference = archive_group(log, authority.key_id, authority.key, evidence=evidence)
    tampered: dict[str, Any] = copy.deepcopy(final_snapshot(log, reference).document)
    tampered["policyLog"][0]["occurredAt"] = "2020-01-01T00:00:00Z"
    with pytest.raises(MwpError) as refused:
        await rig.mission.send(authority, GROUP_ARCHIVE_KIND, {"snapshot": tampered})
    assert refused.value.code is ErrorCode.AUTH_INVALID_SIGNATURE
    with pytest.raises(MwpError) as refused:  # compact: verified with its Event IDs put back
        await rig.mission.send(authority, GROUP_ARCHIVE_KIND, {"snapshot": compact(tampered)})
    assert refused.value.code is ErrorCode.AUTH_INVALID_SIGNATURE
    assert await rig.mission.sequence() == through

    # As for a Group whose Event IDs pass the Command bound, the CLI sends a compact snapshot.
    measure = command_size.command_payload_bytes
    monkeypatch.setattr(
        command_size,
        "command_payload_bytes",
        lambda wire: measure(wire) * (1000 if '"eventIds"' in wire else 1),
    )
    code, out, err = await archive_with_cli(rig, temporal_stack, capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["snapshot"]["throughSequence"] == through
    assert result["archived"]["sequence"] == through + 2

    # The workflow completes long before its retention window ends.
    outcome = await asyncio.wait_for(workflow_result(rig), timeout=RETENTION / 2)
    assert outcome["state"] == "cancelled" and outcome["sequence"] == through + 2
    verdict = log.verify_all(evidence)  # six stages: the event schema included
    assert verdict.ok and verdict.last_sequence == through + 2
    entries = log.read(through, 10)
    assert [e.event["kind"] for e in entries] == ["group.snapshot.created", "group.archived"]
    created = entries[0].event["payload"]
    assert created["snapshotHash"] == reference.snapshot_hash
    # Events carry the causing Command's signing hash (issue 15, item 6).
    assert {e.event["commandHash"] for e in entries} == {result["archived"]["signingHash"]}

    with pytest.raises(MwpError) as closed:
        await rig.post(rig.crew.owner, "anyone there?")
    assert closed.value.code is ErrorCode.INVALID_STATE_TRANSITION
    code, _, err = await archive_with_cli(rig, temporal_stack, capsys)
    assert code == 1 and "not recorded" in err


async def test_an_archiving_history_needs_its_patch(
    mwp_client: MwpClient,
    temporal_stack: BackgroundStack,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The history of an archived Group's workflow, recorded with the patch, replays; with its
    check removed (the old branch always) it no longer does. (Histories from before the patch
    hold no archive Command and replay in tests/workflows.)"""
    rig = await closed_rig(mwp_client)
    code, _, err = await archive_with_cli(rig, temporal_stack, capsys)
    assert code == 0, err
    await asyncio.wait_for(workflow_result(rig), timeout=RETENTION / 2)
    handle = rig.client.temporal.get_workflow_handle(rig.workflow_id)
    history = await handle.fetch_history()
    await needs_patch(history, patches.MISSION_ARCHIVES.id, monkeypatch)


async def test_a_closed_group_archives_itself_when_its_retention_window_ends(
    mwp_client: MwpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody archives it: at the window's end the archival service stores the signed final
    snapshot and the Group records its archive Command (compact, signed by its Group Authority)
    before the workflow completes. Replaying that history without the oversight patch fails:
    the old branch completes without archiving."""
    rig = await closed_rig(mwp_client, retention=2)
    through = await rig.mission.sequence()

    outcome = await asyncio.wait_for(workflow_result(rig), timeout=60)

    assert outcome["state"] == "cancelled" and outcome["sequence"] == through + 2
    store = open_store(stack_log_location())
    log = GroupEventLog(store, rig.mission.group_id)
    evidence = RegistryEvidence.from_json(await rig.crew.organization.registry.evidence_json())
    verdict = log.verify_all(evidence)
    assert verdict.ok and verdict.last_sequence == through + 2, verdict
    created, archived = (e.event for e in log.read(through, 10))
    assert [created["kind"], archived["kind"]] == ["group.snapshot.created", "group.archived"]
    assert created["actor"]["id"] == authority_identity(rig).principal.id
    reference = latest_snapshot(store, rig.mission.group_id)
    assert reference is not None and reference.through_sequence == through
    assert created["payload"]["snapshotHash"] == reference.snapshot_hash
    final = final_snapshot(log, reference)  # its hash, state document and Mission check out
    assert final.document["eventIds"] == [e.event["eventId"] for e in log.read(0, through)]
    assert final.mission_id == rig.mission.mission_id

    history = await rig.client.temporal.get_workflow_handle(rig.workflow_id).fetch_history()
    await needs_patch(history, patches.MISSION_OVERSIGHT.id, monkeypatch)
