"""A Group's whole history read as one log: the entries a compaction moved to the archive
(the same bytes under the same sequence), then the online log.

A subscriber outside the authority zone gets ``CURSOR_TOO_OLD`` below the online log and
restores a snapshot. Readers inside it cannot: the gateway derives every Membership from the
Group's first Event (MWP-MSN-012) and the Registry's performance records count every outcome
(MWP-IDN-004), so a snapshot would not tell them who may read which Event. Compaction copies
each entry to the archive before it removes it (:mod:`mwp.log.compaction`), so the whole
history stays readable there; an entry missing from both is still ``CURSOR_TOO_OLD``.
"""

from __future__ import annotations

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.event_log import LogEntry
from mwp.core.log.group_snapshot import archive_entry_key
from mwp.log.group_log import GroupEventLog

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-IDN-004")


class WholeGroupHistory(GroupEventLog):
    """:class:`GroupEventLog` that reads below the online log from the Group's archive."""

    def get(self, sequence: int) -> LogEntry | None:
        online = super().get(sequence)
        if online is not None:
            return online
        data = self.store.get(archive_entry_key(self.group_id, sequence))
        return None if data is None else self._parse(sequence, data)

    def read(self, after_sequence: int = 0, limit: int = 1000) -> list[LogEntry]:
        try:
            return super().read(after_sequence, limit)
        except MwpError as exc:
            if exc.code is not ErrorCode.CURSOR_TOO_OLD:
                raise
            archived = self._archived(after_sequence + 1, _first_online(exc), limit)
            if not archived:
                raise
            return archived

    def _archived(self, start: int, first_online: int, limit: int) -> list[LogEntry]:
        """Archived entries from ``start``, up to the online log, stopping at a hole."""
        stop = min(first_online, start + limit)
        keys = [archive_entry_key(self.group_id, s) for s in range(start, stop)]
        entries: list[LogEntry] = []
        for sequence, (_, data) in enumerate(self.read_objects(keys), start=start):
            if data is None:
                break
            entries.append(self._parse(sequence, data))
        return entries


def _first_online(error: MwpError) -> int:
    return int((error.details or {})["firstSequence"])
