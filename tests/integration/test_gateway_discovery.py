"""Standing subscriptions through a real gateway (TLS 1.3, the session's dev server and its
in-process authority worker, whose mirror pushes hints): a SUBSCRIBE of the reserved
``MEMBER_GROUPS`` delivers every Group the Agent is a member of, found in the running Missions
at SUBSCRIBE and from the mirror's hints afterwards, and nothing of any other Group.

Every gateway here has a safety-net read and re-listing of a minute: a Group found within
seconds was found from a hint, not from reading on an interval."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mwp.client import Identity, MwpClient
from mwp.gateway import MEMBER_GROUPS
from mwp.gateway.client import GatewayClient, Inbox
from mwp.gateway.server import GatewayOptions
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, MissionRig, new_crew, new_mission
from tests.integration.test_gateway import Running, running_gateway
from tests.integration.test_gateway_subscribe import (
    admit,
    beyond,
    nothing_more,
    post,
    reach,
    sequences,
)

SAFETY_NET = 60.0  # longer than any wait below: a Group found in time was found by a hint
OPTIONS = GatewayOptions(safety_net_seconds=SAFETY_NET, refusal_seconds=0.3)
# From the Command's answer to the first EVENT of the Group on the standing subscription:
# loose, for a shared CI machine; far below the safety net.
PUSHED_SECONDS = 3.0

STANDING: dict[str, Any] = {"groupId": MEMBER_GROUPS, "afterSequence": 0}


@pytest.fixture
async def crew(mwp_client: MwpClient) -> Crew:
    return await new_crew(mwp_client, workers=1, spares=2)


@pytest.fixture
async def rig(mwp_client: MwpClient, crew: Crew) -> MissionRig:
    return await new_mission(mwp_client, crew)


@pytest.fixture
async def gateway(mwp_client: MwpClient, crew: Crew, tmp_path: Path) -> AsyncIterator[Running]:
    async with running_gateway(
        mwp_client, crew.organization, tmp_path / "tls", options=OPTIONS
    ) as running:
        yield running


async def standing(client: GatewayClient, agent: Identity, **attention: Any) -> str:
    await client.hello(agent)
    entry = dict(STANDING, attention=attention) if attention else STANDING
    return await client.subscribe([entry])


async def held(running: Running, group_id: str) -> None:
    """Wait until the gateway's discovery holds the Group's reader (it has read the log)."""
    async with asyncio.timeout(PUSHED_SECONDS):
        while group_id not in running.gateway.discovery.held:
            await asyncio.sleep(0.02)


async def first_event(client: GatewayClient, inbox: Inbox, group_id: str) -> float:
    """Read until an Event of ``group_id`` arrives; the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    await client.collect(inbox, lambda box: bool(box.of(group_id)), timeout=PUSHED_SECONDS)
    return loop.time() - started


