"""The mirror: signs accepted Events with their Group Authority's key and appends them to the
Group Event log (an object store: a folder or S3).

A MissionWorkflow keeps every accepted Event in its outbox until this activity confirms it.
The activity is idempotent (``GroupEventLog.seal_and_append`` writes each sequence at most
once and Ed25519 signatures are deterministic), so a retry after a crash anywhere, or a batch
re-sent by the next run after continue-as-new, writes exactly the same bytes or nothing.
The batch itself is the activity's input in workflow history: ``mwp log rebuild`` reads the
log back from there.

After each appended batch it publishes a content-free hint ``(groupId, lastSequence)``
(:mod:`mwp.gateway.hints`), so gateways read the new entries at once instead of polling.
"""

from __future__ import annotations

from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mwp.contracts.mission import MIRROR_EVENTS, MirrorBatch
from mwp.gateway.hints import publish_appended
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
        identity = self.keyring.get(batch.authority_id)
        if identity is None:
            # Retried: the mirror catches up once the Organization is provisioned.
            raise ApplicationError(
                f"no signing key for Group Authority {batch.authority_id} in "
                f"{self.keyring.directory}",
                type="AuthorityKeyMissing",
            )
        log = GroupEventLog(self.store, batch.group_id)
        result = log.seal_and_append(batch.events, identity.key_id, identity.key)
        assert result.last_sequence is not None
        publish_appended(batch.group_id, result.last_sequence)
        return result.last_sequence
