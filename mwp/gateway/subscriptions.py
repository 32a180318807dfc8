"""SUBSCRIBE delivery: one shared reader per Group, one feed per (connection, Group).

:class:`GroupReader` reads one Group's signed log with :mod:`mwp.log.delivery` (every entry
verified against the Registry evidence, accepted by the Organization's Group Authority,
hash-chained, in Group order, never over a gap) and evolves the Group's
:class:`~mwp.gateway.visibility.MembershipTimeline` from the same Events. It reads when a hint
says the log grew (:mod:`mwp.gateway.hints`, :meth:`GroupReader.notify`) and otherwise only
every ``safety_net_seconds``. :class:`Readers` shares one reader per Group among all the
gateway's subscribers.

:class:`Feed` delivers one Group to one connection's Agent from its position: each Event
passes the Membership check at send time (the timeline through the reader's head) and, when
live, the Agent's attention filter; a withheld Event still advances the position, which the
Agent learns from an ``ACK`` watermark frame. At most ``window`` delivered Events may wait for
the Agent's ``ACK``: then that Group alone is paused with ``BACKPRESSURE`` and resumes from its
position when the Agent acknowledges (MWP-MSN-014).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

from mwp import PROTOCOL_VERSION
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.log.cursor import Cursor
from mwp.core.models.websocket_frame import Attention
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.gateway.attention import wanted
from mwp.gateway.frames import error_frame, new_frame_id, now_text
from mwp.gateway.visibility import MembershipTimeline
from mwp.gateway.waits import cancelled, wait_at_most
from mwp.log.delivery import DeliveredEvent, subscribe
from mwp.log.whole_history import WholeGroupHistory
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = (
    "MWP-MSN-012",
    "MWP-MSN-013",
    "MWP-MSN-014",
    "MWP-EVT-009",
    "MWP-EVT-011",
)

log = logging.getLogger(__name__)

Send = Callable[[Mapping[str, Any]], Awaitable[None]]
T = TypeVar("T")

# How long a request waits for the Registry evidence a new reader verifies with, and for a
# reader's complete read of its log: then it gets a retryable error rather than no answer.
EVIDENCE_SECONDS: Final = 10.0
READ_SECONDS: Final = 30.0
# How long the gateway keeps reading a Group nobody uses any more (its readers' default is
# none): an upload or a COMMAND of a Group with no subscriber here (a reconnecting runtime's
# reconciliation) acquires and releases it each time, and a new reader reads and verifies the
# whole log again, after a Registry query that took 1 s in the demo's reconnection.
LINGER_SECONDS: Final = 5.0


class GroupReader:
    """One Group's verified Events and Membership timeline, read once for every subscriber."""

    def __init__(
        self,
        store: ObjectStore,
        group_id: str,
        evidence: RegistryEvidence,
        authority: Principal,
        *,
        safety_net_seconds: float,
    ) -> None:
        self.group_id = group_id
        self.events: list[DeliveredEvent] = []  # events[n - 1] is Event n
        self.timeline = MembershipTimeline(self._event_id)
        self.fault: MwpError | None = None
        self.safety_net_seconds = safety_net_seconds
        self.passes = 0  # completed reads to the end of the stored log
        self.stopped = False
        self._begun = 0  # reads begun
        # The whole history, archive included: every Membership starts at the first Event.
        history = WholeGroupHistory(store, group_id)
        self._subscription = subscribe(
            store, group_id, evidence, authority=authority, follow=False, log=history
        )
        self._hint = asyncio.Event()
        self._grown = asyncio.Event()
        self._passed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def head(self) -> int:
        return len(self.events)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"reader {self.group_id}")

    async def stop(self) -> None:
        """Stop reading; anyone still waiting on the reader gets a retryable fault."""
        try:
            if self._task is not None:
                await cancelled(self._task)
        finally:
            self.stopped = True
            if self.fault is None:
                self.fault = _unavailable(self.group_id, "reader-stopped")
            self._ended()

    def notify(self, last_sequence: int | None = None) -> None:
        """The log may have grown (through ``last_sequence``): read it now."""
        if last_sequence is None or last_sequence > self.head:
            self._hint.set()

    async def refresh(self) -> None:
        """Wait for a complete read of the log as it is now: one begun after this call (a
        read under way may have found the log's end before its latest Event)."""
        wanted = self._begun + 1
        self._hint.set()
        while self.passes < wanted and self.fault is None:
            self._passed.clear()
            await self._passed.wait()

    async def beyond(self, sequence: int) -> None:
        """Wait until the reader holds an Event after ``sequence`` (or has failed)."""
        while self.head <= sequence and self.fault is None:
            grown = self._grown
            await grown.wait()

    def entry(self, sequence: int) -> DeliveredEvent:
        return self.events[sequence - 1]

    def _event_id(self, sequence: int) -> str | None:
        return self.events[sequence - 1].event_id if 0 < sequence <= self.head else None

    def _wake(self) -> None:
        grown, self._grown = self._grown, asyncio.Event()
        grown.set()

    def _ended(self) -> None:
        """A read ended: wake whoever waits for it."""
        self._wake()
        self.passes += 1
        self._passed.set()

    async def _run(self) -> None:
        try:
            while True:
                self._hint.clear()
                self._begun += 1
                async for delivered in self._subscription:
                    if delivered.sequence != self.head + 1:
                        raise _log_fault(self.group_id, "duplicate-event-id")
                    self.timeline.evolve(delivered.event)
                    self.events.append(delivered)
                    if len(self.events) % 64 == 0:
                        self._wake()
                self._ended()
                # Not asyncio.wait_for: it can drop stop()'s cancellation (mwp.gateway.waits).
                await wait_at_most(self._hint, self.safety_net_seconds)
        except MwpError as exc:  # a log that fails verification, or lost below its archive
            log.error(
                "the Group log of %s cannot be delivered: %s: %s",
                self.group_id,
                exc.code,
                exc,
            )
            self.fault = exc
        except Exception:
            log.exception("reading the Group log of %s failed", self.group_id)
            self.fault = _log_fault(self.group_id, "reader-failed")
        self._ended()


