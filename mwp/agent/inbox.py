"""The agent's per-Group inboxes (MWP-WRK-008): verified Group Events after each Cursor,
handed in order to the Worker Scheduler.

:class:`GroupInboxes` finds every Group log in the object store, reads each one after the
Cursor the Scheduler last acknowledged (so a Scheduler that lost its state, or continued as
new, is rebuilt by replay from sequence 1), verifies every Event with the Organization's
Registry evidence and the hash chain (:func:`mwp.log.delivery.subscribe`), and passes batches to
``deliver``. Only what the Scheduler projects is passed on: the Event kinds it reads, with the
members it reads, so a busy Group does not fill the AgentWorkflow's history with signatures.
The Group Event log stays authoritative; the inbox holds no state of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote

from mwp.core.kinds import EventKind
from mwp.core.log.cursor import Cursor
from mwp.core.scheduler.group_queue import SCHEDULED_KINDS
from mwp.core.scheduler.metadata import scheduling_metadata
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.log.delivery import DeliveryError, subscribe
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = ("MWP-WRK-008",)

Json = dict[str, Any]
log = logging.getLogger(__name__)

GROUPS_PREFIX = "groups/"
DEFAULT_BATCH = 200


def slim(event: Mapping[str, Any]) -> Json:
    """What the Scheduler may read of an Event, its scheduling metadata only (MWP-WRK-028):
    what the AgentWorkflow's history carries, and replays after a rollover, stays small and
    holds none of the Mission's content."""
    return scheduling_metadata(event)


# Kinds the Scheduler reads only for this Agent's own items: another agent's are skipped.
_OWNER_KINDS: frozenset[EventKind] = frozenset(
    {
        "work.started",
        "work.blocked",
        "work.submitted",
        "ext.missionweaveprotocol.core.schedule_disclosed",
    }
)


def concerns(event: Mapping[str, Any], agent_id: str) -> bool:
    """Whether the Scheduler of ``agent_id`` needs ``event`` (a kind it reads, and not a
    renewal without a checkpoint or another owner's transition of its own item)."""
    kind = event["kind"]
    if kind not in SCHEDULED_KINDS:
        return False
    if kind == "work.progressed":
        return "checkpointRef" in event.get("payload", {})  # a checkpoint anyone may resume
    if kind in _OWNER_KINDS:
        return bool(event.get("actor", {}).get("id") == agent_id)
    return True


def _founded_mission(event: Mapping[str, Any]) -> str | None:
    """The Mission ID a Group's founding Event names (Events themselves carry only the Group)."""
    mission = event.get("payload", {}).get("mission")
    if isinstance(mission, dict) and isinstance(mission.get("missionId"), str):
        return str(mission["missionId"])
    return None


def list_group_ids(store: ObjectStore) -> list[str]:
    """The Groups that have a log in ``store`` (hashed segments of over-long IDs are skipped:
    their ID cannot be read back from the key)."""
    return [unquote(name) for name in store.list_folders(GROUPS_PREFIX) if "%3A" in name]


