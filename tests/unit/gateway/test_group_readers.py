"""The gateway's Group readers under controlled interleavings: a request waiting for a
reader's complete read sees the log as it was when it asked, and never waits without end
(a stopped reader, a first read or Registry evidence that does not come)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import RegistryEvidence
from mwp.gateway.artifacts import ArtifactGate
from mwp.gateway.subscriptions import GroupReader, Readers
from mwp.stores.objects import FolderObjectStore
from tests.event_log_samples import AUTHORITY, EVIDENCE, GROUP
from tests.unit.gateway.scripted_log import ScriptedLog, evidence, scripted_reads

T = TypeVar("T")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedLog:
    return scripted_reads(monkeypatch)


def readers_of(tmp_path: Path, **bounds: float) -> Readers:
    return Readers(
        FolderObjectStore(tmp_path), evidence, AUTHORITY, safety_net_seconds=30, **bounds
    )


async def within(seconds: float, wait: Awaitable[T]) -> T:
    """``wait``'s outcome, failing the test if it has none within ``seconds`` (``wait_for``
    would cancel it, and a cancelled wait may still end normally, hiding the hang)."""
    task = asyncio.ensure_future(wait)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        pytest.fail(f"no outcome within {seconds} s")
    return task.result()


def unavailable(error: MwpError, reason: str) -> bool:
    return (
        error.code is ErrorCode.INTERNAL_ERROR
        and error.retryable
        and error.group_id == GROUP
        and error.diagnostic == Diagnostic("gateway", reason)
    )


async def test_a_refresh_waits_for_a_read_begun_after_it(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    reader = GroupReader(
        FolderObjectStore(tmp_path), GROUP, EVIDENCE, AUTHORITY, safety_net_seconds=30
    )
    reader.start()
    try:
        await reader.refresh()
        assert reader.head == 1
        # A pass is under way and has found the log's end; then Event 2 is appended and a
        # request asks for the log as it is now.
        scripted.hold, scripted.at_end = asyncio.Event(), asyncio.Event()
        reader.notify()
        await scripted.at_end.wait()
        scripted.append()

        async def refreshed() -> int:
            await reader.refresh()
            return reader.head  # what the request sees

        refreshing = asyncio.create_task(refreshed())
        await asyncio.sleep(0)
        scripted.hold.set()
        assert await within(2, refreshing) == 2  # not the read that looked before the append
    finally:
        await within(2, reader.stop())


async def test_the_last_request_of_a_reader_hinted_as_it_ends_is_answered(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    """The lost upload: on a fresh gateway a request is the only user of its Group's reader,
    and lets it go (which stops it) just as the mirror's hint for the Group arrives. The
    reader's task was cancelled while its completed hint wait had not resumed it yet, and
    ``asyncio.wait_for`` (Python 3.11) dropped that cancellation: the reader read on, and the
    request waited for it to end, unanswered."""
    readers = readers_of(tmp_path)
    reader = await within(2, readers.acquire(GROUP))
    assert reader.head == 1
    await asyncio.sleep(0.05)  # the reader waits for a hint
    readers.notify(GROUP, 2)  # the log grew
    await within(2, readers.release(GROUP))
    assert GROUP not in readers


async def test_a_request_whose_read_was_hinted_meanwhile_is_answered(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    """As an upload uses a reader: acquire, decide, release at once; the mirror's hint comes
    while the reader reads for it, so the reader's next hint wait ends at once, just as the
    release stops it."""
    readers = readers_of(tmp_path)

    async def upload() -> int:
        reader = await readers.acquire(GROUP)
        try:
            return reader.head
        finally:
            await readers.release(GROUP)

    scripted.hold = asyncio.Event()
    uploading = asyncio.create_task(upload())
    await within(2, scripted.at_end.wait())
    readers.notify(GROUP, 2)  # the log grew while the reader read
    scripted.hold.set()
    assert await within(2, uploading) == 1
    assert GROUP not in readers


async def test_an_upload_whose_read_was_hinted_meanwhile_is_answered(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    """The same through the upload route's decision (here a stranger's: refused, answered)."""
    readers = readers_of(tmp_path)
    gate = ArtifactGate(readers, FolderObjectStore(tmp_path), refusal_seconds=0)
    scripted.hold = asyncio.Event()
    uploading = asyncio.create_task(gate.upload("urn:mwp:agent:developer", GROUP, b"state"))
    await within(2, scripted.at_end.wait())
    readers.notify(GROUP, 2)
    scripted.hold.set()
    with pytest.raises(MwpError) as refused:
        await within(2, uploading)
    assert refused.value.code is ErrorCode.GROUP_NOT_FOUND
    assert GROUP not in readers


async def test_stopping_a_reader_keeps_the_stoppers_own_cancellation(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    """Discovery's safety net, cancelled while it lets a reader go, must end (not read on)."""
    reader = GroupReader(
        FolderObjectStore(tmp_path), GROUP, EVIDENCE, AUTHORITY, safety_net_seconds=30
    )
    reader.start()
    await within(2, reader.refresh())
    stopping = asyncio.create_task(reader.stop())
    await asyncio.sleep(0)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(2, stopping)
    assert reader.stopped


