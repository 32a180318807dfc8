"""The agent process's gateway connection across reconnects, and its offline buffer.

A :class:`GatewayConnection` outlives each :class:`~mwp.agent.gateway_link.GatewayLink`: the
worker, its activities and the runs in flight hold the connection, and reach the Group through
whichever link is current (:meth:`GatewayConnection.current`; none while the runtime is
reconnecting, which is :class:`~mwp.agent.offline.Disconnected`). A run that loses the Group
may go on with reversible work until its grace deadline, buffering its checkpoints here
(``mwp.agent.offline``); the reconnecting runtime calls :meth:`GatewayConnection.reconcile`
with the new link before it attaches it, so every buffered Command is decided before the new
Session starts, publishes or submits anything. With a ``journal`` the buffer is also kept in
the agent's own store, so a runtime that died offline reconciles it after its restart
(``mwp.agent.offline_buffer``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mwp.agent.declaration import Agent
from mwp.agent.gateway_link import GatewayLink
from mwp.agent.offline import DEFAULT_GRACE_SECONDS, Disconnected, reconciled
from mwp.agent.offline_buffer import Buffered, OfflineBuffer
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.offline_execution import MAX_GRACE_SECONDS
from mwp.core.wire.values import format_utc
from mwp.stores.objects import ObjectStore

Json = dict[str, Any]

# Seconds between the asks of a reconciled Command the Group refused as from a stale Session
# (about 10 s in all, then the refusal is final). The Group usually learns the Session within
# a few tenths of a second of the HELLO, so the first asks come close together: a refusal is
# cheap and changes nothing, and a wait of 0.5 s after it had learned cost the run that long.
SESSION_LEARNED_DELAYS: tuple[float, ...] = (0.1, 0.1, 0.1, 0.2, 0.2, 0.4, 0.8, 1.6, 2, 2, 2.25)

CLAUSES: tuple[str, ...] = ("MWP-WRK-020", "MWP-WRK-021", "MWP-WRK-022")


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What the Group decided for one buffered Command."""

    work_item_id: str
    action_id: str
    kinds: tuple[str, ...] = ()  # the Events it produced; empty when refused
    refusal: str | None = None  # the error code when refused


class GatewayConnection:
    """The runtime's current gateway link, replaced on reconnect (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        *,
        grace_seconds: int = DEFAULT_GRACE_SECONDS,
        journal: ObjectStore | None = None,  # the agent's own store: the buffer outlives us
        report: Callable[[str], None] = lambda line: None,  # one line per reconciliation
    ) -> None:
        if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
            raise ValueError(f"the offline grace is 0 to {MAX_GRACE_SECONDS} seconds")
        self.agent = agent
        self.grace_seconds = grace_seconds
        self.buffer = OfflineBuffer(journal, agent.agent_id)
        self.card_version: int | None = None  # the Registry's, read through each new link
        self.reconciliations: list[Reconciliation] = []
        self._report = report
        self._link: GatewayLink | None = None
        self._last: GatewayLink | None = None
        self._lost_at: str | None = None

    # --- the link ----------------------------------------------------------------------------

    def attach(self, link: GatewayLink) -> None:
        self._link = self._last = link
        self._lost_at = None

    def detach(self, link: GatewayLink) -> None:
        if self._link is link:
            self._link = None
            self._lost_at = format_utc(datetime.now(UTC))

    def current(self) -> GatewayLink:
        """The link to send through; :class:`Disconnected` while there is none."""
        link = self._link
        if link is None:
            raise Disconnected("the runtime is reconnecting to the gateway")
        if link.closed.is_set():
            self.detach(link)
            raise Disconnected("the gateway connection closed")
        return link

    # --- offline runs ------------------------------------------------------------------------

    def disconnected_at(self) -> str:
        """When the Group was lost (now, if the link has not noticed yet)."""
        if self._link is not None and self._link.closed.is_set():
            self.detach(self._link)
        return self._lost_at or format_utc(datetime.now(UTC))

    def membership_epoch(self, group_id: str) -> int | None:
        """The agent's Membership Epoch in ``group_id`` as the last link delivered it."""
        link = self._link or self._last
        if link is None:
            return None
        epoch = link.group(group_id).epochs().get("membershipEpoch")
        return epoch if isinstance(epoch, int) else None

    def keep(self, session_epoch: int, entry: Buffered) -> None:
        self.buffer.keep(session_epoch, entry)

    def ended(self, session_epoch: int) -> bool:
        return self.buffer.sealed(session_epoch)

    def reachable(self) -> bool:
        return self._link is not None and not self._link.closed.is_set()

    async def reconcile(self, link: GatewayLink) -> list[Reconciliation]:
        """Decide, through ``link`` (the new Session's), what runs of older Sessions buffered:
        each checkpoint state uploaded, then its Command re-signed under the new Session and
        sent. A refusal is final (reported); a lost link puts the rest back for the next."""
        pending = self.buffer.drain(link.session_epoch)
        decided: list[Reconciliation] = []
        for index, entry in enumerate(pending):
            try:
                decided.append(await self._reconcile_one(link, entry))
            except Disconnected:
                self.buffer.put_back(pending[index:])
                raise
            await asyncio.to_thread(self.buffer.decided, entry)
        self.reconciliations += decided
        return decided

    async def _reconcile_one(self, link: GatewayLink, entry: Buffered) -> Reconciliation:
        command = entry.command
        item = str(command.get("workItemId"))
        if entry.checkpoint is not None:
            ref = await link.upload(command["groupId"], entry.checkpoint)
            expected = "sha256:" + hashlib.sha256(entry.checkpoint).hexdigest()
            if ref != expected:
                raise ValueError(f"the gateway stored the checkpoint as {ref}, not {expected}")
        signed = reconciled(
            command,
            self.agent.identity,
            session_epoch=link.session_epoch,
            membership_epoch=command.get("membershipEpoch"),
        )
        try:
            events = await self._sent(link, signed)
        except Disconnected:
            raise
        except MwpError as error:
            self._report(
                f"offline progress of {item} refused on reconnect: "
                f"{error.code.value} ({error.message})"
            )
            return Reconciliation(item, command["actionId"], refusal=error.code.value)
        kinds = tuple(str(e["kind"]) for e in events)
        self._report(f"offline progress of {item} reconciled ({', '.join(kinds)})")
        return Reconciliation(item, command["actionId"], kinds)

    async def _sent(self, link: GatewayLink, signed: Json) -> list[Json]:
        """The Events of ``signed``. The Group learns the new Session from the Registry a
        moment after the HELLO opened it: until then it refuses the Session as stale (a
        refusal changes nothing), so that answer is asked again for a while before it is
        final; the proof of concept lost a buffered usage record to it."""
        for delay in SESSION_LEARNED_DELAYS:
            try:
                return await link.command(signed)
            except MwpError as error:
                if error.code is not ErrorCode.AUTH_STALE_SESSION:
                    raise
            await asyncio.sleep(delay)
        return await link.command(signed)
