"""SUBSCRIBE, EVENT and ACK through a real gateway (TLS 1.3, the session's dev server and its
in-process authority worker, whose mirror pushes hints): Membership on every delivery
(MWP-MSN-012), attention filters on live delivery only (MWP-MSN-013), per-Group flow control
(MWP-MSN-014), Cursors on the authority side and resumption after a dropped connection.

Every gateway here has a safety-net read of a minute: deliveries within seconds come from the
mirror's hints, not from reading on an interval."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mwp.client import Identity, MwpClient, new_id
from mwp.core.trust.registry import RegistryEvidence
from mwp.gateway.client import GatewayClient, Inbox
from mwp.gateway.hints import ADDRESSES_VARIABLE
from mwp.gateway.server import GatewayOptions
from mwp.log.compaction import compact
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, MissionRig, new_crew, new_mission, refused
from tests.integration.test_gateway import (
    Running,
    authenticated_worker,
    error_of,
    ping_frame,
    running_gateway,
)
from tests.integration.test_group_archive import authority_identity

SAFETY_NET = 60.0  # longer than any wait below: a delivery seen in time was pushed
REFUSAL = 0.3
OPTIONS = GatewayOptions(safety_net_seconds=SAFETY_NET, refusal_seconds=REFUSAL)


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=2, spares=2)


@pytest.fixture
async def rig(mwp_client: MwpClient, crew: Crew) -> MissionRig:
    return await new_mission(mwp_client, crew)


@pytest.fixture
async def gateway(mwp_client: MwpClient, crew: Crew, tmp_path: Path) -> AsyncIterator[Running]:
    async with running_gateway(
        mwp_client, crew.organization, tmp_path / "tls", options=OPTIONS
    ) as running:
        yield running


async def admit(rig: MissionRig, agent: Identity, role: str = "worker") -> int:
    """Admit ``agent``; the sequence of its membership.changed Event."""
    result = await rig.coordinate(
        "membership.change", {"memberId": agent.principal.id, "role": role}
    )
    return int(result["events"][0]["sequence"])


async def post(rig: MissionRig, text: str) -> int:
    result = await rig.post(rig.crew.coordinator, text)
    return int(result["events"][-1]["sequence"])


def group(rig: MissionRig, after: int = 0, **attention: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"groupId": rig.mission.group_id, "afterSequence": after}
    if attention:
        value["attention"] = attention
    return value


async def reach(client: GatewayClient, inbox: Inbox, group_id: str, sequence: int) -> Inbox:
    """Read until the Group's position (Event or ACK watermark) reaches ``sequence``."""
    return await client.collect(inbox, lambda box: box.position(group_id) >= sequence)


async def flush(client: GatewayClient, inbox: Inbox) -> None:
    """Read every frame the server sends before it answers a PING into ``inbox``."""
    ping = ping_frame()
    await client.send(ping)
    while True:
        incoming = await client.receive()
        if incoming.value.get("replyToNonce") == ping["nonce"]:
            return
        inbox.take(incoming)


async def nothing_more(client: GatewayClient, inbox: Inbox) -> None:
    """Nothing new reaches ``inbox``, now or a moment later."""
    before = (dict(inbox.positions), sum(len(v) for v in inbox.events.values()), inbox.errors[:])
    await flush(client, inbox)
    await asyncio.sleep(0.3)
    await flush(client, inbox)
    assert (dict(inbox.positions), sum(len(v) for v in inbox.events.values()), inbox.errors) == (
        before
    )


