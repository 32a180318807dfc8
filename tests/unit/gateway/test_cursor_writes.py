"""Acknowledged Cursors stored beside the frame loop (mwp.gateway.cursor_writes), on a real
folder store: the newest wins, nothing moves back, and ``stored`` waits for the write."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mwp.core.log.cursor import Cursor
from mwp.gateway.cursor_writes import CursorWrites
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store

GROUP = "urn:mwp:group:acme:one"
OTHER = "urn:mwp:group:acme:two"
AGENT = "urn:mwp:agent:acme:worker"


def _cursor(sequence: int, group_id: str = GROUP) -> Cursor:
    return Cursor(group_id, sequence, f"sha256:{sequence:064x}")


class CountingCursors(ObjectCursorStore):
    """The real store, counting its writes."""

    def __init__(self, root: Path) -> None:
        super().__init__(open_store(root))
        self.saved: list[tuple[str, int]] = []

    def save(self, subscriber: str, cursor: Cursor) -> Cursor:
        self.saved.append((cursor.group_id, cursor.sequence))
        return super().save(subscriber, cursor)


async def test_what_was_acknowledged_is_stored_once_stored_returns(tmp_path: Path) -> None:
    cursors = CountingCursors(tmp_path)
    writes = CursorWrites(cursors)
    writes.acknowledge(AGENT, _cursor(3))
    writes.acknowledge(AGENT, _cursor(1, OTHER))
    await writes.stored(AGENT)
    assert cursors.load(GROUP, AGENT) == _cursor(3)
    assert cursors.load(OTHER, AGENT) == _cursor(1, OTHER)


async def test_a_burst_of_acks_is_one_write_of_the_newest_after_the_one_under_way(
    tmp_path: Path,
) -> None:
    cursors = CountingCursors(tmp_path)
    writes = CursorWrites(cursors)
    for sequence in range(1, 11):  # no await between them: as frames arrive in one loop turn
        writes.acknowledge(AGENT, _cursor(sequence))
    await writes.stored(AGENT, [GROUP])
    assert cursors.saved == [(GROUP, 10)]
    assert cursors.load(GROUP, AGENT) == _cursor(10)


async def test_an_older_ack_waiting_behind_a_newer_one_never_moves_the_cursor_back(
    tmp_path: Path,
) -> None:
    cursors = CountingCursors(tmp_path)
    writes = CursorWrites(cursors)
    writes.acknowledge(AGENT, _cursor(7))
    writes.acknowledge(AGENT, _cursor(5))
    await writes.stored(AGENT)
    assert cursors.load(GROUP, AGENT) == _cursor(7)
    assert cursors.saved == [(GROUP, 7)]


async def test_stored_waits_for_writes_acknowledged_while_it_waits(tmp_path: Path) -> None:
    cursors = CountingCursors(tmp_path)
    writes = CursorWrites(cursors)
    writes.acknowledge(AGENT, _cursor(2))
    waiting = asyncio.ensure_future(writes.stored(AGENT))
    await asyncio.sleep(0)
    writes.acknowledge(AGENT, _cursor(4))
    await waiting
    assert cursors.load(GROUP, AGENT) == _cursor(4)
    await writes.all_stored()


async def test_a_failed_write_is_logged_and_the_next_ack_is_stored(tmp_path: Path) -> None:
    class Failing(CountingCursors):
        failures = 1

        def save(self, subscriber: str, cursor: Cursor) -> Cursor:
            if self.failures:
                self.failures -= 1
                raise OSError("the store is unavailable")
            return super().save(subscriber, cursor)

    cursors = Failing(tmp_path)
    writes = CursorWrites(cursors)
    writes.acknowledge(AGENT, _cursor(1))
    await writes.stored(AGENT)
    assert cursors.load(GROUP, AGENT) is None
    writes.acknowledge(AGENT, _cursor(2))
    await writes.stored(AGENT)
    assert cursors.load(GROUP, AGENT) == _cursor(2)
