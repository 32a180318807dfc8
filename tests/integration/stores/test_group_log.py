"""A Group's signed Event log in an object store: append, retry after a crash, read, verify."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.event_log import LogFaultReason, seal
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.wire.ed25519 import SigningKey
from mwp.log.group_log import EventLogError, GroupEventLog
from mwp.stores.objects import FolderObjectStore, ObjectStore
from mwp.stores.removal import delete_object
from tests.event_log_samples import (
    AUTHORITY,
    AUTHORITY_KEY,
    EVIDENCE,
    GROUP,
    KEY_ID,
    ORG,
    binding,
    chain,
    event,
)
from tests.integration.s3_fixture import overwrite

ROTATED_KEY_ID = "urn:mwp:key:service:group-authority:2"
ROTATED_KEY = SigningKey(bytes(range(5, 37)))


def events(first: int, last: int) -> list[dict[str, Any]]:
    return [event(n) for n in range(first, last + 1)]


@pytest.fixture
def log(object_store: ObjectStore) -> GroupEventLog:
    return GroupEventLog(object_store, GROUP)


def test_batches_chain_on_from_the_stored_head(log: GroupEventLog) -> None:
    first = log.seal_and_append(events(1, 4), KEY_ID, AUTHORITY_KEY)
    assert (first.written, first.already_stored, first.last_sequence) == (4, 0, 4)
    second = log.seal_and_append(events(5, 7), KEY_ID, AUTHORITY_KEY)
    assert (second.written, second.last_sequence) == (3, 7)
    expected = chain(7)
    assert [e.data for e in log.read()] == [e.data for e in expected]
    assert second.head_hash == expected[-1].signing_hash
    assert (log.first_sequence(), log.last_sequence()) == (1, 7)
    head = log.head()
    assert head is not None and head.data == expected[-1].data
    verdict = log.verify_all(EVIDENCE, authority=AUTHORITY)
    assert verdict.ok and verdict.verified == 7 and verdict.head_hash == second.head_hash


def test_the_same_batch_again_is_a_no_op(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 5), KEY_ID, AUTHORITY_KEY)
    before = [e.data for e in log.read()]
    again = log.seal_and_append(events(1, 5), KEY_ID, AUTHORITY_KEY)
    assert (again.written, again.already_stored) == (0, 5)
    overlapping = log.seal_and_append(events(4, 6), KEY_ID, AUTHORITY_KEY)
    assert (overlapping.written, overlapping.already_stored) == (1, 2)
    assert [e.data for e in log.read()][:5] == before
    assert log.verify_all(EVIDENCE).verified == 6


def test_a_crash_mid_batch_is_completed_by_the_retry(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 2), KEY_ID, AUTHORITY_KEY)
    log.seal_and_append(events(3, 4), KEY_ID, AUTHORITY_KEY)  # the part written before a crash
    retry = log.seal_and_append(events(3, 8), KEY_ID, AUTHORITY_KEY)
    assert (retry.written, retry.already_stored) == (4, 2)
    assert [e.data for e in log.read()] == [e.data for e in chain(8)]


def test_entries_a_machine_crash_lost_are_rewritten_byte_for_byte(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 2), KEY_ID, AUTHORITY_KEY)
    log.seal_and_append(events(3, 8), KEY_ID, AUTHORITY_KEY)
    seen = [e.data for e in log.read()]
    for sequence in (4, 5, 7):  # any names of the unsynced batch, not only its last ones
        delete_object(log.store, log.key(sequence))
    retry = log.seal_and_append(events(3, 8), KEY_ID, AUTHORITY_KEY)
    assert (retry.written, retry.already_stored) == (3, 3)
    assert [e.data for e in log.read()] == seen == [e.data for e in chain(8)]


def test_a_retry_after_a_key_rotation_keeps_what_is_stored(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 3), KEY_ID, AUTHORITY_KEY)
    stored = [e.data for e in log.read()]
    retry = log.seal_and_append(events(2, 5), ROTATED_KEY_ID, ROTATED_KEY)
    assert (retry.written, retry.already_stored) == (2, 2)
    assert [e.data for e in log.read()][:3] == stored
    both = RegistryEvidence.from_bindings(
        ORG,
        [
            binding(KEY_ID, AUTHORITY, AUTHORITY_KEY),
            binding(ROTATED_KEY_ID, AUTHORITY, ROTATED_KEY),
        ],
    )
    assert log.verify_all(both).verified == 5
    assert log.verify_all(EVIDENCE).fault is not None  # the new key is not in the old evidence


def test_a_gap_a_rotated_key_cannot_bridge_is_refused(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 5), KEY_ID, AUTHORITY_KEY)
    delete_object(log.store, log.key(3))  # a machine crash lost it, and the key was replaced
    with pytest.raises(EventLogError) as raised:
        log.seal_and_append(events(2, 5), ROTATED_KEY_ID, ROTATED_KEY)
    assert raised.value.reason == "conflict" and raised.value.sequence == 4
    assert [e.sequence for e in log.read()] == [1, 2]  # nothing written
    retry = log.seal_and_append(events(2, 5), KEY_ID, AUTHORITY_KEY)  # the old key bridges it
    assert (retry.written, retry.already_stored) == (1, 3)
    assert [e.data for e in log.read()] == [e.data for e in chain(5)]


def test_another_event_at_a_stored_sequence_is_refused(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 3), KEY_ID, AUTHORITY_KEY)
    before = [e.data for e in log.read()]
    changed = [event(2), event(3, payload={"content": []})]
    with pytest.raises(EventLogError) as raised:
        log.seal_and_append(changed, KEY_ID, AUTHORITY_KEY)
    assert raised.value.reason == "conflict" and raised.value.sequence == 3
    assert raised.value.code is ErrorCode.PROTOCOL_VIOLATION and not raised.value.retryable
    assert [e.data for e in log.read()] == before


def test_a_batch_must_follow_a_stored_entry(log: GroupEventLog) -> None:
    log.seal_and_append(events(1, 2), KEY_ID, AUTHORITY_KEY)
    with pytest.raises(EventLogError) as raised:
        log.seal_and_append(events(4, 5), KEY_ID, AUTHORITY_KEY)
    assert raised.value.reason == "previous-missing" and raised.value.sequence == 4
    assert raised.value.retryable and raised.value.code is ErrorCode.INTERNAL_ERROR
    assert log.last_sequence() == 2


@pytest.mark.parametrize(
    "batch",
    [
        [event(1), event(3)],
        [event(2), event(1)],
        [event(1), event(2, "urn:mwp:group:other")],
        [{**event(1), "sequence": "1"}],
    ],
)
def test_malformed_batches_are_refused_before_writing(
    log: GroupEventLog, batch: list[dict[str, Any]]
) -> None:
    with pytest.raises(EventLogError) as raised:
        log.seal_and_append(batch, KEY_ID, AUTHORITY_KEY)
    assert raised.value.reason == "bad-batch"
    assert log.last_sequence() == 0


def test_sealed_entries_append_idempotently(log: GroupEventLog) -> None:
    entries = chain(6)
    assert log.append_batch(entries[:4]).written == 4
    result = log.append_batch(entries[2:])
    assert (result.written, result.already_stored, result.head_hash) == (
        2,
        2,
        entries[-1].signing_hash,
    )
    assert log.verify_all(EVIDENCE).verified == 6


def test_sealed_entries_must_link_and_must_not_replace(log: GroupEventLog) -> None:
    entries = chain(3)
    log.append_batch(entries)
    with pytest.raises(EventLogError) as raised:
        log.append_batch([seal(event(4), entries[0].signing_hash, KEY_ID, AUTHORITY_KEY)])
    assert raised.value.reason == "broken-link"
    other = seal(event(3, payload={"content": []}), entries[1].signing_hash, KEY_ID, AUTHORITY_KEY)
    with pytest.raises(EventLogError) as raised:
        log.append_batch([other])
    assert raised.value.reason == "conflict"
    assert log.get(3) == entries[2]


def test_reads_page_after_a_cursor_and_stop_at_a_gap(
    log: GroupEventLog, object_store: ObjectStore
) -> None:
    entries = chain(7)
    for entry in entries[:4] + entries[5:]:  # sequence 5 not (yet) stored
        object_store.put_if_absent(log.key(entry.sequence), entry.data)
    assert [e.sequence for e in log.read(after_sequence=1, limit=2)] == [2, 3]
    assert [e.sequence for e in log.read(after_sequence=2)] == [3, 4]
    assert log.read(after_sequence=4) == []
    assert [e.sequence for e in log.read(after_sequence=5)] == [6, 7]
    assert log.read(after_sequence=7) == []
    verdict = log.verify_all(EVIDENCE)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (5, LogFaultReason.GAP)
    assert verdict.verified == 4


def test_a_cursor_below_the_online_log_is_too_old(
    log: GroupEventLog, object_store: ObjectStore
) -> None:
    entries = chain(6)
    for entry in entries[3:]:  # a log compacted below sequence 4
        object_store.put_if_absent(log.key(entry.sequence), entry.data)
    with pytest.raises(MwpError) as raised:
        log.read(after_sequence=1)
    assert raised.value.code is ErrorCode.CURSOR_TOO_OLD
    assert raised.value.group_id == GROUP
    assert raised.value.details == {"firstSequence": 4, "afterSequence": 1}
    assert [e.sequence for e in log.read(after_sequence=3)] == [4, 5, 6]
    anchored = log.verify_all(EVIDENCE, from_sequence=4, previous_hash=entries[2].signing_hash)
    assert anchored.ok and anchored.verified == 3
    assert log.verify_all(EVIDENCE).fault is not None  # from 1 it is incomplete


def test_a_tampered_object_is_found_by_verify_all(
    log: GroupEventLog, object_store: ObjectStore
) -> None:
    log.seal_and_append(events(1, 5), KEY_ID, AUTHORITY_KEY)
    tampered = log.read()[2].data.replace(b"message 3", b"message X")
    overwrite(object_store, log.key(3), tampered)
    verdict = log.verify_all(EVIDENCE)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.SIGNATURE)
    assert verdict.verified == 2


def test_an_entry_stored_under_another_sequence_is_found(
    log: GroupEventLog, object_store: ObjectStore
) -> None:
    entries = chain(3)
    log.append_batch(entries[:2])
    object_store.put_if_absent(log.key(3), entries[1].data)
    verdict = log.verify_all(EVIDENCE)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.SEQUENCE_MISMATCH)
    with pytest.raises(EventLogError) as raised:
        log.read()
    assert raised.value.reason == "stored-entry-invalid"


def test_a_foreign_object_in_the_log_is_found(
    log: GroupEventLog, object_store: ObjectStore
) -> None:
    log.seal_and_append(events(1, 2), KEY_ID, AUTHORITY_KEY)
    object_store.put_if_absent(log.prefix + "000000000002.json.bak", b"{}")
    verdict = log.verify_all(EVIDENCE)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.UNEXPECTED_OBJECT)


def test_logs_of_two_groups_do_not_mix(object_store: ObjectStore) -> None:
    alpha = GroupEventLog(object_store, GROUP)
    beta = GroupEventLog(object_store, "urn:mwp:group:alpha:beta")
    alpha.seal_and_append(events(1, 3), KEY_ID, AUTHORITY_KEY)
    beta.seal_and_append(
        [event(n, "urn:mwp:group:alpha:beta") for n in (1, 2)], KEY_ID, AUTHORITY_KEY
    )
    assert (alpha.last_sequence(), beta.last_sequence()) == (3, 2)
    assert alpha.verify_all(EVIDENCE).verified == 3
    assert beta.verify_all(EVIDENCE).verified == 2


def test_an_empty_log_has_no_head(log: GroupEventLog) -> None:
    assert (log.first_sequence(), log.last_sequence(), log.head()) == (None, 0, None)
    assert log.read() == []
    verdict = log.verify_all(EVIDENCE)
    assert verdict.ok and verdict.verified == 0
    assert log.seal_and_append([], KEY_ID, AUTHORITY_KEY).written == 0


class _CountingLists:
    """The store, counting its listings (an idle poll should need none)."""

    def __init__(self, store: ObjectStore) -> None:
        self.inner = store
        self.listings = 0

    def list_keys(self, prefix: str, **options: Any) -> list[str]:
        self.listings += 1
        return self.inner.list_keys(prefix, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_an_idle_poll_at_the_head_of_a_folder_log_lists_nothing(
    object_store: ObjectStore,
) -> None:
    entries = chain(5)
    counting = _CountingLists(object_store)
    folder = isinstance(object_store, FolderObjectStore)
    log = GroupEventLog(counting, GROUP, read_ahead=GroupEventLog(object_store, GROUP).read_ahead)  # type: ignore[arg-type]
    for entry in entries:
        object_store.put_if_absent(log.key(entry.sequence), entry.data)
    before = counting.listings
    assert log.read(after_sequence=5) == []  # nothing new: the Cursor's own entry is there
    # A folder log is read without listing (S3 lists once per read, by design: cheap there).
    assert counting.listings == before + (0 if folder else 1)
