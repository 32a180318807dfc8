"""One Group's signed Event log in an object store: append, read after a sequence, verify.

Layout: one object per entry, ``groups/<group>/events/<sequence, 12 digits>.json``, holding the
entry's exact JCS bytes (see :mod:`mwp.core.log.event_log`). Objects are written once, a
batch at a time (:meth:`~mwp.stores.objects.ObjectStore.put_many_if_absent`: on a folder one
fsync per entry and one for the folder), visible in sequence order and all durable when the
append returns. After a process crash the stored entries are a contiguous run; after a machine
crash mid-append the unfinished batch may have lost any of its entries. Either way the retry
rewrites nothing stored and writes the missing entries with the same bytes (sealing is
deterministic), so the log is complete again, byte for byte.

The mirror activity calls :meth:`GroupEventLog.seal_and_append` with the accepted, unsigned
Events of a batch and the Group Authority's key. It is safe to call again with the same batch
(or one overlapping what is stored) after a crash: entries already stored are left as they are,
whether the retry re-signs them to the same bytes or, after a key rotation, to other bytes.
What it refuses (:class:`EventLogError`) is a batch that would rewrite history: another Event
at a stored sequence, or a batch that does not continue from the stored entry before it. (So
a retry with a rotated key after a machine crash that left a gap inside a batch is refused,
writing nothing: the entry after the gap links to one only the old key reproduces.)

All calls are synchronous (boto3 is); an async activity runs them in a thread.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.event_log import (
    ChainVerdict,
    ChainVerifier,
    LogEntry,
    LogFaultReason,
    entry_key,
    events_prefix,
    seal,
    sequence_of_key,
    unsealed,
)
from mwp.core.log.group_snapshot import (
    SnapshotPurpose,
    SnapshotReference,
    content_hash,
    parse_snapshot_key,
    snapshots_prefix,
)
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.wire.ed25519 import SigningKey
from mwp.stores.objects import FolderObjectStore, ObjectConflict, ObjectStore, iter_keys

CLAUSES: tuple[str, ...] = ("MWP-MSN-009", "MWP-WRK-030")

# Concurrent reads ahead of verification for remote stores (a folder gains nothing).
REMOTE_READ_AHEAD = 16


class EventLogError(MwpError):
    """An append was refused; nothing stored was changed.

    ``reason`` is one of ``conflict`` (another Event at a stored sequence), ``broken-link``
    (the batch does not continue from the stored entry before it), ``previous-missing`` (that
    entry is not stored yet: mirror the earlier batch first; retryable), ``bad-batch``
    (entries of another Group, or not contiguous) and ``stored-entry-invalid``.
    """

    def __init__(self, reason: str, group_id: str, sequence: int, detail: str = "") -> None:
        retryable = reason == "previous-missing"
        super().__init__(
            ErrorCode.INTERNAL_ERROR if retryable else ErrorCode.PROTOCOL_VIOLATION,
            f"Group Event log: {reason} at sequence {sequence}" + (f": {detail}" if detail else ""),
            retryable=retryable,
            group_id=group_id,
            details={"reason": reason, "sequence": sequence},
        )
        self.reason = reason
        self.sequence = sequence


@dataclass(frozen=True)
class AppendResult:
    """What an append did: entries newly written, entries found already stored."""

    written: int
    already_stored: int
    last_sequence: int | None
    head_hash: str | None


class GroupEventLog:
    """The signed Event log of ``group_id`` in ``store``."""

    def __init__(self, store: ObjectStore, group_id: str, *, read_ahead: int | None = None) -> None:
        self.store = store
        self.group_id = group_id
        self.prefix = events_prefix(group_id)
        if read_ahead is None:
            read_ahead = 0 if isinstance(store, FolderObjectStore) else REMOTE_READ_AHEAD
        self.read_ahead = read_ahead

    def __repr__(self) -> str:
        return f"GroupEventLog({self.group_id!r} in {self.store!r})"

    def key(self, sequence: int) -> str:
        return entry_key(self.group_id, sequence)

    # --- writing ----------------------------------------------------------------------------

    def seal_and_append(
        self, events: Sequence[Mapping[str, Any]], key_id: str, key: SigningKey
    ) -> AppendResult:
        """Sign accepted Events (contiguous, in Group order) and append them; idempotent.

        The chain continues from the stored entry before the first Event.
        """
        if not events:
            return AppendResult(0, 0, None, None)
        first = self._check_batch([(e.get("groupId"), e.get("sequence")) for e in events])
        previous = self._previous_hash(first)
        written = stored = 0
        offset = 0
        while offset < len(events):
            entries: list[LogEntry] = []
            for event in events[offset:]:
                entries.append(seal(event, previous, key_id, key))
                previous = entries[-1].signing_hash
            try:
                created = self.store.put_many_if_absent(
                    [(self.key(e.sequence), e.data) for e in entries]
                )
            except ObjectConflict as conflict:
                # Stored earlier, signed to other bytes (another key): the same Events are
                # fine. Keep the stored run and chain on from it, then batch the rest again.
                created = list(conflict.written)
                offset += len(created)
                sequence = first + offset
                previous = entries[len(created)].previous_hash
                existing: LogEntry | None = self._stored(sequence)
                while existing is not None:
                    same = unsealed(existing.event) == unsealed(events[offset])
                    if not same or existing.previous_hash != previous:
                        raise EventLogError(
                            "conflict", self.group_id, sequence, "another Event is stored there"
                        ) from None
                    stored += 1
                    previous = existing.signing_hash
                    offset, sequence = offset + 1, sequence + 1
                    existing = self.get(sequence) if offset < len(events) else None
                if offset < len(events):
                    self._refuse_to_fill_a_gap(sequence)
            else:
                offset = len(events)
            written += sum(created)
            stored += len(created) - sum(created)
        return AppendResult(written, stored, first + len(events) - 1, previous)

    def append_batch(self, entries: Sequence[LogEntry]) -> AppendResult:
        """Append sealed entries (contiguous, each linking to the one before); idempotent.

        An entry already stored with the same bytes is skipped; different bytes at a stored
        sequence are refused. Signatures are not checked here (the writer sealed them);
        :meth:`verify_all` checks everything.
        """
        if not entries:
            return AppendResult(0, 0, None, None)
        first = self._check_batch([(e.group_id, e.sequence) for e in entries])
        previous = self._previous_hash(first)
        for entry in entries:  # every link checked before anything is written
            if entry.previous_hash != previous:
                raise EventLogError(
                    "broken-link", self.group_id, entry.sequence, f"links to {entry.previous_hash}"
                )
            previous = entry.signing_hash
        try:
            created = self.store.put_many_if_absent(
                [(self.key(e.sequence), e.data) for e in entries]
            )
        except ObjectConflict as conflict:
            raise EventLogError(
                "conflict",
                self.group_id,
                first + len(conflict.written),
                "another entry is stored there",
            ) from None
        written = sum(created)
        return AppendResult(written, len(created) - written, entries[-1].sequence, previous)

    def _refuse_to_fill_a_gap(self, sequence: int) -> None:
        """After entries signed by another key, ``sequence`` is absent: refuse, before writing,
        when a later entry is stored (a machine crash lost names out of order). It links to the
        lost entry, which only that other key reproduces."""
        for key in self.store.list_keys(self.prefix, after=self.key(sequence), limit=1):
            later = sequence_of_key(self.prefix, key)
            if later is not None:
                raise EventLogError(
                    "conflict", self.group_id, later, f"sequence {sequence} is missing before it"
                )

    def _check_batch(self, items: list[tuple[Any, Any]]) -> int:
        first = items[0][1]
        if not isinstance(first, int) or isinstance(first, bool) or first < 1:
            raise EventLogError("bad-batch", self.group_id, 0, "no Group sequence")
        for offset, (group_id, sequence) in enumerate(items):
            if group_id != self.group_id:
                raise EventLogError("bad-batch", self.group_id, first + offset, "another Group")
            if sequence != first + offset:
                raise EventLogError(
                    "bad-batch", self.group_id, first + offset, f"found sequence {sequence}"
                )
        return first

    def _previous_hash(self, first: int) -> str | None:
        if first == 1:
            return None
        data = self.store.get(self.key(first - 1))
        if data is None:
            raise EventLogError(
                "previous-missing", self.group_id, first, f"sequence {first - 1} is not stored"
            )
        return self._parse(first - 1, data).signing_hash

    def _stored(self, sequence: int) -> LogEntry:
        data = self.store.get(self.key(sequence))
        if data is None:
            raise EventLogError("stored-entry-invalid", self.group_id, sequence, "vanished")
        return self._parse(sequence, data)

    def _parse(self, sequence: int, data: bytes) -> LogEntry:
        entry = LogEntry.from_bytes(data)
        if entry.sequence != sequence or entry.group_id != self.group_id:
            raise EventLogError(
                "stored-entry-invalid", self.group_id, sequence, "its key names another entry"
            )
        return entry

    # --- reading ----------------------------------------------------------------------------

    def get(self, sequence: int) -> LogEntry | None:
        data = self.store.get(self.key(sequence))
        return None if data is None else self._parse(sequence, data)

    def read(self, after_sequence: int = 0, limit: int = 1000) -> list[LogEntry]:
        """Stored entries after ``after_sequence``, in order, stopping before any gap.

        Entries are parsed, not verified (a subscriber verifies them with a
        :class:`~mwp.core.log.event_log.ChainVerifier`). ``CURSOR_TOO_OLD`` when the log no longer
        reaches back to ``after_sequence + 1``.
        """
        if after_sequence < 0 or limit < 1:
            raise ValueError("after_sequence >= 0 and limit >= 1")
        start = after_sequence + 1
        entries: list[LogEntry] = []
        keys: Iterable[str]
        if self.read_ahead > 0:
            # Remote: one listing says what is there, so reads never run past the end.
            after = self.key(after_sequence) if after_sequence else None
            listed = self.store.list_keys(self.prefix, after=after, limit=limit)
            present = [sequence_of_key(self.prefix, k) for k in listed]
            run = list(itertools.takewhile(lambda p: p[1] == p[0], enumerate(present, start)))
            keys = [self.key(sequence) for sequence, _ in run]
        else:  # a folder: reading until the first absent file beats listing the folder
            keys = (self.key(s) for s in range(start, start + limit))
        for sequence, (_, data) in enumerate(self._get_many(keys), start=start):
            if data is None:
                break
            entries.append(self._parse(sequence, data))
        if not entries:
            # Nothing new is the usual answer to a poll: when the Cursor's own entry is still
            # stored the log reaches back to it, which one lookup proves (no listing).
            if after_sequence > 0 and self.store.exists(self.key(after_sequence)):
                return entries
            first = self.first_sequence()
            if first is not None and first > start:
                raise self._cursor_too_old(first, after_sequence)
        return entries

    def _cursor_too_old(self, first: int, after_sequence: int) -> MwpError:
        """``CURSOR_TOO_OLD``, with the newest snapshot that bridges to the online log.

        ``details.snapshot`` (see :class:`~mwp.core.log.group_snapshot.SnapshotReference`) and
        ``snapshotArtifactHash`` name it when one covers every sequence below ``first``; the
        reader restores it, verified, and resumes after its sequence.
        """
        details: dict[str, Any] = {"firstSequence": first, "afterSequence": after_sequence}
        reference = self.latest_snapshot()
        if reference is not None and reference.through_sequence >= first - 1:
            details["snapshot"] = reference.to_json()
        else:
            reference = None
        return MwpError(
            ErrorCode.CURSOR_TOO_OLD,
            f"the online log of this Group starts at sequence {first}",
            retryable=False,
            group_id=self.group_id,
            snapshot_artifact_hash=reference.snapshot_hash if reference else None,
            details=details,
        )

    def latest_snapshot(self) -> SnapshotReference | None:
        """The stored snapshot with the highest sequence, as a reference (not verified)."""
        prefix = snapshots_prefix(self.group_id)
        best: tuple[str, int, SnapshotPurpose] | None = None
        for key in iter_keys(self.store, prefix):
            parsed = parse_snapshot_key(prefix, key)
            if parsed is not None and (best is None or parsed[0] >= best[1]):
                best = (key, *parsed)
        if best is None:
            return None
        key, sequence, purpose = best
        data = self.store.get(key)
        if data is None:
            return None
        return SnapshotReference(self.group_id, key, sequence, purpose, content_hash(data))

    def first_sequence(self) -> int | None:
        """The lowest stored sequence (1 unless the log was compacted), None when empty."""
        for key in self.store.list_keys(self.prefix, limit=1):
            return sequence_of_key(self.prefix, key)
        return None

    def last_sequence(self) -> int:
        """The highest stored sequence, 0 when empty (lists every key: O(n / 1000) calls)."""
        last = 0
        for key in iter_keys(self.store, self.prefix):
            last = sequence_of_key(self.prefix, key) or last
        return last

    def head(self) -> LogEntry | None:
        """The last stored entry."""
        last = self.last_sequence()
        return self.get(last) if last else None

    def verify_all(
        self,
        evidence: RegistryEvidence,
        *,
        authority: Principal | None = None,
        from_sequence: int = 1,
        previous_hash: str | None = None,
    ) -> ChainVerdict:
        """Verify every stored entry from ``from_sequence``; the first fault, if any.

        Checks each object's key, every signature (six stages against ``evidence``), the hash
        chain, contiguity, the Group and Event ID uniqueness (see
        :class:`~mwp.core.log.event_log.ChainVerifier`). A log that should be complete is verified
        from 1; a compacted one from its first stored sequence with the anchoring hash.
        """
        verifier = ChainVerifier(
            self.group_id,
            evidence,
            start_sequence=from_sequence,
            previous_hash=previous_hash,
            authority=authority,
        )
        after = self.key(from_sequence - 1) if from_sequence > 1 else None
        for key, data in self._get_many(iter_keys(self.store, self.prefix, after=after)):
            sequence = sequence_of_key(self.prefix, key)
            if sequence is None:
                verifier.reject(LogFaultReason.UNEXPECTED_OBJECT, key)
                break
            if data is None:  # listed, then gone
                verifier.missing(sequence)
                break
            if verifier.feed(data, key_sequence=sequence) is not None:
                break
        return verifier.verdict()

    def read_objects(self, keys: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """``(key, bytes or None)`` for any keys of the store, in order, read ahead like
        :meth:`read` (compaction uses it for the archive)."""
        return self._get_many(keys)

    def _get_many(self, keys: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """``(key, bytes or None)`` in order; on remote stores, reads run ahead in threads."""
        if self.read_ahead <= 0:
            for key in keys:
                yield key, self.store.get(key)
            return
        with ThreadPoolExecutor(self.read_ahead) as pool:
            window: deque[tuple[str, Future[bytes | None]]] = deque()
            for key in keys:
                window.append((key, pool.submit(self.store.get, key)))
                if len(window) >= self.read_ahead:
                    ahead, future = window.popleft()
                    yield ahead, future.result()
            while window:
                ahead, future = window.popleft()
                yield ahead, future.result()
