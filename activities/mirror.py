"""The mirror: signs accepted Events with their Group Authority's key and appends them to the
Group Event log (an object store: a folder or S3).

A MissionWorkflow keeps every accepted Event in its outbox until this activity confirms it.
The activity is idempotent (``GroupEventLog.seal_and_append`` writes each sequence at most
once and Ed25519 signatures are deterministic), so a retry after a crash anywhere, or a batch
re-sent by the next run after continue-as-new, writes exactly the same bytes or nothing.
The batch itself is the activity's input in workflow history: ``mwp log rebuild`` reads the
log back from there.

``archive_group`` is the archival service a closed Group calls when its retention window ends
unarchived: it verifies the Group's whole log, stores the signed final snapshot
(:func:`mwp.log.compaction.archive_group`, idempotent) and returns the archive Command the
workflow then decides, signed by the same Group Authority key.

After each appended batch it publishes a content-free hint ``(groupId, lastSequence)`` naming
the Group Authority (:mod:`mwp.gateway.hints`), so gateways read the new entries at once
instead of polling, and gateways of other Organizations leave them alone.
"""

from __future__ import annotations

from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mwp.client.identity import Identity, wire_text
from mwp.contracts.mission import ARCHIVE_GROUP, MIRROR_EVENTS, ArchiveRequest, MirrorBatch
from mwp.core.group.archive import GROUP_ARCHIVE_KIND, compact_snapshot
from mwp.core.log.group_snapshot import SnapshotError
from mwp.core.trust.registry import RegistryEvidence
from mwp.gateway.hints import publish_appended
from mwp.log.compaction import archive_group, final_snapshot
from mwp.log.group_log import GroupEventLog
from mwp.log.keys import AuthorityKeyring
from mwp.stores.objects import ObjectStore, S3ObjectStore, open_store


class Mirror:
    """The activity, bound to the log store and the worker's authority keyring."""

    def __init__(self, store: ObjectStore, keyring: AuthorityKeyring) -> None:
        self.store = store
        self.keyring = keyring

    @classmethod
    def open(cls, location: str | Path, state_dir: Path) -> Mirror:
        """The mirror of a worker: the log store at ``location`` (a folder or
        ``s3://bucket/prefix``; a missing bucket is created) and the keyring in ``state_dir``."""
        store = open_store(location)
        if isinstance(store, S3ObjectStore):
            store.ensure_bucket()  # a fresh S3 server has no bucket yet
        return cls(store, AuthorityKeyring.in_state_dir(state_dir))

    @activity.defn(name=MIRROR_EVENTS)
    def mirror_events(self, batch: MirrorBatch) -> int:
        """Seal and append the batch; the last sequence now in the log."""
        identity = self._identity(batch.authority_id)
        log = GroupEventLog(self.store, batch.group_id)
        result = log.seal_and_append(batch.events, identity.key_id, identity.key)
        assert result.last_sequence is not None
        publish_appended(batch.group_id, result.last_sequence, batch.authority_id)
        return result.last_sequence

    @activity.defn(name=ARCHIVE_GROUP)
    def archive_group(self, request: ArchiveRequest) -> str:
        """Store the closed Group's signed final snapshot through ``through_sequence``; the
        compact archive Command that records it, as wire text. A refused snapshot (the log
        does not verify, the Mission is not closed) fails without retry."""
        identity = self._identity(request.authority_id)
        log = GroupEventLog(self.store, request.group_id)
        last = log.last_sequence()
        if last != request.through_sequence:
            # Retried: the mirror has not written the last Events yet.
            raise ApplicationError(
                f"the Group Event log holds {last} of {request.through_sequence} Events",
                type="LogBehind",
            )
        try:
            reference = archive_group(
                log,
                identity.key_id,
                identity.key,
                evidence=RegistryEvidence.from_json(request.evidence),
                progress=lambda done, total: activity.heartbeat(done),
            )
            document = final_snapshot(log, reference).document
        except SnapshotError as exc:
            raise ApplicationError(str(exc), type="SnapshotRefused", non_retryable=True) from exc
        command = identity.command(
            GROUP_ARCHIVE_KIND, {"snapshot": compact_snapshot(document)}, group_id=log.group_id
        )
        return wire_text(command)

    def _identity(self, authority_id: str) -> Identity:
        identity = self.keyring.get(authority_id)
        if identity is None:
            # Retried: the mirror catches up once the Organization is provisioned.
            raise ApplicationError(
                f"no signing key for Group Authority {authority_id} in {self.keyring.directory}",
                type="AuthorityKeyMissing",
            )
        return identity
