"""The whole history of a compacted Group, read from its archive and its online log (the
authority zone's readers), on a folder and on S3."""

from __future__ import annotations

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.event_log import LogEntry
from mwp.core.log.group_snapshot import archive_entry_key
from mwp.log.compaction import compact
from mwp.log.delivery import subscribe
from mwp.log.group_log import GroupEventLog
from mwp.log.whole_history import WholeGroupHistory
from mwp.stores.objects import ObjectStore
from mwp.stores.removal import delete_object
from tests.integration.stores.group_history import (
    AUTHORITY,
    EVIDENCE,
    GROUP,
    KEY,
    KEY_ID,
    open_mission,
    stored_log,
)

THROUGH = 10


@pytest.fixture
def compacted(object_store: ObjectStore) -> tuple[list[bytes], WholeGroupHistory]:
    """The bytes of every entry before the compaction, and the compacted Group's history."""
    log = stored_log(object_store, open_mission())
    before = [e.data for e in log.read()]
    compact(log, THROUGH, KEY_ID, KEY, evidence=EVIDENCE, authority=AUTHORITY)
    return before, WholeGroupHistory(object_store, GROUP)


def test_the_whole_history_reads_the_archive_then_the_online_log(
    compacted: tuple[list[bytes], WholeGroupHistory],
) -> None:
    before, history = compacted
    with pytest.raises(MwpError) as online_only:
        GroupEventLog(history.store, GROUP).read()
    assert online_only.value.code is ErrorCode.CURSOR_TOO_OLD
    read: list[LogEntry] = []
    while batch := history.read(len(read), limit=4):  # as a subscription reads on
        read += batch
    assert [e.sequence for e in read] == list(range(1, len(before) + 1))
    assert [e.data for e in read] == before
    archived, online = history.get(1), history.get(THROUGH + 1)
    assert archived is not None and archived.data == before[0]
    assert online is not None and online.data == before[THROUGH]
    assert history.get(len(before) + 1) is None


async def test_a_subscription_verifies_the_whole_chain_across_the_compaction(
    compacted: tuple[list[bytes], WholeGroupHistory],
) -> None:
    before, history = compacted
    events = subscribe(
        history.store, GROUP, EVIDENCE, authority=AUTHORITY, follow=False, log=history
    )
    assert [d.sequence async for d in events] == list(range(1, len(before) + 1))


def test_a_hole_in_the_archive_is_still_cursor_too_old(
    compacted: tuple[list[bytes], WholeGroupHistory],
) -> None:
    _, history = compacted
    delete_object(history.store, archive_entry_key(GROUP, 3))
    assert [e.sequence for e in history.read()] == [1, 2]  # never over the hole
    with pytest.raises(MwpError) as lost:
        history.read(2)
    assert lost.value.code is ErrorCode.CURSOR_TOO_OLD
    assert history.get(3) is None
