"""A connection that ends lets go of everything its SUBSCRIBEs hold before it is gone: its
decisions still under way are cancelled and awaited, and a cancelled one releases the Group
reader it took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mwp.gateway.server import Connection
from mwp.gateway.subscriptions import Readers
from mwp.stores.objects import FolderObjectStore
from tests.event_log_samples import AUTHORITY, GROUP
from tests.unit.gateway.scripted_log import ScriptedLog, evidence, scripted_reads

AGENT = "urn:mwp:agent:developer"


class Socket:
    """A WebSocket whose peer closes it when the test says so."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[str]:
        await self.closing.wait()
        return
        yield  # an async generator that yields nothing


class CursorWrites:
    """Stored Cursors that a test holds up: the moment after a SUBSCRIBE took its reader."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()

    async def stored(self, agent_id: str, group_ids: list[str] | None = None) -> None:
        if group_ids is not None:
            self.reached.set()
            await asyncio.Event().wait()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedLog:
    return scripted_reads(monkeypatch)


def connection_of(tmp_path: Path) -> tuple[Connection, Socket, Readers, CursorWrites]:
    readers = Readers(FolderObjectStore(tmp_path), evidence, AUTHORITY, safety_net_seconds=30)
    writes = CursorWrites()
    gateway: Any = SimpleNamespace(
        readers=readers,
        cursor_writes=writes,
        sessions={},
        count_connections=lambda: None,
        options=SimpleNamespace(refusal_seconds=0.0),
    )
    socket = Socket()
    return Connection(gateway, socket), socket, readers, writes  # type: ignore[arg-type]


def subscribing(connection: Connection) -> asyncio.Task[None]:
    """A SUBSCRIBE of the Group decided beside the frame loop, as ``dispatch`` starts one."""
    frame: Any = SimpleNamespace(frame_id="urn:uuid:frame")
    wanted: Any = SimpleNamespace(group_id=GROUP, after_sequence=0, attention=None)
    session: Any = SimpleNamespace(agent_id=AGENT)
    task = asyncio.create_task(connection.subscribe_group(frame, wanted, session))
    connection.subscribing.add(task)
    task.add_done_callback(connection.subscribing.discard)
    return task


async def test_a_subscribe_reading_its_group_is_ended_with_the_connection(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    scripted.hold = asyncio.Event()  # the Group's first read is under way
    connection, socket, readers, _ = connection_of(tmp_path)
    running = asyncio.create_task(connection.run())
    task = subscribing(connection)
    await asyncio.wait_for(scripted.at_end.wait(), 2)
    assert GROUP in readers
    socket.closing.set()
    await asyncio.wait_for(running, 2)
    assert task.done() and GROUP not in readers  # released before the connection is gone


async def test_a_subscribe_holding_its_reader_lets_it_go_when_cancelled(
    scripted: ScriptedLog, tmp_path: Path
) -> None:
    connection, socket, readers, writes = connection_of(tmp_path)
    running = asyncio.create_task(connection.run())
    subscribing(connection)
    await asyncio.wait_for(
        writes.reached.wait(), 2
    )  # the reader is taken; the Agent's Cursor is being looked up
    socket.closing.set()
    await asyncio.wait_for(running, 2)
    assert GROUP not in readers
