"""Scenes run beside the demo's main line, so that independent waits overlap.

`Beside.start` runs a scene as a task; it records its checks in a part of the report
(`Report.part`), which joins the report where the main line awaits the scene (`Aside.done`):
the report lists its checks in the order of the code, whichever scene finished first. A scene
that fails stops the demo at once, as the main line failing does (an `asyncio.TaskGroup`
cancels the rest), and the error raised is the failure itself, not a group of one, so the
report names the step that stopped. Parts left unjoined by a failure join at the end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, TypeVar

from mwp.demo.report import Report
from mwp.demo.setup import ProofOfConcept

T = TypeVar("T")
Scene = Callable[[ProofOfConcept], Coroutine[Any, Any, T]]


class Aside(Generic[T]):
    """A scene running beside the main line."""

    def __init__(self, task: asyncio.Task[T], part: Report, report: Report) -> None:
        self.task = task
        self.part = part
        self.report = report

    async def done(self) -> T:
        """Wait for the scene; its checks join the report here."""
        try:
            return await self.task
        finally:
            self.report.join(self.part)


class Beside:
    """``async with Beside(poc) as beside``: the scenes started in it end in it."""

    def __init__(self, poc: ProofOfConcept) -> None:
        self.poc = poc
        self.tasks = asyncio.TaskGroup()
        self.asides: list[Aside[Any]] = []

    def start(self, scene: Scene[T]) -> Aside[T]:
        part = self.poc.report.part()
        task = self.tasks.create_task(scene(self.poc.reporting_to(part)))
        aside = Aside(task, part, self.poc.report)
        self.asides.append(aside)
        return aside

    async def __aenter__(self) -> Beside:
        await self.tasks.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            await self.tasks.__aexit__(kind, error, traceback)
        except BaseExceptionGroup as group:
            raise _first(group) from group
        finally:
            for aside in self.asides:
                self.poc.report.join(aside.part)


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    found = group.exceptions[0]
    return _first(found) if isinstance(found, BaseExceptionGroup) else found
