"""The gateway inbox takes every frame it was given, however long taking one takes: taking an
offer may retrieve its Context Package's cited Events over HTTPS, and taking a Group's first
Event reads its journal. The link here is an in-memory stand-in for the connection (what the
inbox calls of it); the frames are what the gateway sends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mwp.agent.gateway_inbox import GatewayInboxes, journal_key, read_journal
from mwp.agent.gateway_views import GroupViews
from mwp.core.models.websocket_frame import EventFrame
from mwp.core.wire.jcs import canonicalize
from mwp.gateway.frames import Incoming
from mwp.stores.objects import ObjectStore, open_store

AGENT = "urn:mwp:agent:slow-reader"
GROUP = "urn:mwp:group:g"
MISSION = "urn:mwp:mission:m"
ITEM = "urn:mwp:work-item:w"
# Longer than the inbox's wait for its next frame.
SLOW_SECONDS = 0.8


class SlowLink:
    """What the inbox uses of a GatewayLink; retrieving cited Events takes SLOW_SECONDS."""

    def __init__(self) -> None:
        self.listener: Any = None
        self.closed = asyncio.Event()
        self.own_actions: dict[str, None] = {}
        self.views: dict[str, GroupViews] = {}
        self.acked: list[int] = []

    def group(self, group_id: str) -> GroupViews:
        return self.views.setdefault(group_id, GroupViews(group_id, AGENT))

    async def subscribe(self, groups: list[dict[str, Any]]) -> str:
        return "urn:uuid:subscription"

    async def learn_offered(self, group_id: str, event: dict[str, Any]) -> list[Any]:
        if event["kind"] == "work.offer.created":
            await asyncio.sleep(SLOW_SECONDS)  # an HTTPS round trip under load
        return []

    async def ack(self, group_id: str, sequence: int) -> None:
        self.acked.append(sequence)


def _inboxes(
    link: SlowLink, journal: ObjectStore, held: dict[str, Any]
) -> tuple[GatewayInboxes, list[dict[str, Any]]]:
    """Inboxes over ``link`` whose Scheduler holds ``held``; the batches they signal."""
    batches: list[dict[str, Any]] = []

    async def cursors() -> dict[str, Any]:
        return held

    async def deliver(batch: dict[str, Any]) -> None:
        batches.append(batch)

    inboxes = GatewayInboxes(link, cursors, deliver, agent_id=AGENT, journal=journal)  # type: ignore[arg-type]
    return inboxes, batches


def event(sequence: int, kind: str, payload: dict[str, Any]) -> Incoming:
    body = {
        "eventId": f"urn:uuid:event-{sequence}",
        "groupId": GROUP,
        "sequence": sequence,
        "kind": kind,
        "workItemId": ITEM,
        "payload": payload,
        "signature": {"keyId": "urn:mwp:key:authority", "value": "sig"},
    }
    # Unvalidated (the inbox reads the frame's value, not its model): no real signature here.
    return Incoming(EventFrame.model_construct(), {"event": body})  # type: ignore[call-arg]


async def test_a_frame_taking_longer_than_the_wait_is_not_lost(tmp_path: Path) -> None:
    link = SlowLink()
    journal = open_store(str(tmp_path))
    inboxes, batches = _inboxes(link, journal, {})
    stop = asyncio.Event()
    running = asyncio.create_task(inboxes.run(stop))
    await asyncio.sleep(0.1)
    contract = {"goal": "g", "contractVersion": 1, "acceptanceCriteria": []}
    authorized = {"workItem": {"missionId": MISSION, "workItemId": ITEM, "contract": contract}}
    offers = {"offers": [{"agentId": AGENT, "offerId": "urn:uuid:o"}], "withdrawnOfferIds": []}
    link.listener(event(1, "work.authorized", authorized))
    link.listener(event(2, "work.offer.created", offers))
    link.listener(event(3, "work.offer.created", offers))
    await asyncio.sleep(3 * SLOW_SECONDS + 1.0)
    stop.set()
    await running
    signalled = [e["sequence"] for b in batches for e in b["events"]]
    assert signalled == [1, 2, 3]
    assert [e["sequence"] for e in read_journal(journal, GROUP, AGENT)] == [1, 2, 3]
    assert link.acked and link.acked[-1] == 3


def test_the_journal_reads_rounds_and_single_events_in_group_order_each_once(
    tmp_path: Path,
) -> None:
    journal = open_store(str(tmp_path))
    one = [{"groupId": GROUP, "sequence": n, "kind": "k"} for n in range(1, 8)]
    # Written one per Event (runtimes before rounds), then as rounds: one with an offer's
    # cited older Event, one written again after a crash with an Event more.
    journal.put_if_absent(journal_key(GROUP, 1), canonicalize(one[0]))
    journal.put_if_absent(journal_key(GROUP, 2, 7), canonicalize([one[6], one[1]]))
    journal.put_if_absent(journal_key(GROUP, 3, 4), canonicalize(one[2:4]))
    journal.put_if_absent(journal_key(GROUP, 3, 5), canonicalize(one[2:5]))
    journal.put_if_absent(journal_key(GROUP, 6), canonicalize(one[5]))
    assert read_journal(journal, GROUP) == one
    assert read_journal(journal, "urn:example:group:other") == []


def test_agents_sharing_a_store_each_read_their_own_journal_and_old_runtimes_theirs(
    tmp_path: Path,
) -> None:
    journal = open_store(str(tmp_path))
    tester, developer = "urn:example:agent:tester", "urn:example:agent:developer"
    seen = [{"groupId": GROUP, "sequence": n, "kind": "k"} for n in range(1, 6)]
    # The developer was a member from the start; the tester joined at 4. Were the tester to
    # read the developer's journal, it would take 1 to 3 as its own and skip what comes next.
    journal.put_if_absent(journal_key(GROUP, 1, 5, agent_id=developer), canonicalize(seen))
    assert read_journal(journal, GROUP, tester) == []
    journal.put_if_absent(journal_key(GROUP, 4, 5, agent_id=tester), canonicalize(seen[3:]))
    assert read_journal(journal, GROUP, tester) == seen[3:]
    assert read_journal(journal, GROUP, developer) == seen
    # A runtime from before per-agent journals left its Events under the Group alone.
    other = "urn:example:group:older"
    legacy = [{"groupId": other, "sequence": n, "kind": "k"} for n in (1, 2)]
    journal.put_if_absent(journal_key(other, 1, 2), canonicalize(legacy))
    assert read_journal(journal, other, tester) == legacy


async def test_a_cancellation_landing_as_a_frame_arrives_ends_the_inbox(tmp_path: Path) -> None:
    # asyncio.wait_for on 3.11 hands back the frame and drops such a cancellation: the inbox
    # then ran on, its runtime waiting for it to end.
    link = SlowLink()
    inboxes, _ = _inboxes(link, open_store(str(tmp_path)), {})
    running = asyncio.create_task(inboxes.run(asyncio.Event()))
    await asyncio.sleep(0.1)  # waiting for its next frame
    contract = {"goal": "g", "contractVersion": 1, "acceptanceCriteria": []}
    authorized = {"workItem": {"missionId": MISSION, "workItemId": ITEM, "contract": contract}}
    link.listener(event(1, "work.authorized", authorized))
    running.cancel()  # before the inbox resumes with the frame
    done, _ = await asyncio.wait({running}, timeout=2.0)
    if not done:
        running.cancel()
    assert done and running.cancelled()


async def test_a_restarted_runtime_knows_the_work_items_of_a_quiet_group_at_once(
    tmp_path: Path,
) -> None:
    # The Scheduler holds the Group through sequence 2 and the gateway resumes after it; no
    # frame of the Group comes (nothing new there), yet a run of its WorkItem reads its view.
    journal = open_store(str(tmp_path))
    contract = {"goal": "g", "contractVersion": 1, "acceptanceCriteria": []}
    authorized = {"workItem": {"missionId": MISSION, "workItemId": ITEM, "contract": contract}}
    offers = {"offers": [{"agentId": AGENT, "offerId": "urn:uuid:o"}], "withdrawnOfferIds": []}
    seen = [event(1, "work.authorized", authorized), event(2, "work.offer.created", offers)]
    journal.put_if_absent(
        journal_key(GROUP, 1, 2, agent_id=AGENT), canonicalize([e.value["event"] for e in seen])
    )
    link = SlowLink()
    held = {GROUP: {"groupId": GROUP, "sequence": 2, "eventHash": "sha256:00"}}
    inboxes, batches = _inboxes(link, journal, held)
    stop = asyncio.Event()
    running = asyncio.create_task(inboxes.run(stop))
    await asyncio.sleep(0.3)
    try:
        assert link.group(GROUP).work_item(ITEM)["contract"]["goal"] == "g"
        assert link.group(GROUP).mission_id == MISSION
    finally:
        stop.set()
        await running
    assert batches == []  # the Scheduler already holds all of it: nothing signalled again
