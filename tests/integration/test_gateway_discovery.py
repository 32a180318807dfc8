"""Standing subscriptions through a real gateway (TLS 1.3, the session's dev server and its
in-process authority worker, whose mirror pushes hints): a SUBSCRIBE of the reserved
``MEMBER_GROUPS`` delivers every Group the Agent is a member of, found in the running Missions
at SUBSCRIBE and from the mirror's hints afterwards, and nothing of any other Group.

Every gateway here has a safety-net read and re-listing of a minute: a Group found within
seconds was found from a hint, not from reading on an interval."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.common import TypedSearchAttributes

from mwp.client import Identity, MwpClient, missions
from mwp.contracts.mission import mission_workflow_id
from mwp.contracts.names import ORGANIZATION_ID
from mwp.core.trust.registry import RegistryEvidence
from mwp.gateway import MEMBER_GROUPS
from mwp.gateway.client import GatewayClient, Inbox
from mwp.gateway.hints import BOARD
from mwp.gateway.server import GatewayOptions
from mwp.gateway.subscriptions import GroupReader
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import Crew, MissionRig, new_crew, new_mission
from tests.integration.test_child_and_follow_up_missions import _promote
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


async def test_another_organizations_missions_are_never_read(
    mwp_client: MwpClient,
    crew: Crew,
    rig: MissionRig,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two Organizations on one dev server and its one worker: the standing subscription of
    A's gateway reads A's Missions only. B's Mission and its child Mission (which carries no
    OrganizationId: its root's tells), running at SUBSCRIBE, listed again at each safety net and
    growing after (their hints reach A's gateway), are never read, so nothing about them is
    logged. A's child Mission, and a Mission of A started without the attribute (as before it
    existed), are still found."""
    worker = crew.workers[0]
    foreign = await new_mission(mwp_client, await new_crew(mwp_client, workers=1, spares=1))
    await post(foreign, "running at SUBSCRIBE")
    foreign_child, _ = await _promote(foreign, await foreign.authorize("B's child"))
    own_child, _ = await _promote(rig, await rig.authorize("A's child"))
    with monkeypatch.context() as before_the_attribute:
        before_the_attribute.setattr(missions, "organization_attribute", lambda _: NO_ATTRIBUTES)
        legacy = await new_mission(mwp_client, crew)
    assert await organization_of(mwp_client, legacy) is None
    assert await organization_of(mwp_client, foreign_child) is None
    assert await organization_of(mwp_client, foreign) == foreign.crew.organization.organization_id
    own = [await admit(rig, worker), await admit(legacy, worker)]
    strangers = {foreign.mission.group_id, foreign_child.mission.group_id}

    options = GatewayOptions(safety_net_seconds=0.5, refusal_seconds=0.3)  # several listings
    caplog.set_level(logging.WARNING, logger="mwp.gateway")
    hinted: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    async with running_gateway(mwp_client, crew.organization, tmp_path, options=options) as running:
        read = reads_of(running, monkeypatch)
        # Added after the gateway's listener: it sees each hint after the gateway did.
        token = BOARD.add(lambda group_id, sequence, _: hinted.put_nowait((group_id, sequence)))
        try:
            async with running.client() as client:
                inbox = Inbox()
                await standing(client, worker)
                for found, admitted in zip((rig, legacy), own, strict=True):
                    await reach(client, inbox, found.mission.group_id, admitted)
                grown = await post(foreign, "hinted after SUBSCRIBE")
                while await asyncio.wait_for(hinted.get(), PUSHED_SECONDS) != (
                    foreign.mission.group_id,
                    grown,
                ):
                    pass
                await asyncio.sleep(3 * options.safety_net_seconds)  # listed again meanwhile
        finally:
            BOARD.remove(token)
        assert {rig.mission.group_id, legacy.mission.group_id, own_child.mission.group_id} <= read
        assert not strangers & read
        assert not strangers & running.gateway.discovery.held
    about_strangers = [r for r in caplog.records if any(g in r.getMessage() for g in strangers)]
    assert about_strangers == []


NO_ATTRIBUTES = TypedSearchAttributes.empty


async def organization_of(client: MwpClient, rig: MissionRig) -> str | None:
    """The Mission's OrganizationId search attribute, as visibility holds it."""
    description = await client.temporal.get_workflow_handle(
        mission_workflow_id(rig.mission.mission_id)
    ).describe()
    return description.typed_search_attributes.get(ORGANIZATION_ID)


def reads_of(running: Running, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The Groups whose log the gateway's readers read from now on (filled as they do)."""
    read: set[str] = set()
    readers = running.gateway.readers
    acquire = readers.acquire

    async def recorded(group_id: str, *, evidence: RegistryEvidence | None = None) -> GroupReader:
        read.add(group_id)
        return await acquire(group_id, evidence=evidence)

    monkeypatch.setattr(readers, "acquire", recorded)
    return read
