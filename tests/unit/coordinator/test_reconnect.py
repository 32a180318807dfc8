"""A Coordinator runtime that lost its gateway tries again soon (a restarted gateway serves
again within about a second), then less often while it stays away; every link that came up
starts that schedule again. Before, it waited a fixed 2 s, and the Mission's reviews waited
with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from mwp.agent.gateway_link import GatewayUnavailableError
from mwp.agent.reconnect import FIRST_SECONDS, Reconnect
from mwp.coordinator import runtime
from tests.unit.coordinator.test_runtime_steps import coordinator, in_process


class ClosedLink:
    """A link that came up and was lost at once (its gateway went away)."""

    session_epoch = 1
    fatal = None
    listener: Any = None

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.closed.set()

    async def subscribe(self, positions: Any) -> None:
        return None


async def test_a_lost_gateway_is_tried_again_soon_then_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Up, lost; down; down; up, lost; then the test stops the runtime.
    script = ["up", "down", "down", "up"]
    stop = asyncio.Event()

    @contextlib.asynccontextmanager
    async def scripted_open(settings: Any, agent: Any) -> AsyncIterator[ClosedLink]:
        if not script:
            stop.set()
            raise GatewayUnavailableError("the test is over")
        if script.pop(0) == "down":
            raise GatewayUnavailableError("nothing listens")
        yield ClosedLink()

    monkeypatch.setattr(runtime.GatewayLink, "open", scripted_open)
    lines: list[str] = []
    c = coordinator()
    await asyncio.wait_for(
        runtime.run_coordinator(
            c,
            cast(Any, None),
            tmp_path,
            stop,
            report=lines.append,
            decisions=in_process(c),
        ),
        30,
    )
    waits = [line.rsplit(" in ", 1)[1] for line in lines if "gateway again" in line]
    schedule = Reconnect()
    growing = [f"{schedule.next_wait():g} s" for _ in range(3)]
    assert waits == [*growing, f"{FIRST_SECONDS:g} s"]  # the schedule again after "up"
    assert waits[0] == "0.1 s"