async def test_a_standing_subscriber_gets_nothing_until_admitted_then_from_its_admission(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    joiner, stranger = crew.spares
    group_id = rig.mission.group_id
    history = [await post(rig, f"before anyone joins {n}") for n in range(2)]
    async with gateway.client() as client, gateway.client() as other:
        inbox, nothing = Inbox(), Inbox()
        await standing(client, joiner)
        await standing(other, stranger)
        await held(gateway, group_id)  # found in the listing, read...
        await nothing_more(client, inbox)  # ...and not a frame of it for a non-member
        await post(rig, "still before")
        await nothing_more(client, inbox)

        admitted = await admit(rig, joiner)
        took = await first_event(client, inbox, group_id)
        print(f"first EVENT after {took * 1000:.0f} ms")
        assert took < PUSHED_SECONDS
        after = await post(rig, "welcome")
        await reach(client, inbox, group_id, after)
        # From its admission on (MWP-MSN-012), whatever came before.
        assert sequences(inbox.of(group_id)) == list(range(admitted, after + 1))
        assert history[-1] < admitted
        assert inbox.errors == []

        # The stranger, standing subscribed all along, never learned of the Group.
        await nothing_more(other, nothing)
        assert nothing.positions == {} and nothing.events == {} and nothing.errors == []

        # Removed, it gets its removal and nothing after; admitted again, the Group again
        # from its new admission, not the Events in between.
        ended = await rig.coordinate(
            "membership.end", {"memberId": joiner.principal.id, "reason": "done"}
        )
        removal = int(ended["events"][0]["sequence"])
        await reach(client, inbox, group_id, removal)
        away = await post(rig, "while away")
        await nothing_more(client, inbox)
        readmitted = await admit(rig, joiner, "reviewer")
        back = await post(rig, "welcome back")
        await reach(client, inbox, group_id, back)
        assert sequences(inbox.of(group_id)) == [
            *range(admitted, removal + 1),
            *range(readmitted, back + 1),
        ]
        assert removal < away < readmitted


async def test_a_mission_created_after_the_standing_subscribe_is_found_from_its_hints(
    mwp_client: MwpClient, gateway: Running, crew: Crew
) -> None:
    worker, stranger = crew.workers[0], crew.spares[0]
    async with gateway.client() as client, gateway.client() as other:
        inbox, nothing = Inbox(), Inbox()
        await standing(client, worker)
        await standing(other, stranger)
        await nothing_more(client, inbox)
        later = await new_mission(mwp_client, crew)  # listed nowhere at SUBSCRIBE time
        group_id = later.mission.group_id
        await post(later, "before the worker")
        admitted = await admit(later, worker)
        took = await first_event(client, inbox, group_id)
        print(f"first EVENT after {took * 1000:.0f} ms")
        assert took < PUSHED_SECONDS
        assert group_id in gateway.gateway.discovery.held
        last = await post(later, "for the worker")
        await reach(client, inbox, group_id, last)
        assert sequences(inbox.of(group_id)) == list(range(admitted, last + 1))
        await nothing_more(other, nothing)
        assert nothing.events == {} and nothing.positions == {} and nothing.errors == []


async def test_a_standing_subscriber_resumes_after_its_acked_cursor(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    worker = crew.workers[0]
    group_id = rig.mission.group_id
    admitted = await admit(rig, worker)
    posted = [await post(rig, f"first {n}") for n in range(3)]
    cursors = ObjectCursorStore(open_store(stack_log_location()))
    inbox = Inbox()  # the agent's memory of Event IDs, kept across connections
    async with gateway.client() as client:
        await standing(client, worker)  # the Group is found in the listing at SUBSCRIBE
        await reach(client, inbox, group_id, posted[-1])
        assert sequences(inbox.of(group_id))[0] == admitted
        await client.ack(group_id, posted[0])  # ACKs work for a Group it was given
        await client.ack(group_id, posted[-1] + 50)  # and are checked as for any Group
        await client.collect(inbox, lambda box: bool(box.errors))
        assert [e["code"] for e in inbox.errors] == ["PROTOCOL_VIOLATION"]
        await nothing_more(client, inbox)
    stored = await asyncio.to_thread(cursors.load, group_id, worker.principal.id)
    assert stored is not None and stored.sequence == posted[0]

    missed = [await post(rig, f"while away {n}") for n in range(2)]
    async with gateway.client() as client:
        await standing(client, worker)
        resumed = Inbox()
        await reach(client, resumed, group_id, missed[-1])
        # Resumed after the ACKed Cursor, not from the start (its afterSequence is ignored).
        assert sequences(resumed.of(group_id)) == list(range(posted[0] + 1, missed[-1] + 1))


async def test_an_explicit_subscribe_replaces_the_groups_feed(
    gateway: Running, rig: MissionRig, crew: Crew
) -> None:
    """A SUBSCRIBE naming the Group beside the standing one: that Group's feed is replaced (here
    with an attention filter), the standing subscription goes on for new Groups."""
    worker = crew.workers[0]
    group_id = rig.mission.group_id
    admitted = await admit(rig, worker)
    async with gateway.client() as client:
        inbox = Inbox()
        await standing(client, worker)
        await reach(client, inbox, group_id, admitted)
        await client.subscribe(
            [
                {
                    "groupId": group_id,
                    "afterSequence": admitted,
                    "attention": {"eventKinds": ["membership.changed"]},
                }
            ]
        )
        await nothing_more(client, inbox)
        live_post = await post(rig, "filtered out by the explicit SUBSCRIBE")
        await client.collect(inbox, beyond(group_id, live_post - 1))
        assert sequences(inbox.of(group_id)) == [admitted]  # withheld: an ACK watermark only
        connection = next(iter(gateway.gateway.open_connections))
        assert list(connection.feeds) == [group_id]  # one feed of the Group, not two


async def test_without_hints_the_safety_net_listing_finds_a_new_mission(
    mwp_client: MwpClient, crew: Crew, tmp_path: Path
) -> None:
    """Hints can be lost: a gateway that takes none finds a new Mission at its next listing."""
    worker = crew.workers[0]
    options = GatewayOptions(safety_net_seconds=0.5, in_process_hints=False)
    async with (
        running_gateway(mwp_client, crew.organization, tmp_path, options=options) as running,
        running.client() as client,
    ):
        inbox = Inbox()
        await standing(client, worker)
        await nothing_more(client, inbox)
        later = await new_mission(mwp_client, crew)
        admitted = await admit(later, worker)
        await client.collect(inbox, lambda box: bool(box.of(later.mission.group_id)), timeout=10)
        assert sequences(inbox.of(later.mission.group_id))[0] == admitted
