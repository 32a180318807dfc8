"""The folder store's batch write: in order, idempotent, one fsync per file and per folder, and
what a crash leaves is completed by the retry, byte for byte, in the Group Event log."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import FolderObjectStore, ObjectConflict
from tests.event_log_samples import AUTHORITY, AUTHORITY_KEY, EVIDENCE, GROUP, KEY_ID, chain, event


@dataclass
class Syncs:
    """Every fsync the store makes, as it makes it (the real fsync still runs)."""

    store: FolderObjectStore
    keys: list[str]
    files: int = 0
    folders: list[int] = field(default_factory=list)  # inode numbers, in call order
    linked_at_file_syncs: list[int] = field(default_factory=list)
    linked_at_folder_syncs: list[int] = field(default_factory=list)

    def linked(self) -> int:
        return sum(self.store.exists(key) for key in self.keys)


@pytest.fixture
def store(tmp_path: Path) -> FolderObjectStore:
    return FolderObjectStore(tmp_path / "objects")


def spy_on_fsync(monkeypatch: pytest.MonkeyPatch, syncs: Syncs) -> None:
    real = os.fsync

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            syncs.folders.append(info.st_ino)
            syncs.linked_at_folder_syncs.append(syncs.linked())
        else:
            syncs.files += 1
            syncs.linked_at_file_syncs.append(syncs.linked())
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_batch_is_stored_in_order_with_one_result_per_item(store: FolderObjectStore) -> None:
    items = [(f"a/{n}", f"body {n}".encode()) for n in range(5)] + [("b/x", b"")]
    assert store.put_many_if_absent(items) == [True] * 6
    assert [store.get(key) for key, _ in items] == [data for _, data in items]
    assert store.list_keys("") == sorted(key for key, _ in items)
    assert not list(store._tmp.iterdir())  # no temporary file left behind
    assert store.put_many_if_absent([]) == []


def test_a_retried_batch_keeps_equal_bytes_and_writes_the_rest(store: FolderObjectStore) -> None:
    store.put_if_absent("a/1", b"one")
    store.put_if_absent("a/3", b"three")
    items = [("a/1", b"one"), ("a/2", b"two"), ("a/3", b"three"), ("a/4", b"four")]
    assert store.put_many_if_absent(items) == [False, True, False, True]
    assert store.put_many_if_absent(items) == [False] * 4
    assert store.put_many_if_absent([("a/5", b"five"), ("a/5", b"five")]) == [True, False]


def test_different_bytes_stop_the_batch_at_that_item(store: FolderObjectStore) -> None:
    store.put_if_absent("a/3", b"stored")
    items = [("a/1", b"one"), ("a/2", b"two"), ("a/3", b"other"), ("a/4", b"four")]
    store.put_if_absent("a/2", b"two")
    with pytest.raises(ObjectConflict) as raised:
        store.put_many_if_absent(items)
    assert (raised.value.key, raised.value.written) == ("a/3", (True, False))
    assert store.get("a/3") == b"stored"  # left untouched, as put_if_absent leaves it
    assert (store.get("a/1"), store.exists("a/4")) == (b"one", False)
    with pytest.raises(ObjectConflict) as twice:
        store.put_many_if_absent([("b/1", b"x"), ("b/2", b"y"), ("b/2", b"z"), ("b/3", b"w")])
    assert (twice.value.key, twice.value.written) == ("b/2", (True, True))
    assert (store.get("b/2"), store.exists("b/3")) == (b"y", False)
    assert not list(store._tmp.iterdir())


def test_a_bad_key_anywhere_writes_nothing(store: FolderObjectStore) -> None:
    with pytest.raises(ValueError):
        store.put_many_if_absent([("a/1", b"one"), ("../escape", b"x")])
    assert store.list_keys("") == []


def test_one_fsync_per_file_and_one_per_folder_after_every_link(
    store: FolderObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.put_if_absent("groups/g1/events/0", b"older")  # g1's folders exist already
    keys = [f"groups/g1/events/{n}" for n in range(1, 5)] + ["groups/g2/events/1"]
    syncs = Syncs(store, keys)
    spy_on_fsync(monkeypatch, syncs)
    store.put_many_if_absent([(key, key.encode()) for key in keys])
    assert syncs.files == 5
    # Bodies are durable before any name appears; folders are synced once every name is there.
    assert syncs.linked_at_file_syncs == [0] * 5
    assert syncs.linked_at_folder_syncs == [5] * len(syncs.folders)
    touched = ["groups/g1/events", "groups/g2/events", "groups", "groups/g2"]
    # Each folder that gained a name once: both events folders, and for the new Group g2 the
    # folders that gained g2 and g2/events.
    assert sorted(syncs.folders) == sorted((store.root / name).stat().st_ino for name in touched)


def test_a_retry_of_a_stored_batch_syncs_nothing(
    store: FolderObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [(f"a/{n}", b"x") for n in range(3)]
    store.put_many_if_absent(items)
    syncs = Syncs(store, [])
    spy_on_fsync(monkeypatch, syncs)
    assert store.put_many_if_absent(items) == [False] * 3
    assert (syncs.files, syncs.folders) == (0, [])


def test_a_crash_between_links_leaves_a_prefix_that_the_retry_completes(
    store: FolderObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mirror's process dies after some links of a batch: the stored entries are the
    first ones, each whole; the retried activity writes the rest with the same bytes."""
    log = GroupEventLog(store, GROUP)
    log.seal_and_append([event(1), event(2)], KEY_ID, AUTHORITY_KEY)
    real, links = os.link, 0

    def link(source: str | Path, target: str | Path) -> None:
        nonlocal links
        if links == 3:
            raise SystemExit("worker killed")
        links += 1
        real(source, target)

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(SystemExit):
        log.seal_and_append([event(n) for n in range(3, 9)], KEY_ID, AUTHORITY_KEY)
    monkeypatch.setattr(os, "link", real)
    assert [e.sequence for e in log.read()] == [1, 2, 3, 4, 5]
    retry = log.seal_and_append([event(n) for n in range(3, 9)], KEY_ID, AUTHORITY_KEY)
    assert (retry.written, retry.already_stored) == (3, 3)
    assert [e.data for e in log.read()] == [e.data for e in chain(8)]
    assert log.verify_all(EVIDENCE, authority=AUTHORITY).verified == 8


def test_entries_lost_before_the_folder_sync_are_rewritten_byte_for_byte(
    store: FolderObjectStore,
) -> None:
    """A machine crash before the folder fsync may drop any of the batch's names, not only
    the last ones; a reader may have seen them. The retry writes exactly those bytes again."""
    log = GroupEventLog(store, GROUP)
    log.seal_and_append([event(n) for n in range(1, 4)], KEY_ID, AUTHORITY_KEY)
    log.seal_and_append([event(n) for n in range(4, 10)], KEY_ID, AUTHORITY_KEY)
    seen = [e.data for e in log.read()]
    for sequence in (5, 6, 8):  # the names the crash lost
        (store.root / log.key(sequence)).unlink()
    assert [e.sequence for e in log.read()] == [1, 2, 3, 4]  # a reader stops at the gap
    retry = log.seal_and_append([event(n) for n in range(4, 10)], KEY_ID, AUTHORITY_KEY)
    assert (retry.written, retry.already_stored) == (3, 3)
    assert [e.data for e in log.read()] == seen == [e.data for e in chain(9)]
