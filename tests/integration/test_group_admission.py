"""First Admission on the Temporal path (spec 6.4, MWP-ADM-010, MWP-SDV-011).

A Command signed while its key was valid but presented after the Registry revoked the key is
refused, though its ``issuedAt`` precedes the revocation: the Group Authority's clock, not the
signer's, is the trusted acceptance time. A Command accepted before the revocation still gets
its receipt when resent byte for byte after it. A Group that never receives Registry evidence
refuses a Command as unverifiable (``AUTH_INVALID_SIGNATURE``) instead of failing internally.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from mwp.client import MwpClient, new_id, utc_now
from mwp.client.missions import MissionClient
from mwp.core.errors import ErrorCode
from mwp.core.trust.signed_document import verify
from mwp.core.wire.values import parse_timestamp
from tests.integration.missions_helper import (
    Crew,
    MissionRig,
    admit_workers,
    create_command,
    eventually,
    new_crew,
    new_mission,
    raw,
    refused,
)

POST = "message.post"


def text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}


async def _a_second_after(timestamp: str) -> str:
    """``utc_now()`` once it is later than ``timestamp`` (both are whole seconds)."""
    moment = parse_timestamp(timestamp).instant
    while parse_timestamp(now := utc_now()).instant <= moment:
        await asyncio.sleep(0.05)
    return now


async def _until_the_group_holds_the_revocation(rig: MissionRig, crew: Crew) -> None:
    """Registry notices reach the Group asynchronously. The probe is signed after the
    revocation with an impossible ``expectedRevision``: while the Group holds the older
    revision it fails that check (``REVISION_CONFLICT``); once it holds the new one, the key
    is revoked at the probe's own ``issuedAt`` (stage 4). Either way nothing is applied."""
    worker = crew.workers[0]

    async def held() -> bool:
        probe = await rig.command(worker, POST, text("probe"), expected_revision=2**40)
        error = await refused(rig.send_wire(raw(probe)))
        assert error.code in (ErrorCode.REVISION_CONFLICT, ErrorCode.AUTH_INVALID_SIGNATURE)
        return error.code == ErrorCode.AUTH_INVALID_SIGNATURE

    await eventually(held)


async def test_a_command_signed_before_its_key_was_revoked_is_refused_when_presented_after(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    registry = rig.crew.organization.registry
    accepted = await rig.command(worker, POST, text("presented before the revocation"))
    original = await rig.send_wire(raw(accepted))
    held = await rig.command(worker, POST, text("signed before, presented after"))

    revoked_at = await _a_second_after(held["issuedAt"])
    await registry.change_key_validity(worker.key_id, revoked_at=revoked_at)
    await _until_the_group_holds_the_revocation(rig, rig.crew)

    # Stage 4 still passes against the new evidence (issuedAt precedes revokedAt) and the
    # Command is seconds old, well inside the freshness window: only First Admission refuses.
    verify(raw(held).encode(), "command", await registry.evidence())
    error = await rig.assert_refused(
        partial(rig.send_wire, raw(held)), ErrorCode.AUTH_INVALID_SIGNATURE
    )
    assert "details" not in error.wire  # the protected diagnostic stays in the Authority

    # The Command accepted before the revocation still gets its receipt, byte for byte.
    again = await rig.send_wire(raw(accepted))
    assert again["duplicate"] is True
    assert again["receipt"] == original["receipt"] and again["events"] == []


async def test_without_registry_evidence_a_command_is_refused_as_unverifiable(
    mwp_client: MwpClient,
) -> None:
    # The Crew is registered with its Organization; this Mission names one whose registry
    # never started, so its Group never receives a Registry notice.
    crew = await new_crew(mwp_client, workers=0)
    missions = MissionClient(mwp_client, f"urn:mwp:organization:missing-{new_id()[-12:]}")
    command = create_command(crew)

    error = await asyncio.wait_for(refused(missions.create_signed(command)), timeout=60)

    assert error.code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert "details" not in error.wire
    mission = missions.mission(command["payload"]["missionId"], command["groupId"])
    assert await mission.sequence() == 0  # nothing was accepted
