"""The Coordinator runtime decides each Group in a task of its own: a Group whose decision
waits (a function's activity, a Command's round trip) does not hold up another Mission's next
step; a Group that changed while being decided is decided again once that decision is done;
and what a decision raised still ends the runtime, as it did when Groups were decided in turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.runtime import CoordinatorRuntime, GroupProjection
from tests.unit.coordinator.test_runtime_steps import coordinator, in_process

SLOW, QUICK = "urn:example:group:slow", "urn:example:group:quick"


class QuietLink:
    """What the runtime's loop uses of a gateway link; no Group sends anything here."""

    def __init__(self) -> None:
        self.listener: Any = None
        self.closed = asyncio.Event()

    async def subscribe(self, groups: list[dict[str, Any]]) -> str:
        return "urn:uuid:subscription"


class Runtime(CoordinatorRuntime):
    """Deciding the slow Group waits for ``release``; every decision is recorded."""

    def __init__(self, tmp_path: Path) -> None:
        c = coordinator()
        super().__init__(c, cast(Any, QuietLink()), PlanJournal(tmp_path), decisions=in_process(c))
        self.release = asyncio.Event()
        self.decided: list[str] = []
        self.fail: str | None = None
        for group_id in (SLOW, QUICK):
            self.groups[group_id] = GroupProjection(group_id)

    async def _reconcile(self, group: GroupProjection) -> None:
        self.decided.append(group.group_id)
        if group.group_id == self.fail:
            raise RuntimeError(f"deciding {group.group_id} failed")
        if group.group_id == SLOW:
            await self.release.wait()
            self.release.clear()


async def _until(condition: Any) -> None:
    async with asyncio.timeout(2.0):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_group_being_decided_holds_up_no_other(tmp_path: Path) -> None:
    rt = Runtime(tmp_path)
    stop = asyncio.Event()
    running = asyncio.create_task(rt.run(stop))
    await _until(lambda: rt.decided.count(QUICK) == 1)
    rt.changed.set()  # news while the slow Group is still being decided
    await _until(lambda: rt.decided.count(QUICK) == 2)
    assert rt.decided.count(SLOW) == 1  # not decided twice at once
    rt.release.set()
    await _until(lambda: rt.decided.count(SLOW) == 2)  # the news it missed, decided after
    rt.release.set()
    stop.set()
    await asyncio.wait_for(running, 2.0)


async def test_what_a_decision_raised_ends_the_runtime(tmp_path: Path) -> None:
    rt = Runtime(tmp_path)
    rt.fail = QUICK
    running = asyncio.create_task(rt.run(asyncio.Event()))
    rt.release.set()
    with pytest.raises(RuntimeError, match="quick failed"):
        await asyncio.wait_for(running, 2.0)
