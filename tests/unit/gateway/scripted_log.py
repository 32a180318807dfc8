"""A Group log whose reads a test scripts, for the gateway's readers (its subscription)."""

from __future__ import annotations

import asyncio

import pytest

from mwp.core.trust.registry import RegistryEvidence
from mwp.gateway import subscriptions
from mwp.log.delivery import DeliveredEvent
from tests.event_log_samples import EVIDENCE, GROUP, event


class ScriptedLog:
    """A Group log the test appends to, read as the reader's subscription; a pass that found
    the log's end can be held there (``hold``) before it ends."""

    def __init__(self, count: int = 0) -> None:
        self.entries: list[DeliveredEvent] = []
        self.read = 0
        self.hold: asyncio.Event | None = None
        self.at_end = asyncio.Event()
        for _ in range(count):
            self.append()

    def append(self) -> None:
        sequence = len(self.entries) + 1
        value = event(sequence)
        self.entries.append(
            DeliveredEvent(value, GROUP, sequence, value["eventId"], f"sha256:{sequence:064x}")
        )

    def __aiter__(self) -> ScriptedLog:
        return self

    async def __anext__(self) -> DeliveredEvent:
        await asyncio.sleep(0)  # a store read
        if self.read < len(self.entries):
            self.read += 1
            return self.entries[self.read - 1]
        self.at_end.set()  # the end as the store showed it: an append now is the next pass's
        if self.hold is not None:
            await self.hold.wait()
        raise StopAsyncIteration


def scripted_reads(monkeypatch: pytest.MonkeyPatch, count: int = 1) -> ScriptedLog:
    """Every reader made from now on reads ``count`` Events, then what the test appends."""
    log = ScriptedLog(count)
    monkeypatch.setattr(subscriptions, "subscribe", lambda *args, **kwargs: log)
    return log


async def evidence() -> RegistryEvidence:
    return EVIDENCE
