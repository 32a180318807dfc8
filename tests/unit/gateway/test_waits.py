"""Waits that never lose a cancellation (mwp.gateway.waits), beside the hazard they avoid."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import pytest

from mwp.gateway.waits import cancelled, wait_at_most


async def loop_until_cancelled(wait: Callable[[asyncio.Event], Awaitable[object]]) -> bool:
    """Wait for the event again and again, as a reader waits for hints; set the event and
    cancel the task at once: whether the task ended (False: the cancellation was lost)."""
    event = asyncio.Event()
    waiting = asyncio.create_task(_rounds(event, wait))
    await asyncio.sleep(0.01)
    event.set()  # set, and the waiting task cancelled before it resumes
    waiting.cancel()
    done, _ = await asyncio.wait({waiting}, timeout=0.5)
    if not done:
        waiting.cancel()  # a second cancellation lands: the first was lost
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        return False
    return waiting.cancelled()


async def _rounds(event: asyncio.Event, wait: Callable[[asyncio.Event], Awaitable[object]]) -> None:
    while True:
        await wait(event)
        event.clear()


async def _wait_for(event: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), 30)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for keeps it from Python 3.12")
async def test_wait_for_on_this_python_can_lose_a_cancellation() -> None:
    assert not await loop_until_cancelled(_wait_for)  # the hazard itself


async def test_wait_at_most_never_loses_one() -> None:
    assert await loop_until_cancelled(lambda event: wait_at_most(event, 30))


async def test_wait_at_most_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert not await wait_at_most(event, 0.01)
    event.set()
    assert await wait_at_most(event, 0.01)


async def test_cancelled_waits_for_the_end_and_lets_its_own_cancellation_through() -> None:
    ended = asyncio.Event()

    async def slow_to_end() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.05)
            ended.set()

    task = asyncio.create_task(slow_to_end())
    await asyncio.sleep(0)
    await cancelled(task)
    assert ended.is_set()

    other = asyncio.create_task(slow_to_end())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cancelled(other))
    await asyncio.sleep(0.01)
    waiter.cancel()  # the waiter itself is cancelled while it waits
    with pytest.raises(asyncio.CancelledError):
        await waiter