class Readers:
    """The gateway's readers, one per Group with subscribers (or a SUBSCRIBE being decided)."""

    def __init__(
        self,
        store: ObjectStore,
        evidence: Callable[[], Awaitable[RegistryEvidence]],
        authority: Principal,
        *,
        safety_net_seconds: float,
        evidence_seconds: float = EVIDENCE_SECONDS,
        read_seconds: float = READ_SECONDS,
        linger_seconds: float = 0.0,
    ) -> None:
        self.store = store
        self.evidence = evidence
        self.authority = authority
        self.safety_net_seconds = safety_net_seconds
        self.evidence_seconds = evidence_seconds
        self.read_seconds = read_seconds
        self.linger_seconds = linger_seconds
        self._readers: dict[str, GroupReader] = {}
        self._users: dict[str, int] = {}
        self._lingering: dict[str, asyncio.TimerHandle] = {}  # unused readers, until dropped
        self._dropping: set[asyncio.Task[None]] = set()

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._readers

    async def acquire(
        self, group_id: str, *, evidence: RegistryEvidence | None = None
    ) -> GroupReader:
        """The Group's reader, with a complete read of the log as it is now (a new reader
        verifies with ``evidence``, by default the Registry's current one). A retryable
        ``INTERNAL_ERROR`` when either does not come in time, or the reader stopped."""
        reader = self._readers.get(group_id)
        self._users[group_id] = self._users.get(group_id, 0) + 1
        self._keep(group_id)
        try:
            if reader is None:
                if evidence is None:
                    evidence = await _within(
                        self.evidence_seconds,
                        self.evidence(),
                        group_id,
                        "registry-evidence-timeout",
                    )
                reader = self._readers.get(group_id)  # another SUBSCRIBE may have made it
                if reader is None:
                    reader = GroupReader(
                        self.store,
                        group_id,
                        evidence,
                        self.authority,
                        safety_net_seconds=self.safety_net_seconds,
                    )
                    self._readers[group_id] = reader
                    reader.start()
            await _within(self.read_seconds, reader.refresh(), group_id, "group-read-timeout")
            if reader.stopped:  # let go of by everyone else meanwhile (the gateway stops)
                raise _unavailable(group_id, "reader-stopped")
        except BaseException:
            await self.release(group_id)
            raise
        return reader

    def retain(self, group_id: str) -> GroupReader | None:
        """One more user of the Group's reader as it is now (no new read); None without one."""
        reader = self._readers.get(group_id)
        if reader is not None:
            self._users[group_id] = self._users.get(group_id, 0) + 1
            self._keep(group_id)
        return reader

    async def release(self, group_id: str) -> None:
        users = self._users.get(group_id, 0) - 1
        if users > 0:
            self._users[group_id] = users
            return
        self._users.pop(group_id, None)
        reader = self._readers.get(group_id)
        if reader is None:
            return
        if self.linger_seconds > 0 and reader.fault is None:
            loop = asyncio.get_running_loop()
            self._lingering[group_id] = loop.call_later(
                self.linger_seconds, self._drop_later, group_id, reader
            )
            return
        del self._readers[group_id]
        await reader.stop()

    def _keep(self, group_id: str) -> None:
        """A lingering reader is used again: it is not dropped."""
        handle = self._lingering.pop(group_id, None)
        if handle is not None:
            handle.cancel()

    def _drop_later(self, group_id: str, reader: GroupReader) -> None:
        self._lingering.pop(group_id, None)
        if self._users.get(group_id) or self._readers.get(group_id) is not reader:
            return
        del self._readers[group_id]
        task = asyncio.create_task(reader.stop(), name=f"drop reader {group_id}")
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)

    def notify(self, group_id: str, last_sequence: int) -> None:
        """A hint: wake the Group's reader, if this gateway has one."""
        reader = self._readers.get(group_id)
        if reader is not None:
            reader.notify(last_sequence)

    async def close(self) -> None:
        for handle in self._lingering.values():
            handle.cancel()
        self._lingering.clear()
        readers, self._readers = list(self._readers.values()), {}
        self._users.clear()
        for reader in readers:
            await reader.stop()
        for task in list(self._dropping):
            await task


