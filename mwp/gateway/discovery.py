"""Standing subscriptions: an Agent's Events of every Group it is a member of.

A SUBSCRIBE entry whose ``groupId`` is :data:`MEMBER_GROUPS` asks for every Group in which the
connection's Agent holds or held a Membership, each delivered as an ordinary SUBSCRIBE of that
Group would be, from the Agent's stored Cursor. An agent outside the authority zone learns of a
Group it was admitted to, or offered work in, this way.

:class:`Discovery` finds the Groups. While any connection stands subscribed it holds a reader
(the shared :class:`~mwp.gateway.subscriptions.Readers`) of every Group it knows of, so that a
Membership granted later is seen as soon as the reader has it:

* at each standing SUBSCRIBE, the running MissionWorkflows' Groups (``Authority.running_groups``,
  Temporal visibility), read a few at a time;
* a hint for a Group it does not hold (a Mission created since): that Group is read at once;
* every ``safety_net_seconds``, the listing again, for hints that were lost; Groups no longer
  listed (their Mission closed) and reads that failed are let go then.

Each held reader is watched: whenever it grows, every standing subscriber that is, or was, a
member and has no live feed of the Group gets one (:attr:`Standing.attach`). A Group in which
the Agent never held a Membership produces nothing on its connection: no frame, no error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from mwp.core.trust.registry import RegistryEvidence
from mwp.gateway import MEMBER_GROUPS
from mwp.gateway.subscriptions import GroupReader, Readers
from mwp.gateway.waits import cancelled

__all__ = ["MEMBER_GROUPS", "Discovery", "Standing"]

CLAUSES: tuple[str, ...] = ("MWP-MSN-012",)

log = logging.getLogger(__name__)

# Groups read at once while a listing is taken in (each read is a verified read of its log).
DISCOVERY_READS = 8


@dataclass(eq=False)
class Standing:
    """One connection's standing subscription."""

    agent_id: str
    # Whether the connection already delivers the Group (a live feed).
    follows: Callable[[str], bool]
    # Start delivering the Group to the connection (its Agent is, or was, a member).
    attach: Callable[[GroupReader], Awaitable[None]]


