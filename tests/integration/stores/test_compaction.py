"""Compaction, signed Group Snapshots, CURSOR_TOO_OLD and archival, on a folder and S3.

The history is a real Group (the pure Group Authority's Events), so a snapshot's state is
compared with a replay of the same Events.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import replay
from mwp.core.log.cursor import Cursor
from mwp.core.log.group_snapshot import (
    SnapshotError,
    SnapshotPurpose,
    SnapshotReference,
    archive_entry_key,
    compaction_key,
    content_hash,
    state_key,
)
from mwp.core.models import validate_document
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.log.compaction import (
    archive_group,
    compact,
    latest_snapshot,
    restore_from_snapshot,
)
from mwp.log.delivery import FolderCursorStore, subscribe
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore, ObjectStoreError
from mwp.stores.removal import delete_object
from tests.integration.s3_fixture import overwrite
from tests.integration.stores.group_history import (
    ARTIFACT_A,
    AUTHORITY,
    EVIDENCE,
    GROUP,
    IMPOSTOR,
    IMPOSTOR_KEY,
    IMPOSTOR_KEY_ID,
    KEY,
    KEY_ID,
    closed_mission,
    open_mission,
    stored_log,
)

THROUGH = 10
CREATED = "2026-08-01T00:00:00Z"


@pytest.fixture
def events() -> list[dict[str, Any]]:
    return open_mission()


@pytest.fixture
def log(object_store: ObjectStore, events: list[dict[str, Any]]) -> GroupEventLog:
    return stored_log(object_store, events)


def run_compaction(log: GroupEventLog, through: int = THROUGH) -> Any:
    return compact(log, through, KEY_ID, KEY, evidence=EVIDENCE, authority=AUTHORITY)


def too_old(log: GroupEventLog, after: int = 0) -> MwpError:
    with pytest.raises(MwpError) as raised:
        log.read(after)
    assert raised.value.code is ErrorCode.CURSOR_TOO_OLD
    return raised.value


def test_compaction_moves_entries_to_the_archive_and_keeps_the_history(
    log: GroupEventLog, events: list[dict[str, Any]]
) -> None:
    before = [e.data for e in log.read()]
    last = len(events)
    result = run_compaction(log)
    assert (result.archived, result.deleted, result.oldest_online) == (THROUGH, THROUGH, 11)
    assert (log.first_sequence(), log.last_sequence()) == (THROUGH + 1, last)
    store = log.store
    archived = [store.get(archive_entry_key(GROUP, n)) for n in range(1, THROUGH + 1)]
    assert archived == before[:THROUGH]  # the same bytes, moved, never rewritten
    assert [e.data for e in log.read(THROUGH)] == before[THROUGH:]
    # The online rest verifies, anchored on the head hash the snapshot records.
    verdict = log.verify_all(EVIDENCE, from_sequence=THROUGH + 1, previous_hash=result.head_hash)
    assert verdict.ok and verdict.anchored and verdict.verified == last - THROUGH
    record = parse_bytes(store.get(compaction_key(GROUP, THROUGH)) or b"")
    assert record["oldestOnlineSequence"] == THROUGH + 1
    assert record["snapshot"] == result.snapshot.to_json()
    # Running it again finishes nothing new and returns the same snapshot.
    again = run_compaction(log)
    assert (again.archived, again.deleted, again.snapshot) == (0, 0, result.snapshot)


def test_the_snapshot_is_signed_and_holds_the_replayed_state(
    log: GroupEventLog, events: list[dict[str, Any]]
) -> None:
    reference = run_compaction(log).snapshot
    data = log.store.get(reference.key)
    assert data is not None and content_hash(data) == reference.snapshot_hash
    document = parse_bytes(data)
    validate_document("group-snapshot.schema.json", document)
    assert document["createdBy"] == AUTHORITY.to_json()
    assert document["throughSequence"] == THROUGH
    assert document["eventIds"] == [e["eventId"] for e in events[:THROUGH]]
    restored = restore_from_snapshot(log.store, EVIDENCE, reference, authority=AUTHORITY)
    expected = replay(events[:THROUGH]).snapshot()
    assert canonicalize(restored.authority.snapshot()) == canonicalize(expected)
    assert restored.cursor.sequence == THROUGH
    assert restored.archive is None


def test_cursor_too_old_carries_the_snapshot_reference(log: GroupEventLog) -> None:
    reference = run_compaction(log).snapshot
    error = too_old(log, 3)
    assert error.group_id == GROUP
    assert error.snapshot_artifact_hash == reference.snapshot_hash
    assert error.details is not None
    assert error.details["firstSequence"] == THROUGH + 1
    assert SnapshotReference.from_error(error) == reference
    wire = error.to_wire("2026-08-01T00:00:00Z")
    validate_document("error.schema.json", wire)
    assert (
        wire["code"] == "CURSOR_TOO_OLD" and wire["snapshotArtifactHash"] == reference.snapshot_hash
    )
    # A cursor at the snapshot's sequence (or later) is not too old.
    assert [e.sequence for e in log.read(THROUGH, limit=2)] == [11, 12]


def test_without_a_snapshot_cursor_too_old_has_no_reference(
    object_store: ObjectStore, events: list[dict[str, Any]]
) -> None:
    log = stored_log(object_store, events[:5])
    delete_object(object_store, log.key(1))  # a log that lost its start, with no snapshot
    error = too_old(log)
    assert error.snapshot_artifact_hash is None
    assert error.details == {"firstSequence": 2, "afterSequence": 0}
    with pytest.raises(SnapshotError) as refused:
        restore_from_snapshot(object_store, EVIDENCE, error)
    assert refused.value.reason == "no-snapshot"


async def test_a_subscriber_behind_the_compaction_restores_and_resumes(
    log: GroupEventLog, events: list[dict[str, Any]], tmp_path: Any
) -> None:
    cursors = FolderCursorStore(tmp_path / "cursors")
    reader = "urn:example:agent:late-reader"
    early = subscribe(log.store, GROUP, EVIDENCE, cursor_store=cursors, subscriber=reader)
    async for item in early:
        if item.sequence == 2:
            await early.ack(item.cursor)
            break
    early.close()
    run_compaction(log)

    subscription = subscribe(
        log.store, GROUP, EVIDENCE, cursor_store=cursors, subscriber=reader, follow=False
    )
    assert subscription.position.sequence == 2
    with pytest.raises(MwpError) as raised:
        await anext(subscription)
    assert raised.value.code is ErrorCode.CURSOR_TOO_OLD
    restored, resumed = await subscription.recover(raised.value)
    assert restored.authority.sequence == THROUGH
    assert resumed.position == Cursor(GROUP, THROUGH, restored.snapshot.head_hash)
    assert await resumed.ack(restored.cursor) == resumed.position  # the state is adopted
    delivered = [item async for item in resumed]
    assert [d.sequence for d in delivered] == list(range(THROUGH + 1, len(events) + 1))
    assert [d.event_id for d in delivered] == [e["eventId"] for e in events[THROUGH:]]
    await resumed.ack()
    assert cursors.load(GROUP, reader) == resumed.position


def _tamper_state(store: ObjectStore, reference: SnapshotReference) -> None:
    snapshot = parse_bytes(store.get(reference.key) or b"")
    key = state_key(GROUP, snapshot["stateHash"])
    state = parse_bytes(store.get(key) or b"")
    state["authority"]["state"]["sequence"] = 9
    overwrite(store, key, canonicalize(state))


def _resign(store: ObjectStore, reference: SnapshotReference, **changes: Any) -> bytes:
    """The snapshot rewritten and signed by the impostor service (a registered key)."""
    from mwp.core.trust.signed_document import sign

    snapshot = parse_bytes(store.get(reference.key) or b"")
    snapshot.pop("signature")
    snapshot.update(changes)
    forged = canonicalize(sign(snapshot, "group-snapshot", IMPOSTOR_KEY_ID, IMPOSTOR_KEY))
    overwrite(store, reference.key, forged)
    return forged


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("byte", "content-hash"),
        ("byte-and-reference", "signature"),
        ("state", "state-hash"),
        ("impostor", "wrong-authority"),
        ("missing-state", "state-missing"),
    ],
)
def test_a_tampered_snapshot_is_refused(log: GroupEventLog, tamper: str, reason: str) -> None:
    reference = run_compaction(log).snapshot
    store = log.store
    data = store.get(reference.key) or b""
    if tamper == "byte":
        overwrite(
            store, reference.key, data.replace(b'"throughSequence":10', b'"throughSequence":9')
        )
    elif tamper == "byte-and-reference":  # the reference itself points at the changed bytes
        changed = data.replace(b"group.snapshot.compaction", b"group.snapshot.compactiom")
        overwrite(store, reference.key, changed)
        reference = SnapshotReference(
            GROUP, reference.key, THROUGH, reference.purpose, content_hash(changed)
        )
    elif tamper == "state":
        _tamper_state(store, reference)
    elif tamper == "impostor":
        forged = _resign(store, reference, createdBy=IMPOSTOR.to_json())
        reference = SnapshotReference(
            GROUP, reference.key, THROUGH, reference.purpose, content_hash(forged)
        )
    else:
        delete_object(store, state_key(GROUP, parse_bytes(data)["stateHash"]))
    with pytest.raises(SnapshotError) as refused:
        restore_from_snapshot(store, EVIDENCE, reference, authority=AUTHORITY)
    assert refused.value.reason == reason
    assert refused.value.code is ErrorCode.PROTOCOL_VIOLATION


async def test_recovery_from_a_tampered_snapshot_does_not_resume(log: GroupEventLog) -> None:
    run_compaction(log)
    reference = latest_snapshot(log.store, GROUP)
    assert reference is not None
    _tamper_state(log.store, reference)
    subscription = subscribe(log.store, GROUP, EVIDENCE, follow=False)
    with pytest.raises(MwpError) as raised:
        await anext(subscription)
    with pytest.raises(SnapshotError):
        await subscription.recover(raised.value)


def test_compaction_refuses_a_broken_log(log: GroupEventLog) -> None:
    entry = log.get(4)
    assert entry is not None
    overwrite(log.store, log.key(4), entry.data.replace(b"urn:example", b"urn:examplf", 1))
    with pytest.raises(SnapshotError) as refused:
        run_compaction(log)
    assert refused.value.reason == "log-fault"
    assert "sequence 4" in str(refused.value)
    assert log.first_sequence() == 1  # nothing was removed
    assert latest_snapshot(log.store, GROUP) is None
    assert not log.store.exists(compaction_key(GROUP, THROUGH))


def test_compaction_keeps_the_head_online_and_refuses_bad_requests(
    log: GroupEventLog, events: list[dict[str, Any]]
) -> None:
    last = len(events)
    for through in (0, last, last + 5):
        with pytest.raises(SnapshotError) as refused:
            run_compaction(log, through)
        assert refused.value.code is ErrorCode.INVALID_COMMAND
    with pytest.raises(SnapshotError, match="not the one bound"):
        compact(log, THROUGH, KEY_ID, IMPOSTOR_KEY, evidence=EVIDENCE)
    run_compaction(log, 12)
    with pytest.raises(SnapshotError, match="already compacted"):
        run_compaction(log, 5)
    # A later compaction starts from the archive and moves only what is still online.
    later = run_compaction(log, last - 1)
    assert (later.archived, later.deleted, later.oldest_online) == (last - 13, last - 13, last)


def test_the_mirror_keeps_appending_after_a_compaction(
    object_store: ObjectStore, events: list[dict[str, Any]]
) -> None:
    log = stored_log(object_store, events[:-2])
    run_compaction(log, len(events) - 3)
    appended = log.seal_and_append(events[-2:], KEY_ID, KEY)
    assert appended.written == 2
    first = log.first_sequence()
    assert first == len(events) - 2
    reference = latest_snapshot(object_store, GROUP)
    assert reference is not None
    restored = restore_from_snapshot(object_store, EVIDENCE, reference)
    verdict = log.verify_all(EVIDENCE, from_sequence=first, previous_hash=restored.cursor.head_hash)
    assert verdict.ok and verdict.verified == 3


class FailingDeletes:
    """The store, but deleting fails after ``allowed`` objects (a crash mid-compaction)."""

    def __init__(self, store: ObjectStore, allowed: int) -> None:
        self.inner = store
        self.allowed = allowed

    def delete(self, key: str) -> bool:
        if self.allowed == 0:
            raise ObjectStoreError("the process died here")
        self.allowed -= 1
        return delete_object(self.inner, key)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_absent(key, data)

    def put_stream_if_absent(
        self, key: str, chunks: Iterable[bytes], *, expect_sha256: str | None = None
    ) -> bool:
        return self.inner.put_stream_if_absent(key, chunks, expect_sha256=expect_sha256)

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def open_stream(self, key: str) -> Iterator[bytes] | None:
        return self.inner.open_stream(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def list_keys(self, prefix: str, *, after: str | None = None, limit: int = 1000) -> list[str]:
        return self.inner.list_keys(prefix, after=after, limit=limit)

    def uri(self, key: str) -> str:
        return self.inner.uri(key)


def test_a_compaction_that_died_midway_is_finished_by_the_retry(
    log: GroupEventLog, events: list[dict[str, Any]]
) -> None:
    before = [e.data for e in log.read()]
    crashing = GroupEventLog(FailingDeletes(log.store, allowed=4), GROUP)
    with pytest.raises(ObjectStoreError):
        compact(crashing, THROUGH, KEY_ID, KEY, evidence=EVIDENCE, created_at=CREATED)
    assert log.first_sequence() == 5  # 1..4 gone, the online log still contiguous
    error = too_old(log)  # the snapshot was written before anything was removed
    assert SnapshotReference.from_error(error).through_sequence == THROUGH
    result = compact(log, THROUGH, KEY_ID, KEY, evidence=EVIDENCE)
    assert (result.deleted, result.oldest_online) == (THROUGH - 4, THROUGH + 1)
    archived = [log.store.get(archive_entry_key(GROUP, n)) for n in range(1, THROUGH + 1)]
    assert archived == before[:THROUGH]
    assert len(before) == len(events)


def test_archival_writes_a_verifiable_final_snapshot(object_store: ObjectStore) -> None:
    events = closed_mission()
    log = stored_log(object_store, events)
    reference = archive_group(log, KEY_ID, KEY, evidence=EVIDENCE, authority=AUTHORITY)
    assert reference.purpose is SnapshotPurpose.ARCHIVAL
    assert reference.through_sequence == len(events)
    restored = restore_from_snapshot(object_store, EVIDENCE, reference, authority=AUTHORITY)
    record = restored.archive
    assert record is not None
    assert record["mission"]["state"] == "approved"
    assert [(w["workItemId"], w["state"]) for w in record["workItems"]] == [
        ("urn:example:work-item:a", "verified")
    ]
    approvals = [a for a in record["approvals"] if a["kind"] == "mission.approved"]
    assert len(approvals) == 1
    assert approvals[0]["approval"]["artifactHashes"] == [ARTIFACT_A]
    assert ARTIFACT_A in [a["contentHash"] for a in record["artifacts"]]
    kinds = {d["kind"] for d in record["decisions"]}
    assert {
        "mission.created",
        "work.authorized",
        "work.result.accepted",
        "mission.approved",
    } <= kinds
    policy = restored.snapshot.document["policyLog"]
    assert policy[0]["decision"] == "group.snapshot.archival"
    assert "mission.approved" in [p["decision"] for p in policy]
    assert restored.snapshot.event_ids == tuple(e["eventId"] for e in events)
    assert log.verify_all(EVIDENCE).verified == len(events)  # archival deletes nothing
    # Idempotent, and the final snapshot is what CURSOR_TOO_OLD would point at.
    assert archive_group(log, KEY_ID, KEY, evidence=EVIDENCE, created_at=CREATED) == reference
    assert latest_snapshot(object_store, GROUP) == reference


def test_archival_refuses_an_open_group_and_a_tampered_final_snapshot(
    object_store: ObjectStore,
) -> None:
    log = stored_log(object_store, open_mission())
    with pytest.raises(SnapshotError) as refused:
        archive_group(log, KEY_ID, KEY, evidence=EVIDENCE)
    assert refused.value.code is ErrorCode.INVALID_STATE_TRANSITION
    assert latest_snapshot(object_store, GROUP) is None
    reference = archive_group(log, KEY_ID, KEY, evidence=EVIDENCE, require_closed=False)
    restored = restore_from_snapshot(object_store, EVIDENCE, reference)
    assert restored.archive is not None and restored.archive["mission"]["state"] == "active"
    data = object_store.get(reference.key) or b""
    overwrite(
        object_store, reference.key, data.replace(b"membership.changed", b"membership.chanced")
    )
    with pytest.raises(SnapshotError) as tampered:
        restore_from_snapshot(object_store, EVIDENCE, reference)
    assert tampered.value.reason == "content-hash"