class Feed:
    """One Group's delivery to one connection's Agent."""

    def __init__(
        self,
        reader: GroupReader,
        agent_id: str,
        *,
        start: int,
        acknowledged: int,
        attention: Attention | None,
        window: int,
        retry_after_ms: int,
        send: Send,
        related_frame_id: str,
        current: Callable[[], bool],
    ) -> None:
        self.reader = reader
        self.agent_id = agent_id
        self.position = start  # the last sequence passed: delivered or withheld
        self.acknowledged = acknowledged
        self.live_from = reader.head + 1  # Events after the log as it was at SUBSCRIBE
        self.attention = attention
        self.window = window
        self.retry_after_ms = retry_after_ms
        self.send = send
        self.related_frame_id = related_frame_id
        self.current = current
        self.unacknowledged: deque[int] = deque()
        self.paused = False
        self.backpressure_sent = 0
        self._room = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def group_id(self) -> str:
        return self.reader.group_id

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"feed {self.group_id}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancelled(self._task)

    def cancel(self) -> None:
        """Stop at once: nothing more is sent (:meth:`stop` waits for the end)."""
        if self._task is not None:
            self._task.cancel()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def acknowledge(self, sequence: int) -> None:
        """The Agent's durable Cursor reached ``sequence`` (checked by the caller)."""
        self.acknowledged = max(self.acknowledged, sequence)
        while self.unacknowledged and self.unacknowledged[0] <= self.acknowledged:
            self.unacknowledged.popleft()
        if len(self.unacknowledged) < self.window:
            self._room.set()

    def cursor(self, sequence: int) -> Cursor:
        entry = self.reader.entry(sequence)
        return Cursor(self.group_id, sequence, entry.signing_hash)

    def may_see(self, sequence: int) -> bool:
        return self.reader.timeline.may_see(self.agent_id, sequence)

    def _ended(self) -> bool:
        """The Agent's Membership has ended and delivery has passed its end: nothing more to
        say, not even how far the Group went on."""
        ended = self.reader.timeline.ended_at(self.agent_id)
        return ended is not None and self.position >= ended

    async def _run(self) -> None:
        announced: int | None = None
        delivered = self.position
        reader = self.reader
        while self.current():
            await reader.beyond(self.position)
            if reader.fault is not None:
                await self.send(_error_frame(reader.fault, self.related_frame_id))
                return
            if not self.current() or self._ended():
                return
            while self.position < reader.head and self.current():
                if len(self.unacknowledged) >= self.window:
                    await self._pause()
                    continue
                sequence = self.position + 1
                entry = reader.entry(sequence)
                if self.may_see(sequence) and (
                    sequence < self.live_from or wanted(self.attention, entry.event, self.agent_id)
                ):
                    await self.send(event_frame(entry.event))
                    self.unacknowledged.append(sequence)
                    delivered = sequence
                self.position = sequence
                if self._ended():
                    break
            if self.position != announced and (announced is None or self.position > delivered):
                # Nothing more for this Agent through position: its Cursor may pass the rest.
                await self.send(ack_frame(self.group_id, self.position))
                announced = self.position

    async def _pause(self) -> None:
        if not self.paused:
            self.paused = True
            self.backpressure_sent += 1
            error = MwpError(
                ErrorCode.BACKPRESSURE,
                "This Group is paused until its delivered Events are acknowledged.",
                group_id=self.group_id,
                retry_after_ms=self.retry_after_ms,
                diagnostic=Diagnostic("gateway", "group-window-full"),
            )
            await self.send(_error_frame(error, self.related_frame_id))
        self._room.clear()
        await wait_at_most(self._room, self.retry_after_ms / 1000)  # stop() is never lost
        if len(self.unacknowledged) < self.window:
            self.paused = False


def event_frame(event: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": new_frame_id(),
        "frameType": "EVENT",
        "event": dict(event),
    }


def ack_frame(group_id: str, sequence: int) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": new_frame_id(),
        "frameType": "ACK",
        "acknowledgements": [{"groupId": group_id, "sequence": sequence}],
        "sentAt": now_text(),
    }


def _error_frame(error: MwpError, related_frame_id: str) -> dict[str, Any]:
    return error_frame(error, related_frame_id=related_frame_id)


async def _within(seconds: float, wait: Awaitable[T], group_id: str, reason: str) -> T:
    try:
        async with asyncio.timeout(seconds):
            return await wait
    except TimeoutError:
        log.warning("%s of %s: no answer within %s s", reason, group_id, seconds)
        raise _unavailable(group_id, reason) from None


def _unavailable(group_id: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The Group log could not be read in time; try again.",
        group_id=group_id,
        retryable=True,
        diagnostic=Diagnostic("gateway", reason),
    )


def _log_fault(group_id: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The Group log could not be read.",
        group_id=group_id,
        diagnostic=Diagnostic("gateway", reason),
    )
