"""Discovery's bookkeeping: one finding task and one held reader per Group, whichever of a
hint and a listing finds it first, and the Groups held for a standing subscriber that comes
while the last one leaves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mwp.gateway import subscriptions
from mwp.gateway.discovery import Discovery, Standing
from mwp.gateway.subscriptions import GroupReader, Readers
from mwp.stores.objects import FolderObjectStore
from tests.event_log_samples import AUTHORITY
from tests.unit.gateway.scripted_log import ScriptedLog, evidence

G1 = "urn:mwp:group:one"
G2 = "urn:mwp:group:two"


class Logs:
    """A scripted log for each reader made, counted by Group."""

    def __init__(self) -> None:
        self.made: dict[str, int] = {}

    def __call__(self, store: Any, group_id: str, *args: Any, **kwargs: Any) -> ScriptedLog:
        self.made[group_id] = self.made.get(group_id, 0) + 1
        return ScriptedLog(1)


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Logs:
    made = Logs()
    monkeypatch.setattr(subscriptions, "subscribe", made)
    return made


class Listing:
    """The running Missions' Groups, each listed when the test lets it through."""

    def __init__(self, *group_ids: str) -> None:
        self.group_ids = group_ids
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self) -> AsyncIterator[str]:
        for group_id in self.group_ids:
            await self.gate.wait()
            yield group_id


def standing(agent_id: str = "urn:mwp:agent:stranger") -> Standing:
    async def attach(reader: GroupReader) -> None:
        raise AssertionError("a stranger is never attached")

    return Standing(agent_id, lambda group_id: False, attach)


async def settled(discovery: Discovery, held: set[str]) -> None:
    async with asyncio.timeout(2):
        while discovery.held != held or discovery._finding:
            await asyncio.sleep(0.01)


def users(readers: Readers, group_id: str) -> int:
    return readers._users.get(group_id, 0)


async def test_a_hint_and_a_listing_of_one_group_make_one_find(logs: Logs, tmp_path: Path) -> None:
    readers = Readers(FolderObjectStore(tmp_path), evidence, AUTHORITY, safety_net_seconds=30)
    listing = Listing(G1)
    listing.gate.clear()
    discovery = Discovery(readers, listing, safety_net_seconds=30)
    discovery.add(standing())
    await asyncio.sleep(0.01)  # the listing waits on its Group
    discovery.hint(G1, 1)  # the hot path finds it first
    listing.gate.set()  # then the listing names it
    discovery.hint(G1, 1)  # and hints keep coming
    await settled(discovery, {G1})
    assert logs.made == {G1: 1} and users(readers, G1) == 1
    await discovery.close()
    assert users(readers, G1) == 0 and G1 not in readers


async def test_a_subscriber_standing_while_the_last_one_leaves_keeps_its_groups(
    logs: Logs, tmp_path: Path
) -> None:
    readers = Readers(FolderObjectStore(tmp_path), evidence, AUTHORITY, safety_net_seconds=30)
    discovery = Discovery(readers, Listing(G1, G2), safety_net_seconds=30)
    first = standing()
    discovery.add(first)
    await settled(discovery, {G1, G2})
    # The Agent reconnects: its old connection's standing subscription leaves, the new one
    # stands while discovery lets go of what it held.
    leaving = asyncio.create_task(discovery.remove(first))
    async with asyncio.timeout(2):
        while len(discovery.held) == 2 and not leaving.done():
            await asyncio.sleep(0)
    discovery.add(standing())
    await leaving
    await settled(discovery, {G1, G2})  # found again now, not at the next safety net
    assert all(users(readers, g) == 1 for g in (G1, G2))
    await discovery.close()
    assert G1 not in readers and G2 not in readers
