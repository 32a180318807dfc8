"""The agent's Group inboxes in gateway mode: the gateway subscription of its Groups, handed
in order to the Worker Scheduler as :class:`~mwp.agent.inbox.GroupInboxes` hands the store's
logs (the same ``deliver`` batches, slimmed the same way).

The gateway checked each Event's signature, chain and the agent's Membership before sending
it; the inbox keeps Group order, removes duplicates (delivery is at least once), signals what
concerns the Scheduler with the Cursor after it (built from the Event's own signing hash) and
then ``ACK``s that position to the gateway, which keeps it as the agent's durable Cursor on
the authority side. The inbox asks the gateway for every Group the agent is a member of (the
standing subscription, ``MEMBER_GROUPS``): the gateway attaches a Group once the agent is
admitted or offered work there, each from the agent's stored Cursor, so the runtime needs no
list of Groups and learns nothing of a Group it may not see.

The gateway resumes a Group after the agent's stored Cursor, never before it, so what a run
must know of older Events (a WorkItem's contract, the agent's Membership Epoch) is kept in a
**journal** in the agent's own store: every Event taken is written there (write-once, one
object per Group and round, named by the sequences it holds) before its position is
acknowledged, and a restarted runtime rebuilds its
:class:`~mwp.agent.gateway_views.GroupViews` from it, for each Group its Scheduler holds as
soon as it subscribes (a quiet Group may send nothing for a long while). Runtimes before the
batched journal wrote one object per Event; both are read. Each agent journals under its own
key prefix: agents run from one state folder share its store, and one agent's journal is not
another's history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Container, Mapping
from typing import Any

from websockets.exceptions import ConnectionClosed

from mwp.agent.gateway_link import GatewayLink
from mwp.agent.gateway_views import mission_of
from mwp.agent.inbox import concerns, slim
from mwp.core.errors import ErrorCode
from mwp.core.log.cursor import Cursor
from mwp.core.log.event_log import group_segment
from mwp.core.models.websocket_frame import AckFrame, ErrorFrame, EventFrame
from mwp.core.trust.signed_document import signing_hash
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.gateway import MEMBER_GROUPS
from mwp.gateway.frames import Incoming
from mwp.stores.objects import ObjectStore

Json = dict[str, Any]
log = logging.getLogger(__name__)

CLAUSES: tuple[str, ...] = ("MWP-WRK-008", "MWP-MSN-012")

JOURNAL_PREFIX = "gateway-journals/"  # then the agent's segment: agents may share one store
# Where runtimes before 0.6.1 journaled, per Group only: read while an agent has nothing of its
# own for a Group yet, so a runtime upgraded mid-Mission still rebuilds what it had.
LEGACY_JOURNAL_PREFIX = "gateway-journal/"
# How often the inbox compares the Scheduler's Cursors with what it signalled: a Scheduler
# rebuilt from nothing is fed again within this long.
RESYNC_SECONDS = 5.0


def _journal_prefix(group_id: str, agent_id: str | None) -> str:
    if agent_id is None:
        return f"{LEGACY_JOURNAL_PREFIX}{group_segment(group_id)}/"
    return f"{JOURNAL_PREFIX}{group_segment(agent_id)}/{group_segment(group_id)}/"


def journal_key(
    group_id: str, first: int, last: int | None = None, *, agent_id: str | None = None
) -> str:
    """One Event's object (``last`` None: as runtimes before batching wrote them) or a round's
    (its lowest and highest sequence); both sort by their first sequence. ``agent_id`` None:
    the key a runtime before 0.6.1 wrote."""
    span = f"{first:016d}" if last is None else f"{first:016d}-{last:016d}"
    return f"{_journal_prefix(group_id, agent_id)}{span}.json"


def read_journal(store: ObjectStore, group_id: str, agent_id: str | None = None) -> list[Json]:
    """The Events ``agent_id`` journaled for ``group_id``, in Group order, each once (a round
    written again after a crash may overlap an earlier one); the legacy journal of the Group
    when the agent has none of its own there."""
    own = _read_prefix(store, _journal_prefix(group_id, agent_id))
    if own or agent_id is None:
        return own
    return _read_prefix(store, _journal_prefix(group_id, None))


def _read_prefix(store: ObjectStore, prefix: str) -> list[Json]:
    events: dict[int, Json] = {}
    after: str | None = None
    while True:
        keys = store.list_keys(prefix, after=after)
        for key in keys:
            data = store.get(key)
            if data is None:
                continue
            value = parse_bytes(data)
            for event in value if isinstance(value, list) else [value]:
                events.setdefault(int(event["sequence"]), event)
        if len(keys) < 1000:
            return [events[sequence] for sequence in sorted(events)]
        after = keys[-1]


class GroupFeed:
    """One Group's reading state: where the feed is, what the Scheduler holds.

    The subscription delivers in Group order, and never withholds an Event caused by one of
    this runtime's own Commands (it was a member to send it). Such an Event also comes as the
    Command's receipt, which may run ahead of the subscription, so an own Event is parked
    until it is certainly next: its second copy came (then the subscription reached it), or
    the position reached the sequence before it, or the subscription delivered something
    later (an Event of another actor, or a watermark)."""

    def __init__(self, group_id: str, held: Json | None) -> None:
        self.group_id = group_id
        self.held = held  # the Cursor the Scheduler holds (the last one signalled)
        self.position = 0 if held is None else int(held["sequence"])
        self.cursor: Json | None = held
        self.acked = self.position
        self.mission_id = ""
        self.batch: list[Json] = []
        self.parked: dict[int, Json] = {}  # own Events not known to be next yet, by sequence
        self.unjournaled: list[Json] = []

    def take(self, event: Mapping[str, Any], own_actions: Container[str]) -> list[Json]:
        """The Events ``event`` lets the feed move on by, in Group order (often just it,
        possibly none); the position and Cursor move with them."""
        sequence = int(event["sequence"])
        if sequence <= self.position:
            return []  # a duplicate of what the feed delivered before
        cause = event.get("cause") or {}
        if cause.get("type") == "command" and cause.get("id") in own_actions:
            if sequence not in self.parked:
                self.parked[sequence] = dict(event)
                return self._release(self.position)  # taken at once if it is next
            return self._release(sequence)  # the second copy: the subscription reached it
        before = self._release(sequence - 1)
        return [*before, *self._advance(dict(event)), *self._release(self.position)]

    def watermark(self, sequence: int) -> list[Json]:
        """Nothing more for this agent through ``sequence``: parked Events up to it are
        taken, and the position passes it."""
        released = self._release(sequence)
        self.position = max(self.position, sequence)
        return [*released, *self._release(self.position)]

    def replay(self, held: Json | None, journaled: list[Json]) -> list[Json]:
        """Start again from ``held``, the Cursor the Scheduler holds (None: nothing), with the
        journaled Events after it; those Events, in Group order."""
        self.held = self.cursor = held
        self.position = 0 if held is None else int(held["sequence"])
        self.batch = []
        return [taken for event in journaled for taken in self._advance(dict(event))]

    def _release(self, through: int) -> list[Json]:
        """Parked Events through ``through``, then any parked one that is next."""
        released: list[Json] = []
        for sequence in sorted(self.parked):
            if sequence <= through or sequence == self.position + 1:
                released += self._advance(self.parked.pop(sequence))
        return released

    def _advance(self, event: Json) -> list[Json]:
        sequence = int(event["sequence"])
        if sequence <= self.position:
            return []
        self.position = sequence
        self.cursor = Cursor(self.group_id, sequence, signing_hash(event)).to_json()
        return [event]


class GatewayInboxes:
    """Feeds a Worker Scheduler from the gateway (see the module docstring)."""

    def __init__(
        self,
        link: GatewayLink,
        cursors: Callable[[], Awaitable[Mapping[str, Json]]],
        deliver: Callable[[Json], Awaitable[None]],
        *,
        agent_id: str,
        journal: ObjectStore,
    ) -> None:
        self.link = link
        self.journal = journal
        self.agent_id = agent_id
        self.resync_seconds = RESYNC_SECONDS
        self._cursors = cursors
        self._deliver = deliver
        self._held: Mapping[str, Json] = {}
        self._groups: dict[str, GroupFeed] = {}
        self._frames: asyncio.Queue[Incoming] = asyncio.Queue()
        self.delivered = 0
        link.listener = self._frames.put_nowait

    async def run(self, stop: asyncio.Event) -> None:
        """Subscribe and feed the Scheduler until ``stop`` is set or the link closes."""
        self._held = await self._cursors()
        try:
            await self.link.subscribe([{"groupId": MEMBER_GROUPS, "afterSequence": 0}])
        except ConnectionClosed:
            return  # the link is closing: the runtime reconnects or stops
        # The Groups the Scheduler holds get their views from the journal now, not at their
        # first frame: a quiet Group sends none, and a run of its WorkItem must read it.
        for group_id in self._held:
            await self._feed(group_id)
        loop = asyncio.get_running_loop()
        checked = loop.time()
        while not stop.is_set() and not self.link.closed.is_set():
            # Only the wait is bounded: a frame being taken is never cut off (taking one may
            # read the journal or retrieve a Context Package's cited Events). asyncio.timeout,
            # not wait_for: on 3.11 wait_for drops a cancellation that lands as a frame
            # arrives, and this loop would run on after its runtime cancelled it.
            incoming: Incoming | None = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    incoming = await self._frames.get()
            if incoming is not None:
                await self._take(incoming)
            while not self._frames.empty():
                await self._take(self._frames.get_nowait())
            try:
                await self._flush()
                if loop.time() - checked >= self.resync_seconds:
                    checked = loop.time()
                    await self._resync()
            except Exception:  # kept batches are signalled again at the next round
                log.exception("gateway inbox round failed")

    # --- frames ------------------------------------------------------------------------------

    async def _take(self, incoming: Incoming) -> None:
        frame, value = incoming.frame, incoming.value
        if isinstance(frame, EventFrame):
            event = value["event"]
            group = await self._feed(str(event["groupId"]))
            for taken in group.take(event, self.link.own_actions):
                for cited in await self.link.learn_offered(group.group_id, taken):
                    group.batch.append({**slim(cited), "cited": True})  # terms, checkpoint
                    group.unjournaled.append(cited)  # a rebuild replays it in Group order
                self._in_order(group, taken)
        elif isinstance(frame, AckFrame):
            for ack in value["acknowledgements"]:
                group = await self._feed(str(ack["groupId"]))
                for taken in group.watermark(int(ack["sequence"])):
                    self._in_order(group, taken)
        elif isinstance(frame, ErrorFrame):
            self._refused(value["error"])

    async def _feed(self, group_id: str) -> GroupFeed:
        """The Group's feed; for a Group new to this runtime, made from what the Scheduler
        holds and the journal (the Events before the stored Cursor the gateway resumes at)."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = GroupFeed(group_id, self._held.get(group_id))
            views = self.link.group(group_id)
            journaled = await asyncio.to_thread(read_journal, self.journal, group_id, self.agent_id)
            for event in journaled:
                views.apply(event)
            group.mission_id = views.mission_id or ""
            self._replay(group, group.held, journaled)
        return group

    async def _resync(self) -> None:
        """A Scheduler that lost its state (a new run of the AgentWorkflow) holds another
        Cursor than the one last signalled: it is fed again from its own, out of the journal
        (the gateway resumes only after the stored Cursor)."""
        held = await self._cursors()
        for group in self._groups.values():
            stored = held.get(group.group_id)
            if stored != group.held:
                journaled = await asyncio.to_thread(
                    read_journal, self.journal, group.group_id, self.agent_id
                )
                self._replay(group, stored, journaled)
        await self._flush()

    def _replay(self, group: GroupFeed, held: Json | None, journaled: list[Json]) -> None:
        for event in group.replay(held, journaled):
            if concerns(event, self.agent_id):
                group.batch.append(slim(event))

    def _in_order(self, group: GroupFeed, event: Json) -> None:
        self.link.group(group.group_id).apply(event)
        group.unjournaled.append(event)
        if not group.mission_id:
            group.mission_id = mission_of(event) or ""
        if concerns(event, self.agent_id):
            group.batch.append(slim(event))

    def _write_journal(self, group_id: str, events: list[Json]) -> None:
        # One durable write per round, not per Event: each write is fsynced.
        sequences = [int(event["sequence"]) for event in events]
        key = journal_key(group_id, min(sequences), max(sequences), agent_id=self.agent_id)
        self.journal.put_if_absent(key, canonicalize(events))

    def _refused(self, wire: Mapping[str, Any]) -> None:
        group = self._groups.get(str(wire.get("groupId")))
        if wire.get("code") == ErrorCode.PROTOCOL_VIOLATION and group is not None:
            # An ACK ahead of the subscription (the position moved on with a receipt that
            # came first): not stored, so it is sent again once the subscription caught up.
            group.acked = 0
            log.debug("gateway refused an ACK of %s ahead of its delivery", group.group_id)
        elif wire.get("code") == ErrorCode.BACKPRESSURE:
            pass  # the window frees as this inbox ACKs what it signalled
        else:
            log.warning("gateway error: %s", dict(wire))

    async def _flush(self) -> None:
        for group in self._groups.values():
            if group.batch and not group.mission_id and group.held is None:
                continue  # the Scheduler needs the Mission ID of a new Group; the batch waits
            if group.unjournaled:
                await asyncio.to_thread(self._write_journal, group.group_id, group.unjournaled)
                group.unjournaled = []
            if group.batch:
                assert group.cursor is not None
                await self._deliver(
                    {
                        "groupId": group.group_id,
                        "missionId": group.mission_id,
                        "events": group.batch,
                        "held": group.held,
                        "cursor": group.cursor,
                    }
                )
                self.delivered += len(group.batch)
                group.held, group.batch = group.cursor, []
            if group.position > group.acked:
                await self.link.ack(group.group_id, group.position)
                group.acked = group.position
