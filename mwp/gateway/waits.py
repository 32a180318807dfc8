"""Waiting for an event at most a while, without losing a cancellation.

On Python 3.11, ``asyncio.wait_for(event.wait(), seconds)`` returns normally when its task is
cancelled after the event was set but before the task resumed: the inner wait is done, so
``wait_for`` hands back its result and the ``CancelledError`` is gone (3.12 rebuilt
``wait_for`` on ``asyncio.timeout``). A loop around such a wait then never ends, and whoever
cancelled it and awaits its end waits for ever: a request whose release stopped its Group's
reader as a hint arrived was never answered (``GroupReader.stop``).

``asyncio.timeout`` counts the task's cancellations (``Task.uncancel``) and re-raises any it
did not cause itself, so :func:`wait_at_most` is built on it.
"""

from __future__ import annotations

import asyncio


async def wait_at_most(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``; a cancellation always propagates."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