class Discovery:
    """The Groups of the gateway's standing subscribers, found and watched."""

    def __init__(
        self,
        readers: Readers,
        groups: Callable[[], AsyncIterator[str]],
        *,
        safety_net_seconds: float,
        reads: int = DISCOVERY_READS,
    ) -> None:
        self.readers = readers
        self.groups = groups
        self.safety_net_seconds = safety_net_seconds
        self._slots = asyncio.Semaphore(reads)
        self._standing: set[Standing] = set()
        self._held: dict[str, GroupReader] = {}  # readers held for discovery only
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._finding: dict[str, asyncio.Task[None]] = {}
        self._attaching: dict[tuple[Standing, str], asyncio.Task[None]] = {}
        self._hinted: set[str] = set()  # held since the last listing through a hint
        self._tasks: set[asyncio.Task[Any]] = set()
        self._safety_net: asyncio.Task[None] | None = None

    @property
    def held(self) -> frozenset[str]:
        """The Groups whose readers discovery holds."""
        return frozenset(self._held)

    def add(self, standing: Standing) -> None:
        """Find ``standing``'s Groups now and keep finding them until :meth:`remove`."""
        self._standing.add(standing)
        for reader in list(self._held.values()):
            self._check(reader, (standing,))
        if self._safety_net is None:
            self._safety_net = asyncio.create_task(self._safety_net_reads(), name="discovery")
        self._spawn(self._list())

    async def remove(self, standing: Standing) -> None:
        self._standing.discard(standing)
        for key in [k for k in self._attaching if k[0] is standing]:
            task = self._attaching.pop(key)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not self._standing:
            await self._idle()

    def hint(self, group_id: str, last_sequence: int) -> None:
        """A Group's log grew: a Group not held yet is read now (a held one wakes itself)."""
        if self._standing and group_id not in self._held and group_id not in self._finding:
            self._hinted.add(group_id)
            self._find(group_id, None)

    async def close(self) -> None:
        """Stop finding for everyone and let every held reader go (the gateway stops)."""
        self._standing.clear()
        await self._idle()

    async def _idle(self) -> None:
        """No standing subscriber: stop finding, let the held readers go."""
        attaching = dict(self._attaching)
        tasks = [*self._tasks, *self._finding.values(), *attaching.values()]
        if self._safety_net is not None:
            tasks.append(self._safety_net)
        self._safety_net = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for key, task in attaching.items():
            if self._attaching.get(key) is task:
                del self._attaching[key]
        for group_id in list(self._held):
            if self._standing:
                return  # a standing SUBSCRIBE came meanwhile: what is still held serves it
            await self._drop(group_id)

    # --- finding --------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, object]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _list(self) -> set[str] | None:
        """Read every listed Group not held yet; the Group IDs listed (None: no listing)."""
        listed: set[str] = set()
        try:
            evidence = await self.readers.evidence()  # one query for every new reader
            async for group_id in self.groups():
                listed.add(group_id)
                if group_id not in self._held and group_id not in self._finding:
                    self._find(group_id, evidence)
        except Exception:  # visibility unreachable: hints and the next listing still find them
            log.warning("listing the running Missions failed", exc_info=True)
            return None
        return listed

    def _find(self, group_id: str, evidence: RegistryEvidence | None) -> None:
        """Find the Group, unless it is held or being found: one finding task per Group."""
        if group_id in self._held or group_id in self._finding:
            return
        task = asyncio.create_task(self._hold(group_id, evidence), name=f"find {group_id}")
        self._finding[group_id] = task
        task.add_done_callback(lambda _: self._found(group_id, task))

    def _found(self, group_id: str, task: asyncio.Task[None]) -> None:
        if self._finding.get(group_id) is task:
            del self._finding[group_id]

    async def _hold(self, group_id: str, evidence: RegistryEvidence | None) -> None:
        # A hinted Group (no evidence fetched for a listing) is read at once: the hot path.
        # A listing's Groups take turns.
        slot = self._slots if evidence is not None else contextlib.nullcontext()
        async with slot:
            if not self._standing or group_id in self._held:
                return
            try:
                reader = await self.readers.acquire(group_id, evidence=evidence)
            except Exception:
                log.warning("reading the Group log of %s failed", group_id, exc_info=True)
                return
        if not self._standing or group_id in self._held:  # one held use of a reader per Group
            await self.readers.release(group_id)
            return
        self._held[group_id] = reader
        self._watchers[group_id] = asyncio.create_task(
            self._watch(reader), name=f"watch {group_id}"
        )

    async def _watch(self, reader: GroupReader) -> None:
        seen = -1
        while True:
            if reader.head != seen:
                seen = reader.head
                self._check(reader, tuple(self._standing))
            if reader.fault is not None:
                return  # a failed read grows no more; the safety net reads it again
            await reader.beyond(seen)

    def _check(self, reader: GroupReader, standing: tuple[Standing, ...]) -> None:
        group_id = reader.group_id
        for subscriber in standing:
            key = (subscriber, group_id)
            if key in self._attaching or subscriber.follows(group_id):
                continue
            if not reader.timeline.ever_member(subscriber.agent_id):
                continue
            task = asyncio.create_task(self._attach(subscriber, reader, key))
            self._attaching[key] = task

    async def _attach(
        self, subscriber: Standing, reader: GroupReader, key: tuple[Standing, str]
    ) -> None:
        try:
            await subscriber.attach(reader)
        except Exception:
            log.exception("delivering %s to a standing subscriber failed", reader.group_id)
        finally:
            if self._attaching.get(key) is asyncio.current_task():
                del self._attaching[key]

    # --- the safety net -------------------------------------------------------------------

    async def _safety_net_reads(self) -> None:
        while True:
            await asyncio.sleep(self.safety_net_seconds)
            for group_id, reader in list(self._held.items()):
                if reader.fault is not None:  # read it again: the fault may have passed
                    await self._drop(group_id)
            hinted, self._hinted = self._hinted, set()
            listed = await self._list()
            if listed is None:
                continue
            for group_id in list(self._held):
                if group_id not in listed and group_id not in hinted:
                    await self._drop(group_id)  # its Mission closed; a hint finds it again

    async def _drop(self, group_id: str) -> None:
        # Out of the bookkeeping at once: a listing or hint meanwhile finds the Group again.
        held = self._held.pop(group_id, None)
        watcher = self._watchers.pop(group_id, None)
        try:
            if watcher is not None:
                await cancelled(watcher)
        finally:
            if held is not None:
                await self.readers.release(group_id)
