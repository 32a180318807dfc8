"""Delivery of a Group's log to a subscriber (MWP-WRK-029, MWP-WRK-030), on a folder and S3.

Verified, in Group order, never over a gap, at least once and deduplicated by Event ID; a
durable Cursor that acknowledgement moves forward only, and that a reconnect resumes after.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from mwp.core.log.cursor import Cursor
from mwp.core.log.event_log import LogEntry, LogFaultReason, seal
from mwp.log.delivery import (
    CursorConflictError,
    CursorStore,
    DeliveredEvent,
    DeliveryError,
    EventIdWindow,
    FolderCursorStore,
    GroupSubscription,
    ObjectCursorStore,
    subscribe,
)
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore
from tests.event_log_samples import (
    AUTHORITY,
    AUTHORITY_KEY,
    EVIDENCE,
    GROUP,
    KEY_ID,
    OTHER_KEY,
    OTHER_KEY_ID,
    OTHER_SERVICE,
    chain,
    event,
)
from tests.integration.s3_fixture import overwrite

POLL = 0.05
SUBSCRIBER = "urn:mwp:agent:reader"


@pytest.fixture
def log(object_store: ObjectStore) -> GroupEventLog:
    return GroupEventLog(object_store, GROUP)


@pytest.fixture(params=["folder", "object"])
def cursors(
    request: pytest.FixtureRequest, object_store: ObjectStore, tmp_path: Path
) -> CursorStore:
    if request.param == "folder":
        return FolderCursorStore(tmp_path / "cursors")
    return ObjectCursorStore(object_store)


def store_entries(log: GroupEventLog, entries: list[LogEntry]) -> None:
    for entry in entries:
        log.store.put_if_absent(log.key(entry.sequence), entry.data)


def open_subscription(
    log: GroupEventLog, cursors: CursorStore | None = None, **options: object
) -> GroupSubscription:
    return subscribe(
        log.store,
        GROUP,
        EVIDENCE,
        cursor_store=cursors,
        subscriber=SUBSCRIBER if cursors is not None else None,
        poll_interval=POLL,
        **options,  # type: ignore[arg-type]
    )


async def take(subscription: GroupSubscription, count: int) -> list[DeliveredEvent]:
    """The next ``count`` Events (a test that waits longer than 20 s for them fails)."""
    delivered: list[DeliveredEvent] = []
    async with asyncio.timeout(20):
        async for item in subscription:
            delivered.append(item)
            if len(delivered) == count:
                break
    return delivered


async def drain(subscription: GroupSubscription) -> list[DeliveredEvent]:
    """Everything stored now (the subscription must not follow)."""
    return [item async for item in subscription]


async def test_events_arrive_verified_in_group_order(log: GroupEventLog) -> None:
    entries = chain(6)
    store_entries(log, entries)
    delivered = await drain(open_subscription(log, follow=False, authority=AUTHORITY))
    assert [d.sequence for d in delivered] == [1, 2, 3, 4, 5, 6]
    assert [d.event for d in delivered] == [e.event for e in entries]
    assert [d.cursor for d in delivered] == [
        Cursor(GROUP, e.sequence, e.signing_hash) for e in entries
    ]


async def test_a_gap_holds_delivery_until_the_missing_entry_appears(
    log: GroupEventLog, cursors: CursorStore
) -> None:
    entries = chain(7)
    store_entries(log, entries[:4] + entries[5:])  # sequence 5 is missing
    subscription = open_subscription(log, cursors)
    assert [d.sequence for d in await take(subscription, 4)] == [1, 2, 3, 4]
    with pytest.raises(TimeoutError):  # held: 6 and 7 are stored, but 5 is not
        await asyncio.wait_for(anext(subscription), timeout=10 * POLL)
    assert subscription.position.sequence == 4
    assert await subscription.gap() == 6
    with pytest.raises(ValueError, match="delivery is at 4"):
        await subscription.ack(Cursor(GROUP, 6, entries[5].signing_hash))
    assert await subscription.ack() == Cursor(GROUP, 4, entries[3].signing_hash)
    assert cursors.load(GROUP, SUBSCRIBER) == Cursor(GROUP, 4, entries[3].signing_hash)

    store_entries(log, [entries[4]])  # 5 arrives: delivery continues, in order
    subscription.notify()
    assert [d.sequence for d in await take(subscription, 3)] == [5, 6, 7]
    assert await subscription.gap() is None
    subscription.close()


async def test_a_gap_without_a_later_entry_is_just_the_end(log: GroupEventLog) -> None:
    store_entries(log, chain(3))
    subscription = open_subscription(log)
    await take(subscription, 3)
    assert await subscription.gap() is None
    subscription.close()
    assert await drain(subscription) == []


async def test_a_tampered_event_is_refused_and_the_cursor_stays(
    log: GroupEventLog, cursors: CursorStore
) -> None:
    entries = chain(5)
    store_entries(log, entries)
    overwrite(log.store, log.key(3), entries[2].data.replace(b"message 3", b"message 9"))
    subscription = open_subscription(log, cursors, follow=False)
    delivered: list[int] = []
    with pytest.raises(DeliveryError) as raised:
        async for item in subscription:
            delivered.append(item.sequence)
    assert delivered == [1, 2]
    assert raised.value.fault.sequence == 3
    assert raised.value.fault.reason is LogFaultReason.SIGNATURE
    assert raised.value.details == {
        "sequence": 3,
        "reason": "signature",
        "detail": "AUTH_INVALID_SIGNATURE at stage signature (equation)",
    }
    assert subscription.position == Cursor(GROUP, 2, entries[1].signing_hash)
    with pytest.raises(DeliveryError):  # it stays stopped
        await anext(subscription)
    with pytest.raises(ValueError):  # nothing past the fault can be acknowledged
        await subscription.ack(Cursor(GROUP, 3, entries[2].signing_hash))
    assert await subscription.ack() == Cursor(GROUP, 2, entries[1].signing_hash)
    assert cursors.load(GROUP, SUBSCRIBER) == Cursor(GROUP, 2, entries[1].signing_hash)


async def test_only_the_expected_authority_is_delivered_when_one_is_required(
    log: GroupEventLog,
) -> None:
    entries = chain(2)
    other = seal(
        event(3, acceptedBy=OTHER_SERVICE.to_json()),
        entries[1].signing_hash,
        OTHER_KEY_ID,
        OTHER_KEY,
    )
    store_entries(log, [*entries, other])
    # Signed correctly by a registered service: delivered unless an authority is required.
    assert [d.sequence for d in await drain(open_subscription(log, follow=False))] == [1, 2, 3]
    with pytest.raises(DeliveryError) as raised:
        await drain(open_subscription(log, follow=False, authority=AUTHORITY))
    assert (raised.value.fault.sequence, raised.value.fault.reason) == (
        3,
        LogFaultReason.WRONG_AUTHORITY,
    )


async def test_an_entry_signed_with_a_key_not_bound_to_its_authority_is_refused(
    log: GroupEventLog,
) -> None:
    entries = chain(2)
    forged = seal(event(3), entries[1].signing_hash, OTHER_KEY_ID, OTHER_KEY)
    store_entries(log, [*entries, forged])
    with pytest.raises(DeliveryError) as raised:
        await drain(open_subscription(log, follow=False))
    assert (raised.value.fault.sequence, raised.value.fault.reason) == (
        3,
        LogFaultReason.SIGNATURE,
    )


async def test_a_log_rewritten_behind_the_cursor_is_detected(
    log: GroupEventLog, cursors: CursorStore
) -> None:
    entries = chain(5)
    store_entries(log, entries[:3])
    subscription = open_subscription(log, cursors)
    await take(subscription, 3)
    await subscription.ack()
    subscription.close()
    # Another history continues at 4 from an entry 3 the subscriber never processed.
    text = {"content": [{"type": "text", "text": "another history"}]}
    other_three = seal(event(3, payload=text), entries[1].signing_hash, KEY_ID, AUTHORITY_KEY)
    forged_four = seal(event(4), other_three.signing_hash, KEY_ID, AUTHORITY_KEY)
    store_entries(log, [forged_four])
    resumed = open_subscription(log, cursors, follow=False)
    assert resumed.position.sequence == 3
    with pytest.raises(DeliveryError) as raised:
        await drain(resumed)
    assert (raised.value.fault.sequence, raised.value.fault.reason) == (
        4,
        LogFaultReason.CHAIN_BROKEN,
    )


async def test_ack_then_reconnect_resumes_exactly_after(
    log: GroupEventLog, cursors: CursorStore
) -> None:
    entries = chain(8)
    store_entries(log, entries[:6])
    first = open_subscription(log, cursors)
    delivered = await take(first, 5)
    stored = await first.ack(delivered[2].cursor)  # processed 1..3 durably
    assert stored == Cursor(GROUP, 3, entries[2].signing_hash)
    assert await first.ack(delivered[1].cursor) == stored  # a Cursor never moves back
    first.close()

    second = open_subscription(log, cursors, follow=False)  # a new process: no shared memory
    assert second.position == stored
    assert [d.sequence for d in await drain(second)] == [4, 5, 6]  # at least once: 4, 5 again
    store_entries(log, entries[6:])
    third = open_subscription(log, cursors, after=Cursor(GROUP, 6, entries[5].signing_hash))
    assert [d.sequence for d in await take(third, 2)] == [7, 8]  # any position, explicitly
    third.close()
    # Acknowledging never deletes history.
    assert [e.data for e in log.read()] == [e.data for e in entries]
    assert log.verify_all(EVIDENCE).verified == 8


async def test_duplicate_delivery_is_processed_once(
    log: GroupEventLog, cursors: CursorStore
) -> None:
    entries = chain(9)
    store_entries(log, entries[:5])
    processed: Counter[str] = Counter()
    order: list[int] = []

    async def handle(subscription: GroupSubscription, count: int) -> None:
        for item in await take(subscription, count):
            processed[item.event_id] += 1
            order.append(item.sequence)

    first = open_subscription(log, cursors)
    await handle(first, 5)
    await first.ack(Cursor(GROUP, 3, entries[2].signing_hash))  # 4 and 5 not acknowledged
    # Reconnect: the log replays 4 and 5 again; the shared Event ID window drops them.
    second = first.reconnect()
    assert second.position.sequence == 3 and second.dedupe is first.dedupe
    store_entries(log, entries[5:])
    await handle(second, 4)
    assert order == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert set(processed.values()) == {1} and len(processed) == 9
    assert second.duplicates_skipped == 2
    second.close()

    # Without that memory the same reconnect hands 4 and 5 out again (at least once).
    fresh = open_subscription(log, cursors, after=Cursor(GROUP, 3, entries[2].signing_hash))
    again = await take(fresh, 2)
    assert [d.sequence for d in again] == [4, 5]
    fresh.close()
    # And a window that already holds an ID drops that Event on any re-read.
    window = EventIdWindow()
    window.add(entries[0].event_id)
    rereads = await drain(open_subscription(log, follow=False, dedupe=window))
    assert [d.sequence for d in rereads] == list(range(2, 10))


async def test_ack_accepts_only_what_was_delivered(
    log: GroupEventLog, cursors: CursorStore
) -> None:
    entries = chain(4)
    store_entries(log, entries)
    subscription = open_subscription(log, cursors)
    await take(subscription, 2)
    with pytest.raises(ValueError, match="delivery is at 2"):
        await subscription.ack(Cursor(GROUP, 4, entries[3].signing_hash))
    with pytest.raises(ValueError, match="not the entry"):
        await subscription.ack(Cursor(GROUP, 2, entries[3].signing_hash))
    with pytest.raises(ValueError, match="not of"):
        await subscription.ack(Cursor("urn:mwp:group:other", 1, entries[0].signing_hash))
    assert cursors.load(GROUP, SUBSCRIBER) is None
    without_store = open_subscription(log)
    await take(without_store, 1)
    with pytest.raises(ValueError, match="no cursor store"):
        await without_store.ack()
    subscription.close()
    without_store.close()


def test_a_cursor_store_refuses_a_second_history(cursors: CursorStore) -> None:
    entries, other = chain(3), chain(3, "urn:mwp:group:beta")
    first = Cursor(GROUP, 2, entries[1].signing_hash)
    assert cursors.save(SUBSCRIBER, first) == first
    assert cursors.save(SUBSCRIBER, first) == first  # a retry is fine
    with pytest.raises(CursorConflictError):
        cursors.save(SUBSCRIBER, Cursor(GROUP, 2, other[1].signing_hash))
    assert cursors.save(SUBSCRIBER, Cursor(GROUP, 1, entries[0].signing_hash)) == first
    later = Cursor(GROUP, 3, entries[2].signing_hash)
    assert cursors.save(SUBSCRIBER, later) == later
    assert cursors.load(GROUP, SUBSCRIBER) == later
    assert cursors.load(GROUP, "urn:mwp:agent:someone-else") is None
    assert cursors.load("urn:mwp:group:beta", SUBSCRIBER) is None


def test_object_cursors_keep_only_the_newest_records(object_store: ObjectStore) -> None:
    cursors = ObjectCursorStore(object_store, keep=2)
    for entry in chain(5):
        cursors.save(SUBSCRIBER, Cursor(GROUP, entry.sequence, entry.signing_hash))
    keys = object_store.list_keys(cursors.prefix(GROUP, SUBSCRIBER))
    assert [k.rsplit("/", 1)[1] for k in keys] == ["000000000004.json", "000000000005.json"]
    assert GroupEventLog(object_store, GROUP).first_sequence() is None  # the log is untouched


async def test_a_cancellation_landing_as_it_is_notified_ends_a_following_subscription(
    log: GroupEventLog,
) -> None:
    # asyncio.wait_for on 3.11 drops a cancellation that lands just as the wake is set: the
    # ``async for`` then polled on, and whoever cancelled it waited for ever.
    store_entries(log, chain(2))
    subscription = subscribe(log.store, GROUP, EVIDENCE, poll_interval=30.0)

    async def follow() -> None:
        async for _ in subscription:
            pass

    following = asyncio.create_task(follow())
    async with asyncio.timeout(20):
        while subscription.position.sequence < 2:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # waiting for a wake
    subscription.notify()
    following.cancel()  # before it resumes
    done, _ = await asyncio.wait({following}, timeout=2.0)
    if not done:
        following.cancel()
    assert done and following.cancelled()