class GroupInboxes:
    """Feeds a Worker Scheduler from the Group logs (see the module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        evidence: Callable[[], Awaitable[RegistryEvidence]],
        cursors: Callable[[], Awaitable[Mapping[str, Json]]],
        deliver: Callable[[Json], Awaitable[None]],
        *,
        authority: Principal,
        agent_id: str,
        poll_interval: float = 0.5,
        batch_size: int = DEFAULT_BATCH,
        concurrency: int = 8,
    ) -> None:
        self.store = store
        self.agent_id = agent_id
        self._authority = authority.to_json()
        self._groups: dict[str, bool] = {}  # Group -> accepted by our Authority
        self._missions: dict[str, str] = {}  # Group -> the Mission its founding Event names
        # Group -> (the Cursor last signalled, the Cursor read up to): Events that concern the
        # Scheduler are signalled, the rest only advance the reading position.
        self._read: dict[str, tuple[Json | None, Cursor]] = {}
        self._evidence_source = evidence
        self._cursors = cursors
        self._deliver = deliver
        self.poll_interval = poll_interval
        self.batch_size = batch_size
        self.concurrency = concurrency
        self._evidence: RegistryEvidence | None = None
        self.delivered = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; a failing round is logged and retried."""
        while not stop.is_set():
            try:
                await self.poll_once()
            except Exception:  # the next round retries: storage or Temporal may be back
                log.exception("inbox round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.poll_interval)

    async def poll_once(self) -> int:
        """Deliver what every Group log holds after its Cursor; how many Events."""
        groups = await asyncio.to_thread(list_group_ids, self.store)
        if not groups:
            return 0
        cursors = await self._cursors()
        # Groups are drained concurrently (each one in order): a round costs about one
        # signal round trip, and the signals of a round land in few workflow tasks.
        limit = asyncio.Semaphore(self.concurrency)

        async def drain(group_id: str) -> int:
            async with limit:
                return await self._drain_group(group_id, cursors.get(group_id))

        delivered = sum(await asyncio.gather(*(drain(g) for g in groups)))
        self.delivered += delivered
        return delivered

    async def _drain_group(self, group_id: str, stored: Json | None) -> int:
        if not await self._ours(group_id):
            return 0
        after = Cursor.from_json(stored) if stored else Cursor.start(group_id)
        read = self._read.get(group_id)
        if read is not None and read[0] == stored:
            # The Scheduler holds everything signalled; Events read since then concerned it
            # not, so reading resumes after them. A Scheduler that lost its state (a new run)
            # holds another Cursor and is fed again from its own.
            after = read[1]
        try:
            return await self._drain(group_id, after, stored)
        except DeliveryError:
            # A key the Registry evidence does not know yet: refresh it once.
            self._evidence = None
            try:
                return await self._drain(group_id, after, stored)
            except DeliveryError:
                log.warning("Group %s: its log does not verify; holding it", group_id)
                return 0

    async def _ours(self, group_id: str) -> bool:
        """Whether ``group_id``'s Events are accepted by this Organization's Group Authority
        (a shared store may hold other Organizations' Groups; they are never read)."""
        known = self._groups.get(group_id)
        if known is None:
            first = await asyncio.to_thread(GroupEventLog(self.store, group_id).get, 1)
            if first is None:
                return False  # not written yet (or compacted: then not served here)
            known = self._groups[group_id] = first.event.get("acceptedBy") == self._authority
        return known

    async def _drain(self, group_id: str, after: Cursor, held: Json | None) -> int:
        """Read after ``after``; ``held`` is the Cursor the Scheduler holds (its batches apply
        only on top of it)."""
        if self._evidence is None:
            self._evidence = await self._evidence_source()
        subscription = subscribe(
            self.store,
            group_id,
            self._evidence,
            after=after,
            follow=False,
            authority=Principal.from_json(self._authority),
            batch_size=self.batch_size,
        )
        batch: list[Json] = []
        count = 0
        cursor = after
        async for delivered in subscription:
            event = delivered.event
            if group_id not in self._missions:
                founded = _founded_mission(event)
                if founded is not None:
                    self._missions[group_id] = founded
            cursor = delivered.cursor
            count += 1
            if concerns(event, self.agent_id):
                batch.append(slim(event))
            if len(batch) >= self.batch_size:
                held = await self._send(group_id, batch, cursor, held)
                batch = []
        if batch:
            await self._send(group_id, batch, cursor, held)
        elif cursor != after:
            # Nothing for the Scheduler: no signal, only the inbox's own reading position.
            self._read[group_id] = (held, cursor)
        return count

    async def _send(
        self, group_id: str, events: list[Json], cursor: Cursor, held: Json | None
    ) -> Json:
        """Signal ``events``, to be applied only if the Scheduler still holds ``held`` (a
        Scheduler that rolled over since the Cursors were read ignores the batch, and the next
        round feeds it from its own Cursor); the Cursor it holds after them."""
        after = cursor.to_json()
        await self._deliver(
            {
                "groupId": group_id,
                "missionId": self._missions.get(group_id, ""),
                "events": events,
                "held": held,
                "cursor": after,
            }
        )
        self._read[group_id] = (after, cursor)
        return after
