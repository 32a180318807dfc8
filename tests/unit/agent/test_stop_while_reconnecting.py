"""A runtime told to stop while it reconnects stops at once: its reconciliation, waiting on a
gateway that does not answer, is given up (``mwp.workers.agent._unless_stopped``)."""

from __future__ import annotations

import asyncio

import pytest

from mwp.workers.agent import _unless_stopped


async def test_stop_gives_up_work_that_never_ends() -> None:
    stop = asyncio.Event()
    cancelled = asyncio.Event()

    async def waits_forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    asyncio.get_running_loop().call_later(0.05, stop.set)
    assert await asyncio.wait_for(_unless_stopped(waits_forever(), stop), 5) is False
    assert cancelled.is_set()


async def test_work_that_ends_first_is_done_and_its_error_raised() -> None:
    stop = asyncio.Event()

    async def fine() -> int:
        return 1

    async def fails() -> None:
        raise RuntimeError("refused")

    assert await _unless_stopped(fine(), stop) is True
    with pytest.raises(RuntimeError, match="refused"):
        await _unless_stopped(fails(), stop)
