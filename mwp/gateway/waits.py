"""Waiting for an event at most a while, or for a cancelled task, without losing a
cancellation.

On Python 3.11, ``asyncio.wait_for(event.wait(), seconds)`` returns normally when its task is
cancelled after the event was set but before the task resumed: the inner wait is done, so
``wait_for`` hands back its result and the ``CancelledError`` is gone (3.12 rebuilt
``wait_for`` on ``asyncio.timeout``). A loop around such a wait then never ends, and whoever
cancelled it and awaits its end waits for ever: a request whose release stopped its Group's
reader as a hint arrived was never answered (``GroupReader.stop``).

``asyncio.timeout`` counts the task's cancellations (``Task.uncancel``) and re-raises any it
did not cause itself, so :func:`wait_at_most` is built on it.

Awaiting a task one has cancelled under ``suppress(CancelledError)`` swallows the waiter's
own cancellation too, when it comes meanwhile: :func:`cancelled` lets that one through.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def wait_at_most(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``; a cancellation always propagates."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def cancelled(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for its end; the waiter's own cancellation propagates."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