async def test_a_strangers_command_is_answered_as_for_a_group_that_does_not_exist(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    """A COMMAND tells a stranger no more than a SUBSCRIBE: whatever the Authority would have
    refused it with, it gets the answer a missing Group gets; a member gets the real one."""
    stranger, member = crew.spares[0], crew.workers[0]
    await post(rig, "not for strangers")
    before = await rig.mission.sequence()
    real, missing = rig.mission.group_id, new_id()
    post_payload = {"content": [{"type": "text", "text": "let me in"}]}
    answers = []
    async with gateway.client() as client:
        await client.hello(stranger)
        for group_id in (real, missing):
            action_id = "urn:uuid:00000000-0000-4000-8000-000000000031"  # the same both times
            command = stranger.command(
                "message.post",
                post_payload,
                group_id=group_id,
                session_epoch=client.session_epoch,
                membership_epoch=1,
                action_id=action_id,
            )
            error = (await refused(client.command(command))).wire
            masked = {**error, "occurredAt": "-", "relatedFrameId": "-"}  # its own frame, instant
            answers.append(json.dumps(masked).replace(group_id, "<group>"))
        assert answers[0] == answers[1]
        assert json.loads(answers[0])["code"] == "GROUP_NOT_FOUND"
    assert await rig.mission.sequence() == before
    await admit(rig, member)
    async with gateway.client() as client:  # a member is told what the Authority decided
        epoch = await authenticated_worker(rig, client, member)
        conflict = await rig.command(
            member, "message.post", post_payload, session_epoch=epoch, expected_revision=2**40
        )
        assert (await refused(client.command(conflict))).code.value == "REVISION_CONFLICT"


def beyond(group_id: str, sequence: int) -> Callable[[Inbox], bool]:
    return lambda box: box.position(group_id) > sequence


def sequences(events: list[dict[str, Any]]) -> list[int]:
    return [int(e["sequence"]) for e in events]


async def test_a_non_member_cannot_tell_a_group_from_one_that_does_not_exist(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    stranger = crew.spares[0]  # registered, with a session, never a member
    await post(rig, "not for strangers")
    real, missing = rig.mission.group_id, new_id()
    answers: list[tuple[str, float]] = []
    async with gateway.client() as client:
        await client.hello(stranger)
        loop = asyncio.get_running_loop()
        for group_id in (real, missing, real):
            frame_id = "urn:uuid:00000000-0000-4000-8000-000000000013"  # the same both times
            await client.send(
                {
                    "protocolVersion": "0.1",
                    "frameId": frame_id,
                    "frameType": "SUBSCRIBE",
                    "subscriptionId": frame_id,
                    "groups": [{"groupId": group_id, "afterSequence": 0}],
                }
            )
            started = loop.time()
            incoming = await client.receive()
            elapsed = loop.time() - started
            error = error_of(incoming)
            assert error["code"] == "GROUP_NOT_FOUND" and error["groupId"] == group_id
            # The frame with what must differ masked: its own ID, its instant, the Group asked.
            masked = dict(incoming.value, frameId="-", error={**error, "occurredAt": "-"})
            answers.append((json.dumps(masked).replace(group_id, "<group>"), elapsed))
        assert answers[0][0] == answers[1][0] == answers[2][0]
        assert all(elapsed >= REFUSAL * 0.9 for _, elapsed in answers)
        await post(rig, "still not for strangers")
        await nothing_more(client, Inbox())  # no EVENT of the Group ever reached it
        # Nor does an ACK for it tell anything else.
        await client.ack(real, 1)
        assert error_of(await client.receive())["code"] == "GROUP_NOT_FOUND"


async def test_a_removed_member_receives_its_removal_and_nothing_after(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    worker = crew.workers[0]
    admitted = await admit(rig, worker)
    group_id = rig.mission.group_id
    async with gateway.client() as client, gateway.client() as coordinator:
        await client.hello(worker)
        # Its own HELLO fences the Coordinator's older session: its Commands follow it.
        await authenticated_worker(rig, coordinator, crew.coordinator)
        inbox, overseer = Inbox(), Inbox()
        await client.subscribe([group(rig)])
        await coordinator.subscribe([group(rig)])
        await reach(client, inbox, group_id, admitted)
        # Replay starts at its admission, whatever afterSequence asked for.
        assert sequences(inbox.of(group_id))[0] == admitted

        before = await post(rig, "while you are here")
        await reach(client, inbox, group_id, before)  # pushed: no safety-net read in time
        ended = await rig.coordinate(
            "membership.end", {"memberId": worker.principal.id, "reason": "done"}
        )
        removal = int(ended["events"][0]["sequence"])
        after = await post(rig, "after you left")
        await rig.coordinate(
            "membership.change", {"memberId": crew.spares[1].principal.id, "role": "reviewer"}
        )
        last = await post(rig, "and more")
        await reach(coordinator, overseer, group_id, last)  # the Coordinator sees it all
        assert sequences(overseer.of(group_id)) == list(range(1, last + 1))

        await reach(client, inbox, group_id, removal)
        await nothing_more(client, inbox)
        got = sequences(inbox.of(group_id))
        assert got == list(range(admitted, removal + 1))
        assert inbox.of(group_id)[-1]["kind"] == "membership.ended"
        assert inbox.position(group_id) == removal < after  # not even a watermark past it


async def test_a_late_joiner_sees_only_what_its_membership_allows_and_filters_are_live_only(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    joiner = crew.spares[0]
    for n in range(3):
        await post(rig, f"history {n}")
    admitted = await admit(rig, joiner)
    after_admission = await post(rig, "the joiner may read this")
    group_id = rig.mission.group_id
    # Replay (filtered by Membership only) then live delivery through an attention filter
    # that wants only Membership Events.
    attention = {"eventKinds": ["membership.changed"]}
    async with gateway.client() as client:
        await client.hello(joiner)
        inbox = Inbox()
        await client.subscribe([group(rig, 0, **attention)])
        await reach(client, inbox, group_id, after_admission)
        assert sequences(inbox.of(group_id)) == list(range(admitted, after_admission + 1))
        assert "message.posted" in [e["kind"] for e in inbox.of(group_id)]  # replay: unfiltered

        live_post = await post(rig, "live, filtered out")
        # The withheld live Event still advances the position: an ACK watermark through it.
        await reach(client, inbox, group_id, live_post)
        assert sequences(inbox.of(group_id))[-1] == after_admission
        wanted_live = await admit(rig, crew.spares[1], "reviewer")
        await reach(client, inbox, group_id, wanted_live)
        assert sequences(inbox.of(group_id))[-1] == wanted_live
        assert inbox.of(group_id)[-1]["kind"] == "membership.changed"

    async with gateway.client() as again:  # the filtered Event stays in durable history
        await again.hello(joiner)
        replay = Inbox()
        await again.subscribe([group(rig, admitted)])
        await reach(again, replay, group_id, wanted_live)
        assert live_post in sequences(replay.of(group_id))


async def test_a_flooding_group_is_paused_while_the_other_keeps_its_delivery(
    mwp_client: MwpClient, crew: Crew, tmp_path: Path
) -> None:
    worker = crew.workers[0]
    noisy, quiet = await new_mission(mwp_client, crew), await new_mission(mwp_client, crew)
    noisy_id, quiet_id = noisy.mission.group_id, quiet.mission.group_id
    await admit(noisy, worker)
    for n in range(5):
        await post(noisy, f"noise {n}")
    quiet_admitted = await admit(quiet, worker)
    window = 3
    options = GatewayOptions(safety_net_seconds=SAFETY_NET, group_window=window, retry_after_ms=200)
    async with (
        running_gateway(mwp_client, crew.organization, tmp_path, options=options) as running,
        running.client() as client,
    ):
        await client.hello(worker)
        inbox = Inbox()
        frame_id = await client.subscribe([group(noisy), group(quiet)])

        def paused(box: Inbox) -> bool:
            return any(
                e["code"] == "BACKPRESSURE" and e.get("groupId") == noisy_id for e in box.errors
            )

        await client.collect(inbox, lambda box: paused(box) and box.position(quiet_id) > 0)
        pressure = next(e for e in inbox.errors if e["code"] == "BACKPRESSURE")
        assert pressure["retryAfterMs"] == 200 and pressure["retryable"] is True
        assert pressure["relatedFrameId"] == frame_id
        assert len(inbox.of(noisy_id)) == window  # the noisy Group stopped at its window

        # The quiet Group keeps its delivery while the noisy one is paused (its ACKs only).
        await client.ack(quiet_id, inbox.position(quiet_id))
        for n in range(2):
            sequence = await post(quiet, f"quiet {n}")
            await reach(client, inbox, quiet_id, sequence)
            await client.ack(quiet_id, sequence)
        assert sequences(inbox.of(quiet_id))[0] == quiet_admitted
        assert len(inbox.of(noisy_id)) == window

        # Acknowledged, the noisy Group resumes from its position: nothing lost.
        noisy_last = await noisy.mission.sequence()
        while inbox.position(noisy_id) < noisy_last:
            await client.ack(noisy_id, inbox.position(noisy_id))
            await client.collect(inbox, beyond(noisy_id, inbox.position(noisy_id)))
        got = sequences(inbox.of(noisy_id))
        assert got == list(range(got[0], noisy_last + 1))


async def test_a_dropped_connection_resumes_after_its_acked_cursor(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    worker = crew.workers[0]
    admitted = await admit(rig, worker)
    first = [await post(rig, f"before {n}") for n in range(3)]
    group_id = rig.mission.group_id
    cursors = ObjectCursorStore(open_store(stack_log_location()))
    inbox = Inbox()  # the agent's memory of Event IDs, kept across connections
    async with gateway.client() as client:
        await client.hello(worker)
        await client.subscribe([group(rig)])
        await reach(client, inbox, group_id, first[-1])
        acked = first[0]
        await client.ack(group_id, acked)
        await client.ack(group_id, admitted)  # never backwards: ignored
        await client.ack(group_id, first[-1] + 50)  # beyond what was delivered: refused
        await flush(client, inbox)  # the ACKs before it are decided by now
        assert [e["code"] for e in inbox.errors] == ["PROTOCOL_VIOLATION"]
    stored = await asyncio.to_thread(cursors.load, group_id, worker.principal.id)
    assert stored is not None and stored.sequence == acked  # on the authority side

    missed = [await post(rig, f"while away {n}") for n in range(2)]
    async with gateway.client() as client:
        await client.hello(worker)
        await client.subscribe([group(rig)])  # afterSequence 0: the stored Cursor wins
        await reach(client, inbox, group_id, missed[-1])
    got = sequences(inbox.of(group_id))
    assert got == list(range(admitted, missed[-1] + 1))  # nothing lost, each once
    assert inbox.duplicates == first[-1] - acked  # re-sent after the Cursor, deduplicated


async def test_a_compacted_group_is_delivered_whole_and_its_memberships_still_hold(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    worker, leaver = crew.workers[0], crew.spares[0]
    admitted = await admit(rig, worker)
    joined = await admit(rig, leaver)
    await post(rig, "archived")
    ended = await rig.coordinate(
        "membership.end", {"memberId": leaver.principal.id, "reason": "done"}
    )
    removal = int(ended["events"][0]["sequence"])
    await post(rig, "archived, after the removal")
    last = await post(rig, "online")
    log, _ = await rig.verified_log()
    authority = authority_identity(rig)
    evidence = RegistryEvidence.from_json(await crew.organization.registry.evidence_json())
    # The Membership Events are only in the archive now; the reader starts at subscription.
    await asyncio.to_thread(
        compact, log, removal + 1, authority.key_id, authority.key, evidence=evidence
    )
    assert await asyncio.to_thread(log.first_sequence) == removal + 2
    group_id = rig.mission.group_id
    async with gateway.client() as client, gateway.client() as former:
        await client.hello(worker)
        await former.hello(leaver)
        inbox, old = Inbox(), Inbox()
        await client.subscribe([group(rig)])
        await former.subscribe([group(rig)])
        await reach(client, inbox, group_id, last)
        assert sequences(inbox.of(group_id)) == list(range(admitted, last + 1))
        await reach(former, old, group_id, removal)
        await nothing_more(former, old)
        assert sequences(old.of(group_id)) == list(range(joined, removal + 1))
        assert not inbox.errors and not old.errors


async def test_hints_from_another_process_wake_the_reader(
    mwp_client: MwpClient,
    crew: Crew,
    rig: MissionRig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gateway that takes no in-process hints: the mirror's UDP hint alone wakes it."""
    worker = crew.workers[0]
    await admit(rig, worker)
    options = GatewayOptions(
        safety_net_seconds=SAFETY_NET, hint_listen=("127.0.0.1", 0), in_process_hints=False
    )
    async with running_gateway(mwp_client, crew.organization, tmp_path, options=options) as r:
        assert r.gateway.hint_address is not None
        host, port = r.gateway.hint_address
        monkeypatch.setenv(ADDRESSES_VARIABLE, f"{host}:{port}")  # the mirror's environment
        async with r.client() as client:
            await client.hello(worker)
            inbox = Inbox()
            await client.subscribe([group(rig)])
            await reach(client, inbox, rig.mission.group_id, await rig.mission.sequence())
            sequence = await post(rig, "pushed over the loopback channel")
            await reach(client, inbox, rig.mission.group_id, sequence)
