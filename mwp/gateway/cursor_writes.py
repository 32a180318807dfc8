"""Agents' acknowledged Cursors, stored beside the frame loop rather than inside it.

An ``ACK`` is checked where it arrives (a Group this connection delivers, no position past what
it delivered) and the Group's position moves at once; storing the Cursor durably (a conditional
put into the authority's store, then housekeeping) happens in a writer task per Agent and
Group. The frame loop thus never waits on the store, so a ``COMMAND`` right behind an ``ACK`` is
forwarded without an fsync in front of it, and a burst of ACKs of one Group costs one write of
the newest, not one each.

What a stored Cursor promises is unchanged: a connection's ``PING`` is answered, and a new
feed of the Group is opened, only once the Cursors ACKed before it are stored, and a closing
connection stores what it was given. Losing a write (the store unavailable) costs redelivery
of Events the Agent already has, which delivery allows (at least once, deduplicated by Event
ID), never an Event.
"""

from __future__ import annotations

import asyncio
import logging

from mwp.core.log.cursor import Cursor
from mwp.log.delivery import CursorStore

log = logging.getLogger(__name__)

CLAUSES: tuple[str, ...] = ("MWP-WRK-030",)


class CursorWrites:
    """Stores the newest acknowledged Cursor of each (Agent, Group), one write at a time."""

    def __init__(self, cursors: CursorStore) -> None:
        self.cursors = cursors
        self._newest: dict[tuple[str, str], Cursor] = {}
        self._writers: dict[tuple[str, str], asyncio.Task[None]] = {}

    def acknowledge(self, agent_id: str, cursor: Cursor) -> None:
        """Store ``cursor`` as ``agent_id``'s Cursor of its Group soon; never moves it back."""
        key = (agent_id, cursor.group_id)
        waiting = self._newest.get(key)
        if waiting is None or cursor.sequence > waiting.sequence:
            self._newest[key] = cursor
        if key not in self._writers:
            self._writers[key] = asyncio.create_task(self._write(key))

    async def _write(self, key: tuple[str, str]) -> None:
        try:
            while (cursor := self._newest.pop(key, None)) is not None:
                try:
                    await asyncio.to_thread(self.cursors.save, key[0], cursor)
                except Exception:
                    log.exception("storing the Cursor of %s in %s failed", *key)
        finally:
            del self._writers[key]

    async def stored(self, agent_id: str, group_ids: list[str] | None = None) -> None:
        """Until what ``agent_id`` acknowledged (of ``group_ids``, or of every Group) is stored."""
        while True:
            writers = [
                task
                for (agent, group_id), task in self._writers.items()
                if agent == agent_id and (group_ids is None or group_id in group_ids)
            ]
            if not writers:
                return
            await asyncio.wait([asyncio.shield(task) for task in writers])

    async def all_stored(self) -> None:
        """Until every acknowledged Cursor is stored (the gateway stopping)."""
        while self._writers:
            await asyncio.wait([asyncio.shield(task) for task in list(self._writers.values())])
