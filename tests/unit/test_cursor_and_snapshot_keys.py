"""Cursors and snapshot references as pure data: what they accept and what they refuse."""

from __future__ import annotations

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.cursor import Cursor
from mwp.core.log.group_snapshot import (
    SnapshotError,
    SnapshotPurpose,
    SnapshotReference,
    parse_snapshot_key,
    snapshot_key,
    snapshots_prefix,
    state_key,
)

GROUP = "urn:mwp:group:alpha"
HASH = "sha256:" + "ab" * 32


def test_a_cursor_past_zero_carries_its_head_hash() -> None:
    assert Cursor.start(GROUP) == Cursor(GROUP, 0, None)
    cursor = Cursor(GROUP, 7, HASH)
    assert Cursor.from_json(cursor.to_json()) == cursor
    assert cursor.next_sequence == 8
    for bad in [(GROUP, 3, None), (GROUP, 0, HASH), (GROUP, -1, None), (GROUP, 2, "sha256:AB")]:
        with pytest.raises(ValueError):
            Cursor(*bad)
    with pytest.raises(ValueError):
        Cursor.from_json({**cursor.to_json(), "format": "other"})


def test_snapshot_keys_sort_by_sequence_and_parse_back() -> None:
    prefix = snapshots_prefix(GROUP)
    keys = [
        snapshot_key(GROUP, 12, SnapshotPurpose.COMPACTION),
        snapshot_key(GROUP, 9, SnapshotPurpose.ARCHIVAL),
    ]
    assert sorted(keys) == keys[::-1]
    assert parse_snapshot_key(prefix, keys[0]) == (12, SnapshotPurpose.COMPACTION)
    for other in [prefix + "000000000012.json", prefix + "12.compaction.json", "x/" + keys[0]]:
        assert parse_snapshot_key(prefix, other) is None
    assert state_key(GROUP, HASH).endswith("/snapshot-states/" + "ab" * 32 + ".json")
    with pytest.raises(ValueError):
        state_key(GROUP, "sha256:xyz")


def test_a_reference_must_name_its_own_snapshot_key() -> None:
    reference = SnapshotReference(
        GROUP,
        snapshot_key(GROUP, 4, SnapshotPurpose.COMPACTION),
        4,
        SnapshotPurpose.COMPACTION,
        HASH,
    )
    assert SnapshotReference.from_json(GROUP, reference.to_json()) == reference
    for change in [{"throughSequence": 5}, {"purpose": "archival"}, {"snapshotHash": "sha256:1"}]:
        with pytest.raises(SnapshotError):
            SnapshotReference.from_json(GROUP, {**reference.to_json(), **change})
    error = MwpError(
        ErrorCode.CURSOR_TOO_OLD,
        group_id=GROUP,
        snapshot_artifact_hash=HASH,
        details={"firstSequence": 5, "snapshot": reference.to_json()},
    )
    assert SnapshotReference.from_error(error) == reference
    bare = MwpError(ErrorCode.CURSOR_TOO_OLD, group_id=GROUP, details={"firstSequence": 5})
    with pytest.raises(SnapshotError, match="no-snapshot"):
        SnapshotReference.from_error(bare)
    mismatched = MwpError(
        ErrorCode.CURSOR_TOO_OLD,
        group_id=GROUP,
        snapshot_artifact_hash="sha256:" + "cd" * 32,
        details={"snapshot": reference.to_json()},
    )
    with pytest.raises(SnapshotError):
        SnapshotReference.from_error(mismatched)
