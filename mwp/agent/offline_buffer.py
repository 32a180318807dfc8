"""What a runtime's runs buffered while the Group was unreachable, until it is decided
(spec 11.5; MWP-WRK-021).

A run buffers under its own Session; once the runtime reconnected under a newer one that
Session is over (the Group revoked its leases), so :meth:`OfflineBuffer.drain` seals it: a run
still going is refused more buffering (``WORK_LEASE_EXPIRED``) and stops.

With a ``journal`` (the agent's own store, as `mwp agent run` passes it) each entry is also
written there, write-once, under ``offline-buffer/<agent>/``, and marked ``.decided`` once the
Group decided it: a runtime that died offline reconciles, under its next Session, what the dead
one buffered (the Group then judges it by the lease and grace it names, as any other). Agents
run from one state folder share its store, so each reads only its own segment; entries written
before there were segments (flat under ``offline-buffer/``) are taken only where the buffered
Command is the agent's own, so an upgraded runtime still reconciles what it left there.
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Final

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.event_log import group_segment
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = ("MWP-WRK-021",)

JOURNAL_PREFIX: Final = "offline-buffer/"
DECIDED: Final = ".decided"


@dataclass(frozen=True, slots=True)
class Buffered:
    """One buffered Command, and the checkpoint state it names (canonical JSON bytes, uploaded
    before the Command is reconciled), if any; ``key``: where the journal holds it."""

    command: dict[str, Any]
    checkpoint: bytes | None = None
    key: str | None = None


@dataclass
class OfflineBuffer:
    """The runtime's buffered Commands (see the module docstring)."""

    journal: ObjectStore | None = None
    agent_id: str = ""  # whose buffer: names its journal segment
    _entries: list[tuple[int, Buffered]] = field(default_factory=list)
    _sealed_below: int = 0  # Sessions before this one buffer no more

    def keep(self, session_epoch: int, entry: Buffered) -> None:
        if self.sealed(session_epoch):
            raise MwpError(
                ErrorCode.WORK_LEASE_EXPIRED,
                f"the runtime reconnected under Session {self._sealed_below}: "
                f"Session {session_epoch}'s lease is over",
            )
        if self.journal is not None:
            # Named in buffering order (nanoseconds, then a random tail for uniqueness).
            key = f"{self._prefix}{time.time_ns():020d}-{uuid.uuid4().hex}.json"
            self.journal.put_if_absent(key, _document(session_epoch, entry))
            entry = replace(entry, key=key)
        self._entries.append((session_epoch, entry))

    def sealed(self, session_epoch: int) -> bool:
        return session_epoch < self._sealed_below

    def drain(self, session_epoch: int) -> list[Buffered]:
        """Everything buffered before ``session_epoch`` and not decided yet, in buffering
        order, this process's and, from the journal, earlier processes'; those Sessions are
        sealed."""
        self._sealed_below = max(self._sealed_below, session_epoch)
        taken = [entry for epoch, entry in self._entries if epoch < session_epoch]
        self._entries = [(e, entry) for e, entry in self._entries if e >= session_epoch]
        if self.journal is None:
            return taken
        held = {entry.key for entry in taken} | {entry.key for _, entry in self._entries}
        for key in self._journal_keys():
            if key in held or self.journal.exists(key + DECIDED):
                continue
            data = self.journal.get(key)
            if data is None:
                continue
            epoch, entry = _entry(key, data)
            if epoch < session_epoch and self._owns(entry):
                taken.append(entry)
        return sorted(taken, key=lambda entry: _order(entry.key))

    def decided(self, entry: Buffered) -> None:
        """The Group decided ``entry`` (accepted or refused): the journal forgets it."""
        if self.journal is not None and entry.key is not None:
            self.journal.put_if_absent(entry.key + DECIDED, b"")

    def put_back(self, entries: list[Buffered]) -> None:
        """Entries a reconciliation could not send (the new link was lost too): first again."""
        self._entries[:0] = [(self._sealed_below - 1, entry) for entry in entries]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def _prefix(self) -> str:
        return f"{JOURNAL_PREFIX}{group_segment(self.agent_id)}/"

    def _owns(self, entry: Buffered) -> bool:
        """A legacy (flat) entry is this agent's only if it buffered the Command itself."""
        key = entry.key or ""
        if key.startswith(self._prefix):
            return True
        return (entry.command.get("actor") or {}).get("id") == self.agent_id

    def _journal_keys(self) -> list[str]:
        """This agent's segment, and the flat entries from before segments."""
        return self._listed(self._prefix) + [
            k for k in self._listed(JOURNAL_PREFIX) if "/" not in k[len(JOURNAL_PREFIX) :]
        ]

    def _listed(self, prefix: str) -> list[str]:
        assert self.journal is not None
        keys: list[str] = []
        after: str | None = None
        while page := self.journal.list_keys(prefix, after=after):
            keys += [k for k in page if k.endswith(".json")]
            after = page[-1]
        return keys


def _order(key: str | None) -> str:
    """Buffering order, whatever the prefix: the file name starts with its time."""
    return (key or "").rsplit("/", 1)[-1]


def _document(session_epoch: int, entry: Buffered) -> bytes:
    checkpoint = None if entry.checkpoint is None else base64.b64encode(entry.checkpoint).decode()
    return canonicalize(
        {"sessionEpoch": session_epoch, "command": entry.command, "checkpoint": checkpoint}
    )


def _entry(key: str, data: bytes) -> tuple[int, Buffered]:
    doc = parse_bytes(data)
    checkpoint = doc.get("checkpoint")
    state = None if checkpoint is None else base64.b64decode(checkpoint)
    return int(doc["sessionEpoch"]), Buffered(dict(doc["command"]), state, key)
