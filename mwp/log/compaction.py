"""Compaction, signed Group Snapshots and Group archival in the object store.

``compact(log, through, ...)`` verifies the Group's whole history through ``through`` (from
sequence 1, in the archive and the online log), rebuilds the Group state by replaying it,
writes a signed Group Snapshot of that state, copies the online entries up to ``through`` to
the archive prefix, records the compaction, and only then removes those entries from the
online log. Nothing is ever rewritten: the archive keeps the same bytes under the same
sequence, so the authoritative history stays complete and verifiable (spec 16: clean-up never
deletes it). A reader whose Cursor falls below the oldest online entry gets ``CURSOR_TOO_OLD``
with a reference to the newest snapshot (:meth:`mwp.log.group_log.GroupEventLog.read`), restores it
with :func:`restore_from_snapshot` and resumes after its sequence.

``archive_group(log, ...)`` writes the signed final snapshot of a closed Group (spec 7.4): the
same verified replay, plus the Mission, every WorkItem, the decisions, the approvals and the
Artifact references, with the policy-relevant decisions in the snapshot's ``policyLog``.

Layout (next to ``groups/<group>/events/``)::

    groups/<group>/archive/events/<seq>.json        compacted entries, the same bytes
    groups/<group>/snapshots/<seq>.<purpose>.json   signed snapshots (compaction, archival)
    groups/<group>/snapshot-states/<hex>.json       state documents, named by their stateHash
    groups/<group>/compactions/<seq>.json           one record per compaction

A compaction is safe to run again after a crash at any point: every write is idempotent, a
snapshot already stored for the same state is reused, and entries are removed in ascending
order only after their archived copy is confirmed, so the online log always stays one
contiguous run. It assumes one compactor per Group at a time, and keeps the head entry online
(``through`` must be below the last stored sequence) so the mirror can keep chaining on it.

All calls are synchronous (boto3 is); async code runs them with ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import GroupAuthority, replay
from mwp.core.kinds import TERMINAL_MISSION_STATES
from mwp.core.log.cursor import Cursor
from mwp.core.log.event_log import ChainVerifier, EntryError, LogEntry, LogFaultReason, unsealed
from mwp.core.log.group_snapshot import (
    ArchiveProjection,
    SnapshotError,
    SnapshotPurpose,
    SnapshotReference,
    VerifiedSnapshot,
    archive_entry_key,
    archive_prefix,
    build_snapshot,
    canonical_state,
    check_state,
    compaction_key,
    content_hash,
    sign_snapshot,
    snapshot_key,
    state_document,
    state_key,
    verify_snapshot,
)
from mwp.core.trust.registry import Principal, RegistryEvidence, RegistryEvidenceError
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import format_utc
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectConflict, ObjectStore
from mwp.stores.removal import delete_object

CLAUSES: tuple[str, ...] = ("MWP-MSN-009", "MWP-WRK-030")

COMPACTION_FORMAT = "mwp-group-compaction/1"

Json = dict[str, Any]


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did (counts are of this call: a retry finishes what is left)."""

    snapshot: SnapshotReference
    head_hash: str  # the signing hash of the entry at ``snapshot.through_sequence``
    archived: int  # entries newly copied to the archive
    deleted: int  # entries removed from the online log
    oldest_online: int  # the lowest sequence the online log now holds


@dataclass(frozen=True)
class RestoredGroup:
    """A verified snapshot and what it restores: the Group state and where to resume."""

    reference: SnapshotReference
    snapshot: VerifiedSnapshot
    state: Json
    authority: GroupAuthority

    @property
    def cursor(self) -> Cursor:
        """Resume delivery after the snapshot's sequence, chained on its head hash."""
        return self.snapshot.cursor

    @property
    def archive(self) -> Json | None:
        """The final record of an archival snapshot (Mission, WorkItems, decisions, ...)."""
        record = self.state.get("archive")
        return record if isinstance(record, dict) else None


# --- compaction -----------------------------------------------------------------------------