async def test_two_requests_on_a_cold_gateway_share_one_reader_and_read(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    readers = readers_of(tmp_path)
    first, second = await within(2, asyncio.gather(readers.acquire(GROUP), readers.acquire(GROUP)))
    assert first is second and first.head == 1 and first.fault is None
    await readers.release(GROUP)
    assert GROUP in readers
    await readers.release(GROUP)
    assert GROUP not in readers


async def test_a_request_waiting_on_a_reader_that_stops_is_answered(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    scripted.hold = asyncio.Event()  # the first read never ends
    readers = readers_of(tmp_path)
    acquiring = asyncio.create_task(readers.acquire(GROUP))
    await scripted.at_end.wait()
    await readers.close()  # the gateway stops
    with pytest.raises(MwpError) as refused:
        await within(2, acquiring)
    assert unavailable(refused.value, "reader-stopped")


async def test_a_first_read_that_does_not_end_is_refused_in_time(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    scripted.hold = asyncio.Event()
    readers = readers_of(tmp_path, read_seconds=0.2)
    with pytest.raises(MwpError) as refused:
        await within(2, readers.acquire(GROUP))
    assert unavailable(refused.value, "group-read-timeout")
    assert GROUP not in readers  # let go: the next request reads again


async def test_registry_evidence_that_does_not_come_is_refused_in_time(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    async def never() -> RegistryEvidence:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    readers = Readers(
        FolderObjectStore(tmp_path), never, AUTHORITY, safety_net_seconds=30, evidence_seconds=0.2
    )
    with pytest.raises(MwpError) as refused:
        await within(2, readers.acquire(GROUP))
    assert unavailable(refused.value, "registry-evidence-timeout")
    assert GROUP not in readers


async def test_a_released_reader_lingers_and_is_used_again_without_a_new_read_of_the_log(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    asked: list[int] = []

    async def counted() -> RegistryEvidence:
        asked.append(1)
        return await evidence()

    readers = Readers(
        FolderObjectStore(tmp_path), counted, AUTHORITY, safety_net_seconds=30, linger_seconds=0.2
    )
    first = await within(2, readers.acquire(GROUP))
    await readers.release(GROUP)
    assert GROUP in readers and not first.stopped  # unused, still read for a while
    again = await within(2, readers.acquire(GROUP))  # an upload soon after: the same reader
    assert again is first and asked == [1]
    await readers.release(GROUP)
    await asyncio.sleep(0.1)
    held = await within(2, readers.acquire(GROUP))  # used again: its linger starts anew
    await asyncio.sleep(0.3)
    assert GROUP in readers and not held.stopped  # held, never dropped
    await readers.release(GROUP)
    await asyncio.sleep(0.3)
    assert GROUP not in readers and first.stopped  # dropped once its linger ran out
    assert len(asked) == 1
    await within(2, readers.acquire(GROUP))  # a new reader, with the Registry asked again
    assert len(asked) == 2
    await readers.release(GROUP)
    await readers.close()
    assert GROUP not in readers


async def test_a_faulty_reader_does_not_linger(scripted: ScriptedLog, tmp_path: Path) -> None:
    readers = readers_of(tmp_path, linger_seconds=30)
    reader = await within(2, readers.acquire(GROUP))
    reader.fault = MwpError(ErrorCode.INTERNAL_ERROR, "the log failed verification")
    await readers.release(GROUP)
    assert GROUP not in readers and reader.stopped
