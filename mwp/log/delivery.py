"""Delivery of a Group's signed Event log to a subscriber (spec 16, MWP-WRK-029 and 030).

``subscribe(store, group_id, evidence, after=cursor)`` returns a :class:`GroupSubscription`,
an async iterator of :class:`DeliveredEvent` read from the Group's log in the object store:

* **verified**: every entry passes six-stage signature verification against the
  Organization's Registry evidence and must link to the entry before it, starting from the
  head hash the Cursor recorded; a tampered, reordered or foreign entry raises
  :class:`DeliveryError` and nothing after it is delivered;
* **in Group order, never over a gap**: a missing sequence holds delivery until it appears
  (the subscription polls every ``poll_interval`` seconds, or sooner after :meth:`notify`);
* **at least once, deduplicated by Event ID**: an Event already delivered (in this
  subscription, or in an earlier one that shares its :class:`EventIdWindow`) is not handed out
  again; after a restart without that memory the Events after the last acknowledged Cursor
  come again, which is what at-least-once means.

``await subscription.ack(cursor)`` records durable progress in a :class:`CursorStore` (a
folder, or the object store itself) and never deletes anything from the log. A new
subscription for the same subscriber resumes after the stored Cursor. When the online log was
compacted past the Cursor, reading raises ``CURSOR_TOO_OLD`` with a signed snapshot reference;
:meth:`GroupSubscription.recover` verifies and restores that snapshot and resumes after it.

The object store calls are synchronous (boto3); they run in threads, so the event loop never
waits on storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import quote

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.cursor import Cursor
from mwp.core.log.event_log import (
    SEQUENCE_DIGITS,
    ChainVerifier,
    LogEntry,
    LogFault,
    group_segment,
    sequence_of_key,
)
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectConflict, ObjectStore, ObjectStoreError, iter_keys

CLAUSES: tuple[str, ...] = ("MWP-WRK-029", "MWP-WRK-030")

if TYPE_CHECKING:
    from mwp.log.compaction import RestoredGroup

DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_BATCH_SIZE = 256
DEFAULT_DEDUPE_CAPACITY = 100_000
_SUBSCRIBER = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,127}")


class DeliveryError(MwpError):
    """An entry failed verification; delivery stopped before it and nothing was acknowledged.

    ``fault`` says where and why (:class:`~mwp.core.log.event_log.LogFault`): a changed byte is a
    ``signature`` fault, a rewritten predecessor a ``chain-broken`` one, and so on.
    """

    def __init__(self, group_id: str, fault: LogFault) -> None:
        super().__init__(
            ErrorCode.PROTOCOL_VIOLATION,
            f"the Group Event log failed verification at {fault}",
            retryable=False,
            group_id=group_id,
            details={
                "sequence": fault.sequence,
                "reason": fault.reason.value,
                "detail": fault.detail,
            },
        )
        self.fault = fault


class CursorConflictError(MwpError):
    """Two different entries were acknowledged at one sequence: two histories of one Group."""

    def __init__(self, stored: Cursor, offered: Cursor) -> None:
        super().__init__(
            ErrorCode.PROTOCOL_VIOLATION,
            f"a Cursor at {stored} with another head hash is already stored",
            retryable=False,
            group_id=stored.group_id,
            details={
                "sequence": stored.sequence,
                "storedHeadHash": stored.head_hash,
                "offeredHeadHash": offered.head_hash,
            },
        )


@dataclass(frozen=True)
class DeliveredEvent:
    """One verified Group Event and the Cursor that acknowledges it."""

    event: dict[str, Any]  # the signed Event exactly as stored (with its chain extension)
    group_id: str
    sequence: int
    event_id: str
    signing_hash: str

    @property
    def kind(self) -> str:
        return str(self.event["kind"])

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.group_id, self.sequence, self.signing_hash)


class EventIdWindow:
    """The Event IDs delivered most recently (bounded, oldest forgotten first).

    Share one window between a subscription and the one that replaces it after a reconnect, and
    Events delivered before the disconnect but not yet acknowledged are not handed out twice.
    """

    def __init__(self, capacity: int = DEFAULT_DEDUPE_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity >= 1")
        self.capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        self._ids.move_to_end(event_id)
        while len(self._ids) > self.capacity:
            self._ids.popitem(last=False)


# --- cursor stores --------------------------------------------------------------------------


@runtime_checkable
class CursorStore(Protocol):
    """Durable Cursors, one per (Group, subscriber). A stored Cursor never moves back."""

    def load(self, group_id: str, subscriber: str) -> Cursor | None:
        """The stored Cursor, None if the subscriber never acknowledged anything."""
        ...

    def save(self, subscriber: str, cursor: Cursor) -> Cursor:
        """Store ``cursor`` durably unless a later one is stored; return what is stored.

        Raises :class:`CursorConflictError` for another head hash at the stored sequence.
        """
        ...


def subscriber_segment(subscriber: str) -> str:
    """A subscriber name (an Agent ID, a service name) as one key or file-name segment."""
    if not subscriber:
        raise ValueError("a subscriber has a name")
    escaped = quote(subscriber, safe="")
    if _SUBSCRIBER.fullmatch(escaped) and not escaped.startswith("sha256-"):
        return escaped
    import hashlib

    return "sha256-" + hashlib.sha256(subscriber.encode("utf-8")).hexdigest()


def _record(subscriber: str, cursor: Cursor) -> bytes:
    return canonicalize({**cursor.to_json(), "subscriber": subscriber})


def _parse_record(data: bytes, group_id: str, subscriber: str) -> Cursor:
    try:
        value = parse_bytes(data)
        if not isinstance(value, dict) or value.get("subscriber") != subscriber:
            raise ValueError("another subscriber's record")
        cursor = Cursor.from_json(value)
    except (JsonSyntaxError, ValueError, KeyError, TypeError) as exc:
        raise ObjectStoreError(f"unreadable Cursor record of {subscriber}: {exc}") from None
    if cursor.group_id != group_id:
        raise ObjectStoreError(f"the Cursor record of {subscriber} names another Group")
    return cursor


def _settle(stored: Cursor | None, offered: Cursor) -> Cursor | None:
    """The Cursor to keep instead of writing ``offered``, or None to write it."""
    if stored is None or offered.sequence > stored.sequence:
        return None
    if offered.sequence == stored.sequence and offered.head_hash != stored.head_hash:
        raise CursorConflictError(stored, offered)
    return stored


class FolderCursorStore:
    """One JSON file per (Group, subscriber) under ``root``, replaced atomically.

    A save writes a temporary file in the same folder, ``fsync``s it, renames it over the
    old one and ``fsync``s the folder: a crash leaves the old Cursor or the new one, never a
    torn file. One process writes one subscriber's Cursor (the subscription itself).
    """

    def __init__(self, root: Path | str, *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync

    def __repr__(self) -> str:
        return f"FolderCursorStore({str(self.root)!r})"

    def path(self, group_id: str, subscriber: str) -> Path:
        return self.root / group_segment(group_id) / f"{subscriber_segment(subscriber)}.json"

    def load(self, group_id: str, subscriber: str) -> Cursor | None:
        try:
            data = self.path(group_id, subscriber).read_bytes()
        except FileNotFoundError:
            return None
        return _parse_record(data, group_id, subscriber)

    def save(self, subscriber: str, cursor: Cursor) -> Cursor:
        kept = _settle(self.load(cursor.group_id, subscriber), cursor)
        if kept is not None:
            return kept
        path = self.path(cursor.group_id, subscriber)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".cursor-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_record(subscriber, cursor))
                if self.fsync:
                    os.fsync(handle.fileno())
            os.replace(tmp_name, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
        if self.fsync:
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        return cursor


class ObjectCursorStore:
    """Cursors in the object store, next to the log they point into.

    The store is write-once, so each acknowledged position is its own object,
    ``groups/<group>/cursors/<subscriber>/<sequence, 12 digits>.json``, written with a
    conditional put: a retry rewrites nothing, another head hash at one sequence is refused,
    and the newest (highest) record is the Cursor. Older records of the same subscriber are
    removed after a save (housekeeping only: the log itself is never touched).
    """

    def __init__(self, store: ObjectStore, *, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError("keep >= 1")
        self.store = store
        self.keep = keep

    def __repr__(self) -> str:
        return f"ObjectCursorStore({self.store!r})"

    def prefix(self, group_id: str, subscriber: str) -> str:
        return f"groups/{group_segment(group_id)}/cursors/{subscriber_segment(subscriber)}/"

    def key(self, cursor: Cursor, subscriber: str) -> str:
        prefix = self.prefix(cursor.group_id, subscriber)
        return f"{prefix}{cursor.sequence:0{SEQUENCE_DIGITS}d}.json"

    def _keys(self, group_id: str, subscriber: str) -> list[str]:
        return list(iter_keys(self.store, self.prefix(group_id, subscriber)))

    def load(self, group_id: str, subscriber: str) -> Cursor | None:
        keys = self._keys(group_id, subscriber)
        for key in reversed(keys):  # the newest readable record (one may be mid-removal)
            data = self.store.get(key)
            if data is not None:
                return _parse_record(data, group_id, subscriber)
        return None

    def save(self, subscriber: str, cursor: Cursor) -> Cursor:
        kept = _settle(self.load(cursor.group_id, subscriber), cursor)
        if kept is not None:
            return kept
        try:
            self.store.put_if_absent(self.key(cursor, subscriber), _record(subscriber, cursor))
        except ObjectConflict:
            stored = self.load(cursor.group_id, subscriber)
            raise CursorConflictError(stored or cursor, cursor) from None
        self._prune(cursor, subscriber)
        return cursor

    def _prune(self, cursor: Cursor, subscriber: str) -> None:
        from mwp.stores.removal import delete_object

        keys = self._keys(cursor.group_id, subscriber)
        for key in keys[: max(0, len(keys) - self.keep)]:
            try:
                delete_object(self.store, key)
            except ObjectStoreError:
                return  # a store that cannot delete keeps every record; load still works


# --- the subscription -----------------------------------------------------------------------


class GroupSubscription:
    """Verified Events of one Group after a Cursor; iterate with ``async for``.

    Create it with :func:`subscribe`. ``position`` is the Cursor of the last entry handed out
    (or skipped as a duplicate); ``acknowledged`` the last durably stored one.
    """

    def __init__(
        self,
        log: GroupEventLog,
        evidence: RegistryEvidence,
        *,
        after: Cursor,
        cursor_store: CursorStore | None = None,
        subscriber: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        batch_size: int = DEFAULT_BATCH_SIZE,
        authority: Principal | None = None,
        dedupe: EventIdWindow | None = None,
        follow: bool = True,
    ) -> None:
        if after.group_id != log.group_id:
            raise ValueError(f"a Cursor of {after.group_id}, not of {log.group_id}")
        if poll_interval <= 0 or batch_size < 1:
            raise ValueError("poll_interval > 0 and batch_size >= 1")
        if cursor_store is not None and subscriber is None:
            raise ValueError("a cursor store needs a subscriber name")
        self.log = log
        self.evidence = evidence
        self.cursor_store = cursor_store
        self.subscriber = subscriber
        self.poll_interval = poll_interval
        self.batch_size = batch_size
        self.authority = authority
        self.dedupe = dedupe if dedupe is not None else EventIdWindow()
        self.follow = follow
        self.start = after
        self.duplicates_skipped = 0
        self._position = after
        self._acknowledged: Cursor | None = None
        self._verifier = ChainVerifier(
            log.group_id,
            evidence,
            start_sequence=after.next_sequence,
            previous_hash=after.head_hash,
            authority=authority,
        )
        self._buffer: deque[LogEntry] = deque()
        # Signing hashes of the entries passed since the last acknowledgement: ack checks them.
        self._unacknowledged: dict[int, str] = {}
        if after.head_hash is not None:
            self._unacknowledged[after.sequence] = after.head_hash
        self._fault: DeliveryError | None = None
        self._closed = False
        self._wake = asyncio.Event()

    def __repr__(self) -> str:
        return f"GroupSubscription({self.group_id!r} at {self._position.sequence})"

    @property
    def group_id(self) -> str:
        return self.log.group_id

    @property
    def position(self) -> Cursor:
        return self._position

    @property
    def acknowledged(self) -> Cursor | None:
        return self._acknowledged

    # --- iteration --------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[DeliveredEvent]:
        return self

    async def __anext__(self) -> DeliveredEvent:
        while True:
            if self._fault is not None:
                raise self._fault
            if self._closed:
                raise StopAsyncIteration
            while self._buffer:
                delivered = self._pass(self._buffer.popleft())
                if delivered is not None:
                    return delivered
            entries = await asyncio.to_thread(
                self.log.read, self._position.sequence, self.batch_size
            )
            if entries:
                self._buffer.extend(entries)
                continue
            if not self.follow:
                raise StopAsyncIteration
            await self._wait()

    def _pass(self, entry: LogEntry) -> DeliveredEvent | None:
        """Verify the next entry; the Event to hand out, or None for a duplicate."""
        fault = self._verifier.feed(entry, key_sequence=entry.sequence)
        if fault is not None:
            self._buffer.clear()
            self._fault = DeliveryError(self.group_id, fault)
            raise self._fault
        head = entry.signing_hash
        self._position = Cursor(self.group_id, entry.sequence, head)
        self._unacknowledged[entry.sequence] = head
        if entry.event_id in self.dedupe:
            self.duplicates_skipped += 1
            return None
        self.dedupe.add(entry.event_id)
        return DeliveredEvent(entry.event, self.group_id, entry.sequence, entry.event_id, head)

    async def _wait(self) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancellation that lands just
        # as the wake is set, and the ``async for`` then never ends (mwp.gateway.waits).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.poll_interval):
                await self._wake.wait()
        self._wake.clear()

    def notify(self) -> None:
        """Poll now (for example when a mirror in this process appended entries)."""
        self._wake.set()

    def close(self) -> None:
        """End the iteration (a waiting ``async for`` ends at once)."""
        self._closed = True
        self._wake.set()

    async def gap(self) -> int | None:
        """When delivery is held by a gap: the next stored sequence beyond it, else None."""
        store, prefix = self.log.store, self.log.prefix
        after = self.log.key(self._position.next_sequence)
        if await asyncio.to_thread(store.exists, after):
            return None
        keys = await asyncio.to_thread(store.list_keys, prefix, after=after, limit=1)
        if not keys:
            return None
        return sequence_of_key(prefix, keys[0])

    # --- acknowledgement --------------------------------------------------------------------

    async def ack(self, cursor: Cursor | None = None) -> Cursor:
        """Durably record that everything up to ``cursor`` (default: ``position``) is
        processed; returns the stored Cursor. Deletes nothing from the log.

        Only a Cursor this subscription handed out (or started from) is accepted: one beyond
        ``position`` would advance over entries not verified or not yet present.
        """
        cursor = self._position if cursor is None else cursor
        if self.cursor_store is None or self.subscriber is None:
            raise ValueError("this subscription has no cursor store to acknowledge into")
        if cursor.group_id != self.group_id:
            raise ValueError(f"a Cursor of {cursor.group_id}, not of {self.group_id}")
        if cursor.sequence > self._position.sequence:
            raise ValueError(
                f"cannot acknowledge {cursor.sequence}: delivery is at {self._position.sequence}"
            )
        floor = self._acknowledged.sequence if self._acknowledged else self.start.sequence
        if cursor.sequence < floor:
            if self._acknowledged is not None:  # a Cursor never moves back: nothing to do
                return self._acknowledged
            raise ValueError(f"{cursor} is before where this subscription started")
        if cursor.sequence > 0 and self._unacknowledged.get(cursor.sequence) != cursor.head_hash:
            raise ValueError(f"{cursor} is not the entry this subscription delivered there")
        stored = await asyncio.to_thread(self.cursor_store.save, self.subscriber, cursor)
        self._acknowledged = stored
        for sequence in [s for s in self._unacknowledged if s < stored.sequence]:
            del self._unacknowledged[sequence]
        return stored

    # --- reconnecting -----------------------------------------------------------------------

    def reconnect(self, *, after: Cursor | None = None) -> GroupSubscription:
        """A new subscription (this one is closed) from ``after``, else the last Cursor
        acknowledged here, else the stored one, else the start. It shares this one's Event ID
        window, so what was already delivered is not handed out again."""
        self.close()
        return subscribe(
            self.log.store,
            self.group_id,
            self.evidence,
            after=after if after is not None else self._acknowledged,
            cursor_store=self.cursor_store,
            subscriber=self.subscriber,
            poll_interval=self.poll_interval,
            batch_size=self.batch_size,
            authority=self.authority,
            dedupe=self.dedupe,
            follow=self.follow,
            log=self.log,
        )

    async def recover(self, error: MwpError) -> tuple[RestoredGroup, GroupSubscription]:
        """After ``CURSOR_TOO_OLD``: verify and restore the snapshot it references, and return
        the restored Group with a subscription resuming after the snapshot's sequence (chained
        on its head hash). Acknowledge once the restored state is adopted. Raises
        :class:`~mwp.core.log.group_snapshot.SnapshotError` when the snapshot does not verify."""
        from mwp.log.compaction import restore_from_snapshot

        if error.code is not ErrorCode.CURSOR_TOO_OLD or error.group_id != self.group_id:
            raise error
        restored = await asyncio.to_thread(
            restore_from_snapshot,
            self.log.store,
            self.evidence,
            error,
            authority=self.authority,
        )
        return restored, self.reconnect(after=restored.cursor)


def subscribe(
    store: ObjectStore,
    group_id: str,
    evidence: RegistryEvidence,
    *,
    after: Cursor | None = None,
    cursor_store: CursorStore | None = None,
    subscriber: str | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    batch_size: int = DEFAULT_BATCH_SIZE,
    authority: Principal | None = None,
    dedupe: EventIdWindow | None = None,
    follow: bool = True,
    log: GroupEventLog | None = None,
) -> GroupSubscription:
    """Subscribe to ``group_id``'s log in ``store`` after ``after``.

    Without ``after`` the subscription resumes after the subscriber's stored Cursor (one read
    of ``cursor_store``), else from the start of the Group. ``authority`` also requires every
    Event to be accepted by that Principal. With ``follow=False`` iteration ends when the
    stored log is exhausted (or held by a gap) instead of polling for more.
    """
    if after is None and cursor_store is not None and subscriber is not None:
        after = cursor_store.load(group_id, subscriber)
    return GroupSubscription(
        log if log is not None else GroupEventLog(store, group_id),
        evidence,
        after=after if after is not None else Cursor.start(group_id),
        cursor_store=cursor_store,
        subscriber=subscriber,
        poll_interval=poll_interval,
        batch_size=batch_size,
        authority=authority,
        dedupe=dedupe,
        follow=follow,
    )