def compact(
    log: GroupEventLog,
    through_sequence: int,
    key_id: str,
    key: SigningKey,
    *,
    evidence: RegistryEvidence,
    authority: Principal | None = None,
    created_at: str | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> CompactionResult:
    """Snapshot the Group through ``through_sequence`` and move those entries to the archive.

    ``key_id``/``key``: the Group Authority's service key (the snapshot's ``createdBy`` is the
    Principal ``evidence`` binds to ``key_id``). ``authority``, when given, is also required as
    the ``acceptedBy`` of every entry. Raises :class:`SnapshotError` (the log is not sound
    through that sequence, cannot be replayed, or a conflicting snapshot or archive object is
    stored), leaving the online log as it was. ``progress(done, total)`` hears of every entry
    verified, then of every entry removed.
    """
    group_id, store = log.group_id, log.store
    signer = _signer(evidence, key_id, key, group_id, authority)
    record_key = compaction_key(group_id, through_sequence)
    first_online = log.first_sequence()
    last = log.last_sequence()
    if store.exists(record_key):  # a retry: finish what that compaction started
        record = _load_record(store, record_key, group_id)
        steps = _Steps(progress, _removals(record["throughSequence"], first_online))
        return _finish(log, record, first_online, 0, steps)
    if through_sequence < 1 or through_sequence >= last:
        raise SnapshotError(
            "bad-request",
            f"through {through_sequence}: the head entry ({last}) stays online",
            group_id=group_id,
            code=ErrorCode.INVALID_COMMAND,
        )
    if first_online is not None and first_online > through_sequence + 1:
        raise SnapshotError(
            "bad-request",
            f"already compacted: the online log starts at {first_online}",
            group_id=group_id,
            code=ErrorCode.INVALID_COMMAND,
        )

    archived = 0

    def archive_online(sequence: int, data: bytes, from_archive: bool) -> None:
        nonlocal archived
        if not from_archive:
            try:
                archived += store.put_if_absent(archive_entry_key(group_id, sequence), data)
            except ObjectConflict:
                raise SnapshotError(
                    "conflict", f"the archive holds other bytes for {sequence}", group_id=group_id
                ) from None

    steps = _Steps(progress, through_sequence + _removals(through_sequence, first_online))
    history = _VerifiedHistory(
        log, through_sequence, evidence, authority, archive_online, on_progress=steps
    )
    group = _replay(history, group_id)
    state = state_document(
        group_id,
        through_sequence,
        history.head_hash,
        SnapshotPurpose.COMPACTION,
        group.snapshot(),
    )
    reference = _store_snapshot(
        log,
        state,
        history,
        SnapshotPurpose.COMPACTION,
        signer,
        key_id,
        key,
        evidence,
        created_at,
        (),
    )
    record = {
        "format": COMPACTION_FORMAT,
        "groupId": group_id,
        "throughSequence": through_sequence,
        "oldestOnlineSequence": through_sequence + 1,
        "headSigningHash": history.head_hash,
        "snapshot": reference.to_json(),
        "archivePrefix": archive_prefix(group_id),
    }
    try:
        store.put_if_absent(record_key, canonicalize(record))
    except ObjectConflict:
        raise SnapshotError("conflict", "another compaction record", group_id=group_id) from None
    return _finish(log, record, first_online, archived, steps)


class _Steps:
    """Counts an operation's steps for its ``progress`` callback (which may be None)."""

    def __init__(self, progress: Callable[[int, int | None], None] | None, total: int) -> None:
        self.progress, self.done, self.total = progress, 0, total

    def __call__(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)


def _removals(through: int, first_online: int | None) -> int:
    """How many online entries a compaction through ``through`` removes."""
    return max(0, through - (first_online or through + 1) + 1)


def _finish(
    log: GroupEventLog,
    record: Mapping[str, Any],
    first_online: int | None,
    archived: int,
    steps: _Steps,
) -> CompactionResult:
    """Remove the online entries the record covers, lowest first, each only once its archived
    copy holds the same bytes (so the online log stays contiguous whatever happens)."""
    group_id, store = log.group_id, log.store
    through = record["throughSequence"]
    deleted = 0
    for sequence in range(first_online or through + 1, through + 1):
        online = store.get(log.key(sequence))
        if online is None:
            continue
        copy = store.get(archive_entry_key(group_id, sequence))
        if copy is None:
            archived += store.put_if_absent(archive_entry_key(group_id, sequence), online)
        elif copy != online:
            raise SnapshotError(
                "conflict", f"the archive holds other bytes for {sequence}", group_id=group_id
            )
        deleted += delete_object(store, log.key(sequence))
        steps()
    reference = SnapshotReference.from_json(group_id, record["snapshot"])
    return CompactionResult(
        snapshot=reference,
        head_hash=record["headSigningHash"],
        archived=archived,
        deleted=deleted,
        oldest_online=log.first_sequence() or through + 1,
    )


def _load_record(store: ObjectStore, key: str, group_id: str) -> Json:
    from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes

    data = store.get(key)
    try:
        record = parse_bytes(data) if data is not None else None
    except JsonSyntaxError:
        record = None
    if not isinstance(record, dict) or record.get("format") != COMPACTION_FORMAT:
        raise SnapshotError("malformed", f"not a compaction record: {key}", group_id=group_id)
    return record


# --- archival -------------------------------------------------------------------------------


def archive_group(
    log: GroupEventLog,
    key_id: str,
    key: SigningKey,
    *,
    evidence: RegistryEvidence,
    authority: Principal | None = None,
    created_at: str | None = None,
    require_closed: bool = True,
    progress: Callable[[int, int | None], None] | None = None,
) -> SnapshotReference:
    """Write the signed final snapshot of the Group through its last stored sequence.

    Verifies and replays the whole history; the state document adds the Mission, every
    WorkItem, the decisions, the approvals and every Artifact reference. Refused with
    ``INVALID_STATE_TRANSITION`` while the Mission is not closed (unless ``require_closed`` is
    False). Idempotent: an equal final snapshot already stored is returned as it is. Deletes
    nothing. ``progress(done, total)`` hears of every entry verified.
    """
    group_id = log.group_id
    signer = _signer(evidence, key_id, key, group_id, authority)
    last = log.last_sequence()
    if last == 0:
        raise SnapshotError(
            "bad-request", "no entries", group_id=group_id, code=ErrorCode.GROUP_NOT_FOUND
        )
    projection = ArchiveProjection()
    history = _VerifiedHistory(
        log, last, evidence, authority, None, projection.add, on_progress=_Steps(progress, last)
    )
    group = _replay(history, group_id)
    mission = group.mission_view()
    if require_closed and mission.get("state") not in TERMINAL_MISSION_STATES:
        raise SnapshotError(
            "not-closed",
            f"the Mission is {mission.get('state') or 'absent'}",
            group_id=group_id,
            code=ErrorCode.INVALID_STATE_TRANSITION,
        )
    work_items = [group.work_item_view(item) for item in group.work_item_ids()]
    state = state_document(
        group_id,
        last,
        history.head_hash,
        SnapshotPurpose.ARCHIVAL,
        group.snapshot(),
        projection.record(mission, work_items),
    )
    return _store_snapshot(
        log,
        state,
        history,
        SnapshotPurpose.ARCHIVAL,
        signer,
        key_id,
        key,
        evidence,
        created_at,
        projection.policy_entries,
    )


# --- restoring ------------------------------------------------------------------------------


def restore_from_snapshot(
    store: ObjectStore,
    evidence: RegistryEvidence,
    reference: SnapshotReference | MwpError,
    *,
    authority: Principal | None = None,
) -> RestoredGroup:
    """Fetch, verify and restore the snapshot a reference (or a ``CURSOR_TOO_OLD``) names.

    Checks the stored bytes against the referenced hash, the signature in six stages against
    ``evidence`` (and the signer, when ``authority`` is given), the snapshot's own decision
    entry, the state document against ``stateHash``, and that the restored Group state is the
    Group at that sequence. Raises :class:`SnapshotError` on any mismatch.
    """
    if isinstance(reference, MwpError):
        reference = SnapshotReference.from_error(reference)
    group_id = reference.group_id
    data = store.get(reference.key)
    if data is None:
        raise SnapshotError("missing", reference.key, group_id=group_id)
    verified = verify_snapshot(
        data,
        evidence,
        group_id=group_id,
        expected_hash=reference.snapshot_hash,
        through_sequence=reference.through_sequence,
        purpose=reference.purpose,
        authority=authority,
    )
    state_data = store.get(state_key(group_id, verified.state_hash))
    if state_data is None:
        raise SnapshotError("state-missing", verified.state_hash, group_id=group_id)
    state = check_state(verified, state_data)
    try:
        group = GroupAuthority.restore(state["authority"])
        restored_group, restored_sequence = group.group_id, group.sequence
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError("malformed", f"Group state: {exc}", group_id=group_id) from None
    if restored_group != group_id or restored_sequence != verified.through_sequence:
        raise SnapshotError(
            "state-mismatch",
            f"the state is {restored_group}@{restored_sequence}",
            group_id=group_id,
        )
    return RestoredGroup(reference, verified, state, group)


def latest_snapshot(store: ObjectStore, group_id: str) -> SnapshotReference | None:
    """The newest snapshot stored for the Group (a reference; restore verifies it)."""
    return GroupEventLog(store, group_id).latest_snapshot()


# --- internals ------------------------------------------------------------------------------


def _signer(
    evidence: RegistryEvidence,
    key_id: str,
    key: SigningKey,
    group_id: str,
    authority: Principal | None,
) -> Principal:
    try:
        binding = evidence.resolve(key_id)
    except RegistryEvidenceError as exc:
        raise SnapshotError(
            "bad-request", f"key {key_id}: {exc.reason}", group_id=group_id
        ) from None
    if binding.public_key != key.public_key:
        raise SnapshotError(
            "bad-request",
            f"the key is not the one bound to {key_id}",
            group_id=group_id,
            code=ErrorCode.AUTH_FORBIDDEN,
        )
    if binding.principal.type != "service":
        raise SnapshotError(
            "bad-request",
            "a Group Snapshot is signed by a service",
            group_id=group_id,
            code=ErrorCode.AUTH_FORBIDDEN,
        )
    if authority is not None and binding.principal != authority:
        raise SnapshotError(
            "bad-request",
            f"{key_id} is not the Group Authority's key",
            group_id=group_id,
            code=ErrorCode.AUTH_FORBIDDEN,
        )
    return binding.principal


class _VerifiedHistory:
    """Iterates the unsigned Events 1..through, each verified (signature, chain, Group,
    contiguity) before it is handed out; a fault raises :class:`SnapshotError`."""

    def __init__(
        self,
        log: GroupEventLog,
        through: int,
        evidence: RegistryEvidence,
        authority: Principal | None,
        on_entry: Callable[[int, bytes, bool], None] | None,
        on_event: Callable[[Mapping[str, Any]], None] | None = None,
        *,
        on_progress: Callable[[], None] | None = None,
    ) -> None:
        self.log = log
        self.through = through
        self.verifier = ChainVerifier(log.group_id, evidence, authority=authority)
        self.on_entry = on_entry
        self.on_event = on_event
        self.on_progress = on_progress
        self.event_ids: list[str] = []
        self.head_hash = ""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        log, group_id = self.log, self.log.group_id
        first_online = log.first_sequence() or self.through + 1
        keys = (
            archive_entry_key(group_id, s) if s < first_online else log.key(s)
            for s in range(1, self.through + 1)
        )
        for sequence, (key, stored) in enumerate(log.read_objects(keys), start=1):
            data, from_archive = stored, key != log.key(sequence)
            if data is None and not from_archive:  # compacted meanwhile: it was moved
                data, from_archive = log.store.get(archive_entry_key(group_id, sequence)), True
            if data is None:
                self._fail(self.verifier.missing())
                return
            try:
                entry = LogEntry.from_bytes(data)
            except EntryError as exc:
                self._fail(self.verifier.reject(LogFaultReason.UNREADABLE, exc.reason))
                return
            fault = self.verifier.feed(entry, key_sequence=sequence)
            if fault is not None:
                self._fail(fault)
                return
            if self.on_entry is not None:
                self.on_entry(sequence, data, from_archive)
            self.event_ids.append(entry.event_id)
            self.head_hash = entry.signing_hash
            event = unsealed(entry.event)
            if self.on_event is not None:
                self.on_event(event)
            if self.on_progress is not None:
                self.on_progress()
            yield event

    def _fail(self, fault: Any) -> None:
        raise SnapshotError("log-fault", str(fault), group_id=self.log.group_id)


def _replay(history: _VerifiedHistory, group_id: str) -> GroupAuthority:
    try:
        group = replay(history)
    except SnapshotError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError("replay", f"{type(exc).__name__}: {exc}", group_id=group_id) from None
    if group.sequence != history.through or len(history.event_ids) != history.through:
        raise SnapshotError("replay", "the replay stopped early", group_id=group_id)
    return group


def _store_snapshot(
    log: GroupEventLog,
    state: Json,
    history: _VerifiedHistory,
    purpose: SnapshotPurpose,
    signer: Principal,
    key_id: str,
    key: SigningKey,
    evidence: RegistryEvidence,
    created_at: str | None,
    policy_entries: Any,
) -> SnapshotReference:
    """Write the state document and the signed snapshot; reuse an equal one already stored."""
    group_id, store, through = log.group_id, log.store, history.through
    state_bytes = canonical_state(state)
    state_hash = content_hash(state_bytes)
    store.put_if_absent(state_key(group_id, state_hash), state_bytes)  # content-addressed
    unsigned = build_snapshot(
        group_id=group_id,
        through_sequence=through,
        event_ids=history.event_ids,
        state_bytes=state_bytes,
        head_hash=history.head_hash,
        purpose=purpose,
        created_by=signer,
        created_at=created_at or format_utc(datetime.now(UTC).replace(microsecond=0)),
        policy_entries=policy_entries,
    )
    data = sign_snapshot(unsigned, key_id, key)
    target = snapshot_key(group_id, through, purpose)
    try:
        store.put_if_absent(target, data)
    except ObjectConflict:  # made before (another time): the same state is the same snapshot
        data = store.get(target) or b""
        existing = verify_snapshot(
            data, evidence, group_id=group_id, through_sequence=through, purpose=purpose
        )
        if existing.state_hash != state_hash or existing.head_hash != history.head_hash:
            raise SnapshotError(
                "conflict", f"another snapshot is stored at {target}", group_id=group_id
            ) from None
    return SnapshotReference(group_id, target, through, purpose, content_hash(data))


# --- recording the archive ------------------------------------------------------------------


@dataclass(frozen=True)
class FinalSnapshot:
    """What the archive Command carries, read back from the store: the signed final snapshot
    and the Mission whose workflow decides for the Group."""

    document: Json
    mission_id: str


def final_snapshot(log: GroupEventLog, reference: SnapshotReference) -> FinalSnapshot:
    """The signed final snapshot ``archive_group`` stored, checked against its reference's
    hash, and the Mission ID its state document names."""
    from mwp.core.wire.strict_json import parse_bytes

    group_id, store = log.group_id, log.store
    data = store.get(reference.key)
    if data is None or content_hash(data) != reference.snapshot_hash:
        raise SnapshotError("content-hash", "the stored final snapshot changed", group_id=group_id)
    document: Json = parse_bytes(data)
    state = store.get(state_key(group_id, document["stateHash"]))
    if state is None or content_hash(state) != document["stateHash"]:
        raise SnapshotError("content-hash", "the snapshot's state document", group_id=group_id)
    mission_id: str = parse_bytes(state)["archive"]["mission"]["missionId"]
    return FinalSnapshot(document, mission_id)
